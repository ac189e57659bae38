"""Disk backends: how a VM's data disk is served. One module per backend, found automatically:
a module here that defines BACKEND is a backend; adding one touches that file and its tests.

The seam: an experiment never knows how a backend attaches a disk; a backend never knows which
experiment runs.
"""
from __future__ import annotations

from functools import cache
from typing import Annotated

from pydantic import AfterValidator

from harness.backends.base import Attachment, Backend, HostDevice, HostPlan, HostProcess, VmSlot
from harness.common.plugins import discover

__all__ = ["Attachment", "Backend", "BackendNames", "HostDevice", "HostPlan", "HostProcess", "VmSlot", "all_backends",
           "get", "host_processes", "option_fields", "read_plan", "storeless"]


@cache
def all_backends() -> dict[str, Backend]:
    return discover(__name__, __path__, "BACKEND")


def get(name: str) -> Backend:
    try:
        return all_backends()[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(all_backends())}") from None


@cache
def storeless() -> str:
    """The backend whose device stores nothing (`stores_nothing`): what the latency breakdown
    measures the virtualization layers alone with."""
    names = [name for name, b in all_backends().items() if b.stores_nothing]
    if len(names) != 1:
        raise ValueError(f"exactly one backend may declare stores_nothing; these do: {names or 'none'}")
    return names[0]


def read_plan(text: str) -> HostPlan:
    """A host plan read back from disk (gc acts as root on what it names): every field checked
    (HostPlan.from_json), its backend known, and that backend's own [disk] fields by its own rules
    (vfio's pci_address a PCI address); ValueError naming the first that is not what vtb writes."""
    plan = HostPlan.from_json(text)
    if (backend := all_backends().get(plan.disk.get("backend"))) is None:
        raise ValueError(f"disk.backend {plan.disk.get('backend')!r} is no backend")
    try:
        backend.Options.model_validate({k: v for k, v in plan.disk.items() if k in backend.Options.model_fields})
    except ValueError as e:
        raise ValueError(f"disk: {e}") from None
    return plan


def host_processes() -> list[HostProcess]:
    """Every backend's host-side daemons, each once."""
    return list(dict.fromkeys(p for b in all_backends().values() for p in b.processes))


def option_fields() -> dict[str, tuple]:
    """Every backend's own [disk] fields, as create_model field definitions (one owner per name)."""
    fields, owner = {}, {}
    for b in all_backends().values():
        for name, info in b.Options.model_fields.items():
            if name in owner and owner[name] != type(b).Options:
                raise TypeError(f"disk.{name} is declared by both {owner[name].__name__} and {b.Options.__name__}")
            fields[name], owner[name] = (info.annotation, info), type(b).Options
    return fields


def _known(names: list[str]) -> list[str]:
    """The names, each a known backend (ValueError naming the choices), each once, in order."""
    for n in names:
        get(n)
    return list(dict.fromkeys(names))


BackendNames = Annotated[list[str], AfterValidator(_known)]  # a settings field: names of known backends
