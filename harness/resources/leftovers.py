"""What each resource leaves behind when a run is killed, and how `harness gc` removes it.

A resource module declares `LEFTOVERS`, a tuple of `Leftover`; gc (harness.fleet.gc) finds them
in every module of this package and runs them on each host it collects, after that host's guests
and processes are gone. Adding a resource is its module alone: gc names none of them."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.hosts import Host


@dataclass(frozen=True)
class Scope:
    """One pass of gc: the host, the name prefix it removes, the prefixes live state owns (kept),
    and the state dirs of this machine whose records may be read."""
    host: Host
    prefix: str
    keep: tuple[str, ...]
    state_dirs: tuple[Path, ...]


@dataclass(frozen=True)
class Leftover:
    what: str                                  # e.g. "hugepages an SPDK target reserved"
    remove: Callable[[Scope], list[str]]       # says what it removed, and in parentheses what it did not
    on_this_machine: bool = True               # else on the other hosts gc reaches (an ssh or nested host)
    by_record_only: bool = False               # only when gc reads the dead fleets' records, never in a
                                               # fleet's own teardown (which may still use what it names)


def registered() -> list[Leftover]:
    """Every resource module's leftovers, in the order of the modules' names."""
    import harness.resources as package
    found = []
    for mod in sorted(pkgutil.walk_packages(package.__path__, f"{package.__name__}."), key=lambda m: m.name):
        found += getattr(importlib.import_module(mod.name), "LEFTOVERS", ())
    return found


def remove_all(scope: Scope, by_record: bool = False) -> list[str]:
    """Runs the leftovers that fit the host (and, `by_record`, those only gc's record pass runs)."""
    return [said for leftover in registered()
            if leftover.on_this_machine == scope.host.is_this_machine and leftover.by_record_only == by_record
            for said in leftover.remove(scope)]
