"""Disk backends: how a VM's data disk is served. One module per backend, found automatically:
a module here that defines BACKEND is a backend; adding one touches that file and its tests.

The seam: an experiment never knows how a backend attaches a disk; a backend never knows which
experiment runs.
"""
from __future__ import annotations

from functools import cache

from harness.backends.base import Attachment, Backend, HostDevice, HostPlan, VmSlot
from harness.plugins import discover

__all__ = ["Attachment", "Backend", "HostDevice", "HostPlan", "VmSlot", "all_backends", "get"]


@cache
def all_backends() -> dict[str, Backend]:
    return discover(__name__, __path__, "BACKEND")


def get(name: str) -> Backend:
    try:
        return all_backends()[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(all_backends())}") from None
