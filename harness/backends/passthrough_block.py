"""passthrough-block: a host block device (or md array) given to the guest raw, with no host
page cache: cache=none and aio=native or io_uring. The disk is virtio-blk's; what differs is that
the source must be a real block device. Each VM gets its slice of the device; one VM with
fleet.disk_size_mib equal to the device size gets all of it."""
from __future__ import annotations

from harness.backends.base import HostPlan
from harness.backends.virtio_blk import VirtioBlk
from harness.hosts import LocalHost


class PassthroughBlock(VirtioBlk):
    name = "passthrough-block"
    summary = "host block device, raw, cache=none"
    needs_block_device = True

    def check(self, disk) -> str | None:
        if disk.cache != "none":
            return "passthrough-block needs disk.cache=none (it bypasses the host page cache)"
        if disk.aio not in ("native", "io_uring"):
            return "passthrough-block needs disk.aio=native or io_uring"
        return None

    def preflight(self, host: LocalHost, plan: HostPlan) -> str | None:
        if plan.device.kind != "block":
            return "it needs a host block device: set fleet.device to an unused block device (or md array)"
        return None


BACKEND = PassthroughBlock()
