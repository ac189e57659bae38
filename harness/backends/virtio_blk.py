"""virtio-blk: QEMU's paravirtual block device, with cache/aio, iothreads and queues."""
from __future__ import annotations

from harness.backends.base import AIO, CACHE, IOTHREADS, NUM_QUEUES, Attachment, Backend, HostPlan, VmSlot, data_disk, iothreads
from harness.libvirt.libvirt_xml import attr


class VirtioBlk(Backend):
    name = "virtio-blk"
    shared_options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    knobs = (AIO, CACHE, IOTHREADS, NUM_QUEUES)
    summary = "virtio-blk PCI device, QEMU block layer"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        iothread_attr, iothreads_xml = iothreads(plan.disk["iothreads"])
        disk = data_disk(plan, vm, "vdb", "virtio", f" queues={attr(plan.disk['num_queues'])}{iothread_attr}")
        return Attachment(devices_xml=disk, domain_xml=iothreads_xml)


BACKEND = VirtioBlk()
