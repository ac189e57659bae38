"""virtio-scsi: a virtio SCSI controller (iothread and queues on the controller) with one LUN."""
from __future__ import annotations

from harness.backends.base import AIO, CACHE, IOTHREADS, NUM_QUEUES, Attachment, Backend, HostPlan, VmSlot, data_disk, iothreads
from harness.libvirt.libvirt_xml import attr


class VirtioScsi(Backend):
    name = "virtio-scsi"
    shared_options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    knobs = (AIO, CACHE, IOTHREADS, NUM_QUEUES)
    summary = "virtio-scsi controller with a scsi-hd LUN"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        iothread_attr, iothreads_xml = iothreads(plan.disk["iothreads"])
        controller = (f"<controller type='scsi' index='0' model='virtio-scsi'>"
                      f"<driver queues={attr(plan.disk['num_queues'])}{iothread_attr}/></controller>")
        return Attachment(devices_xml=controller + data_disk(plan, vm, "sda", "scsi"), domain_xml=iothreads_xml)


BACKEND = VirtioScsi()
