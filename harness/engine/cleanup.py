"""The order in which teardown and gc reach this machine, the nested hosts and the [[hosts]]: a
killed run's tools stopped first, then inside out (the remote hosts and the nested host before this
machine, which may run them), by the dead fleets' records once their guests are gone. Each step
says what it did through `say`; what was removed and what is left come back for the command to
print."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from harness.common import paths
from harness.config.core import Config
from harness.fleet import gc, users_fleet
from harness.hosts import HostsNotAnswering, LocalHost, answers, check_answering, orphans, remote_hosts


@dataclass
class Cleaned:
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)    # what is left, each with its fix
    failed: list[str] = field(default_factory=list)   # a fleet's teardown that failed, with why
    unanswered: str = ""                              # the [[hosts]] that did not answer (left untouched)


def torn_down(cfg: Config, everything: bool, say: Callable[[str], None]) -> Cleaned:
    """The fleet down (`testbed down`); with `everything`, every other vtb- resource too."""
    asked = answers(cfg.placement)   # once: a dead host costs ssh's bound once, not once a step
    if everything:   # first: a killed run's terraform apply would hold the state lock, its fio act
        for said in orphans.stop_orphans(asked):
            say(f"stopped {said}")
    removed, failed = users_fleet.tear_down(cfg, asked, everything)
    if everything:
        removed += gc.collect_recorded(paths.PREFIX)
    removed, notes = gc.removals_and_notes(removed)
    return Cleaned(removed, notes, failed)


def collected(cfg: Config, everything: bool, say: Callable[[str], None]) -> Cleaned:
    """vtb- leftovers that no live state owns (`gc`; with `everything`, what live state owns too),
    on every host the config reaches; a [[hosts]] that does not answer is left untouched, said."""
    asked = answers(cfg.placement)
    for said in orphans.stop_orphans(asked):   # first: a killed run's terraform or host fio still acts
        say(f"stopped {said}")
    keep = () if everything else gc.live_prefixes((cfg.state_dir,))
    if keep:
        say(f"keeping what live state owns: {', '.join(keep)} (--all removes it too)")
    out = Cleaned()
    try:
        check_answering(cfg.placement, asked)
    except HostsNotAnswering as e:   # this machine is collected all the same; the [[hosts]] once they answer
        out.unanswered = str(e)
    reached = [LocalHost()]
    for h in [] if out.unanswered else remote_hosts(cfg.placement):
        out.removed += [f"{r} (on {h.label})" for r in gc.collect(paths.PREFIX, h, keep=keep)]
        reached.append(h)
    if nested := _nested_host_if_up(cfg):  # what runs inside the nested host, by the same rule
        out.removed += [f"{r} (in the nested host)" for r in gc.collect(paths.PREFIX, nested, keep=keep)]
        reached.append(nested)
    # by the dead fleets' records, once their guests are gone: on other hosts before this machine's
    # collection, which may remove the nested hosts they are; what is left there, tried again after it
    out.removed += gc.collect_recorded(paths.PREFIX, keep, elsewhere=True)
    out.removed += gc.collect(paths.PREFIX, keep=keep)
    out.removed += gc.collect_recorded(paths.PREFIX, keep)
    for h in reached:
        for said in gc.resume_left_paused(h, keep, cfg.results_dir):
            say(said)
    out.removed, out.notes = gc.removals_and_notes(out.removed)
    return out


def _nested_host_if_up(cfg: Config):
    from harness.hosts.nested import NestedHost, NestedHostError
    try:
        return NestedHost.load(cfg.state_dir / "nested")
    except NestedHostError:
        return None
