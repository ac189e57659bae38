"""virtio-blk: QEMU's paravirtual block device, with cache/aio, iothreads and queues."""
from __future__ import annotations

from harness.backends.base import DATA_SERIAL, Attachment, Backend, HostPlan, VmSlot, attr, disk_source


class VirtioBlk(Backend):
    name = "virtio-blk"
    options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    summary = "virtio-blk PCI device, QEMU block layer"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        d = plan.disk
        kind, source = disk_source(plan.device, vm)
        iothread = f" iothread='1'" if d["iothreads"] else ""
        disk = (f"<disk type={attr(kind)} device='disk'>"
                f"<driver name='qemu' type='raw' cache={attr(d['cache'])} io={attr(d['aio'])}"
                f" queues={attr(d['num_queues'])}{iothread}/>"
                f"{source}<target dev='vdb' bus='virtio'/><serial>{DATA_SERIAL}</serial><shareable/></disk>")
        domain = f"<iothreads>{d['iothreads']}</iothreads>" if d["iothreads"] else ""
        return Attachment(devices_xml=disk, domain_xml=domain)


BACKEND = VirtioBlk()
