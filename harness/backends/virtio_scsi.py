"""virtio-scsi: a virtio SCSI controller (iothread and queues on the controller) with one LUN."""
from __future__ import annotations

from harness.backends.base import DATA_SERIAL, Attachment, Backend, HostPlan, VmSlot, attr, disk_source


class VirtioScsi(Backend):
    name = "virtio-scsi"
    options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    summary = "virtio-scsi controller with a scsi-hd LUN"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        d = plan.disk
        kind, source = disk_source(plan.device, vm)
        iothread = f" iothread='1'" if d["iothreads"] else ""
        controller = (f"<controller type='scsi' index='0' model='virtio-scsi'>"
                      f"<driver queues={attr(d['num_queues'])}{iothread}/></controller>")
        disk = (f"<disk type={attr(kind)} device='disk'>"
                f"<driver name='qemu' type='raw' cache={attr(d['cache'])} io={attr(d['aio'])}/>"
                f"{source}<target dev='sda' bus='scsi'/><serial>{DATA_SERIAL}</serial><shareable/></disk>")
        domain = f"<iothreads>{d['iothreads']}</iothreads>" if d["iothreads"] else ""
        return Attachment(devices_xml=controller + disk, domain_xml=domain)


BACKEND = VirtioScsi()
