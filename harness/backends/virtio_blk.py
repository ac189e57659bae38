"""virtio-blk: QEMU's paravirtual block device, with its cache/aio/iothread knobs."""
from __future__ import annotations

from harness.config import DiskConfig
from harness.hosts import LocalHost

DATA_SERIAL = "vtb-data"  # the guest runner finds the data disk by this serial


class VirtioBlk:
    name = "virtio-blk"

    def preflight(self, host: LocalHost) -> str | None:
        return None  # every QEMU has it

    def terraform_data(self, disk: DiskConfig) -> dict:
        return {"serial": DATA_SERIAL, "cache": disk.cache, "io": disk.aio, "iothreads": disk.iothreads}

    def metadata(self, disk: DiskConfig) -> dict:
        return {"backend": self.name, "cache": disk.cache, "aio": disk.aio, "iothreads": disk.iothreads}
