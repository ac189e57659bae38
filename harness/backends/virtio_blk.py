"""virtio-blk: QEMU's paravirtual block device, with cache/aio, iothreads, queues and their size."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from harness.backends.base import (
    AIO,
    CACHE,
    IOTHREADS,
    NUM_QUEUES,
    Attachment,
    Backend,
    HostPlan,
    Knob,
    VmSlot,
    data_disk,
    iothreads,
)
from harness.common.schema import Section
from harness.libvirt.libvirt_xml import attr


def _queue_size(n: int) -> int:
    if n & (n - 1) or not 4 <= n <= 1024:
        raise ValueError("a virtqueue's size is a power of two from 4 to 1024 (QEMU's range; its default is 256)")
    return n


class VirtioBlkOptions(Section):
    queue_size: Annotated[int, AfterValidator(_queue_size)] = Field(
        256, description="virtio-blk: entries in each virtqueue (libvirt's queue_size; a power of two, 4-1024; "
                         "256 is QEMU's default)")


QUEUE_SIZE = Knob("queue_size", (256, 1024), "entries per virtqueue: more requests in flight per queue, more guest "
                                             "memory pinned for the ring")


class VirtioBlk(Backend):
    name = "virtio-blk"
    shared_options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    Options = VirtioBlkOptions
    knobs = (AIO, CACHE, IOTHREADS, NUM_QUEUES, QUEUE_SIZE)
    summary = "virtio-blk PCI device, QEMU block layer"

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        iothread_attr, iothreads_xml = iothreads(plan.disk["iothreads"])
        size = plan.disk.get("queue_size")   # absent from a plan written before the option was
        disk = data_disk(plan, vm, "vdb", "virtio", f" queues={attr(plan.disk['num_queues'])}"
                                                    f"{f' queue_size={attr(size)}' if size else ''}{iothread_attr}")
        return Attachment(devices_xml=disk, domain_xml=iothreads_xml)


BACKEND = VirtioBlk()
