"""What each resource leaves behind when a run is killed, and how it is removed.

A resource module declares `LEFTOVERS`, a tuple of `Leftover`; `PROCESSES`, the daemons it runs;
`RECORDED_NETWORKS`, what proves its namespaces and links are vtb's; `LIVE_NAMES`, what live
state owns (kept by gc unless --all); and `FLEET_RECORDS`, what a fleet's own teardown removes by
the records in its folder. This module finds them in every module of the package: `harness gc`
(harness.fleet.gc) stops those processes by their pid files, removes the networks records name and
runs the leftovers on each host it collects; a fleet's teardown runs the fleet records. Adding a
resource is its module alone: gc names none of them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.common.bounded import heartbeat
from harness.common.plugins import declared
from harness.hosts import Host, from_descriptor, kinds
from harness.hosts.folders import untrusted_file
from harness.hosts.nested import NestedHostError


@dataclass(frozen=True)
class Scope:
    """One pass of gc: the host, the name prefix it removes, the prefixes live state owns (kept),
    and the state dirs of this machine whose records may be read."""
    host: Host
    prefix: str
    keep: tuple[str, ...]
    state_dirs: tuple[Path, ...]
    elsewhere: bool = False   # gc's first pass over records: only what they put on other hosts than this
                              # machine (before this machine's collection, which may remove those hosts)


@dataclass(frozen=True)
class Leftover:
    what: str                                  # e.g. "hugepages an SPDK target reserved": a wait names it
    remove: Callable[[Scope], list[str]]       # says what it removed, and in parentheses what it did not
    on_this_machine: bool = True               # else on the other hosts gc reaches (an ssh or nested host)
    by_record_only: bool = False               # found by the dead fleets' records on this machine, wherever
                                               # they put it: only in gc's pass over records, never in a
                                               # fleet's own teardown (which may still use what it names)


def _declared(attribute: str) -> list:
    """Every resource module's `attribute` (a tuple), joined in the order of the modules' names."""
    import harness.resources as package
    return declared(package.__name__, package.__path__, attribute)


def registered() -> list[Leftover]:
    """Every resource module's `LEFTOVERS`."""
    return _declared("LEFTOVERS")


def recorded_networks(s: Scope) -> set[str]:
    """The network namespaces and links (a name has no room for the prefix; its alias has it) whose
    making a resource's record on this machine proves (each module's `RECORDED_NETWORKS`, functions
    of the scope): gc removes a prefixed one only when a record names it."""
    return {name for names_in in _declared("RECORDED_NETWORKS") for name in names_in(s)}


def live_names(state_dir: Path, read: bool) -> list[str]:
    """Name prefixes of what live state in the state dir owns, by each module's `LIVE_NAMES`
    (functions of the dir and whether its records may be read: when not, they keep all they
    might own)."""
    return [name for names_in in _declared("LIVE_NAMES") for name in names_in(state_dir, read)]


def removed_by_fleet_records(fleet_dir: Path, state_dir: Path) -> list[str]:
    """What the records in a fleet's folder still name once the fleet is down (a destroy that
    failed, a killed run), removed, by each module's `FLEET_RECORDS` (functions of the fleet's
    folder and its state dir): whatever backend the config names now."""
    return [said for removed_by in _declared("FLEET_RECORDS") for said in removed_by(fleet_dir, state_dir)]


def processes() -> tuple[str, ...]:
    """The executables resources run on a host (each module's `PROCESSES`): gc stops a killed
    run's by the pid file of vtb's that holds it."""
    return tuple(_declared("PROCESSES"))


def remove_all(scope: Scope, by_record: bool = False) -> list[str]:
    """Runs the leftovers found on the scope's host; `by_record`, those found by this machine's
    records instead, wherever the records put them."""
    said = []
    for leftover in registered():
        if leftover.by_record_only == by_record and (by_record or leftover.on_this_machine == scope.host.is_this_machine):
            with heartbeat(f"{leftover.what} to be removed" + ("" if by_record else f" on {scope.host.label}")):
                said += leftover.remove(scope)
    return said


def _on_this_machine(plan: dict) -> bool:
    host = plan.get("host")
    kind = kinds().get(host.get("kind")) if isinstance(host, dict) else None
    return kind is None or kind.is_this_machine   # an unknown kind: the plan's own reader refuses it, with why


def recorded_plans(s: Scope, kind: str, owner: str) -> tuple[list[Path], list[str]]:
    """The plans of `kind` (written before what they describe is made) in the fleets' folders of
    the state dirs whose `owner` field starts with the prefix and is not kept (`elsewhere`: only
    those for other hosts than this machine); and notes on the plans not read: in a folder, or a
    file, that another user could have written."""
    found, notes = [], []
    for d in s.state_dirs:
        for f in [*d.glob(f"*/{kind}-*.json"), *d.glob(f"*/hosts/*/{kind}-*.json")] if d.is_dir() else []:
            if why := untrusted_file(f):
                notes.append(f"({kind} plan {f} not read: {why}, so it may not be vtb's. Fix: if it is, make it and "
                             f"its folder root's and not writable by others; else remove it)")
                continue
            try:
                plan = json.loads(f.read_text())
                name = f"{plan.get(owner, '')}-"
                if s.elsewhere and _on_this_machine(plan):
                    continue
            except (OSError, ValueError, AttributeError):   # being written, or not a plan: it proves nothing
                continue
            if name.startswith(s.prefix) and not name.startswith(s.keep):
                found.append(f)
    return found, notes


def unusable(plan_file: Path, e: Exception) -> str:
    """A plan that could not be read: nothing it names is touched."""
    return (f"(plan {plan_file} not used: {e}; nothing it names was touched. Fix: remove it if vtb did not write it "
            f"(an older vtb's plan: undo what it names by hand, then remove it))")


def undo_by_plans(plan_files: list[Path], read: Callable[[str], Any], named: Callable[[Any], str],
                  undo: Callable[[Host, Any], str | None]) -> tuple[list[str], list[str]]:
    """Undoes what each plan describes (written before it was made) on the plan's host, and removes
    the plan once done: what went (`undo` says it, or None when there was nothing to do), and in
    parentheses what could not, its plan kept for the next try."""
    done, stuck = [], []
    for plan_file in plan_files:
        try:
            plan = read(plan_file.read_text())
        except (OSError, ValueError, KeyError, TypeError) as e:
            stuck.append(unusable(plan_file, e))
            continue
        try:
            said = undo(from_descriptor(plan.host), plan)
        except NestedHostError:   # its nested host was removed, and what the plan names with everything in it
            plan_file.unlink(missing_ok=True)
            done.append(f"{named(plan)}: gone with its nested host")
            continue
        except Exception as e:   # noqa: BLE001 - the host does not answer: the plan stays for the next gc
            stuck.append(f"({named(plan)} not undone: {e})")
            continue
        plan_file.unlink(missing_ok=True)
        done += [said] if said else []
    return done, stuck
