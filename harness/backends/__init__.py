"""Disk backends: how a VM's data disk is served. One module per backend, registered here by name.

The seam: an experiment never knows how a backend attaches a disk; a backend never knows which
experiment runs.
"""
from __future__ import annotations

from typing import Protocol

from harness.config import DiskConfig
from harness.hosts import LocalHost


class Backend(Protocol):
    name: str

    def preflight(self, host: LocalHost) -> str | None:
        """None when this host can serve the backend, else one sentence saying why not."""

    def terraform_data(self, disk: DiskConfig) -> dict:
        """The data-disk settings the fleet module renders into each domain."""

    def metadata(self, disk: DiskConfig) -> dict:
        """What every result row records about the backend."""


def get(name: str) -> Backend:
    from harness.backends import virtio_blk
    registry = {b.name: b for b in (virtio_blk.VirtioBlk(),)}
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(sorted(registry))}") from None
