"""An experiment's points, declared once: each point's label, what the experiment measures there,
the environments it runs in (the host and the VMs; the host alone for a `--pe-only` run), its
tool's own time and its participants, grouped in blocks (a setup each).

The engine derives both the plan (`planned`: what `--plan` prints, the progress bar counts and the
estimate sums) and the points the pipeline measures (`made`: the experiment says how one declared
point is measured in one environment) from this one list, so the two cannot disagree and no
experiment loops over environments itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from harness.measure.pipeline import PHYSICAL, VIRTUAL, Point
from harness.measure.plan import Block, Plan, PlannedPoint

BOTH = (PHYSICAL, VIRTUAL)
HOST_ONLY = (PHYSICAL,)

What = TypeVar("What")


def envs(ve: bool) -> tuple[str, ...]:
    """A sweep's environments: the host and the VMs, or the host alone (`--pe-only`, ve=false)."""
    return BOTH if ve else HOST_ONLY


@dataclass(frozen=True)
class Declared(Generic[What]):
    label: str
    what: What                       # the experiment's own description of the point (a job, a database point)
    seconds: float                   # its tool's own time; 0 where only the run can tell
    participants: int = 1            # VMs at once (and as many host slots or clients)
    envs: tuple[str, ...] = BOTH


@dataclass(frozen=True)
class DeclaredBlock(Generic[What]):
    label: str                       # e.g. "backend nbd", "raid5-n4-c64k", "the fleet (virtio-blk)"
    points: tuple[Declared[What], ...]

    def planned(self) -> Block:
        return Block(self.label, [PlannedPoint(d.label, env, d.seconds, d.participants)
                                  for d in self.points for env in d.envs])

    def made(self, measure: Callable[[Declared[What], str], Point | None],
             only: Callable[[Declared[What]], bool] = lambda d: True) -> list[Point]:
        """Its points (those `only` keeps), each in each of its environments, as `measure` makes
        them; None where this host cannot make one (the engine takes it off the count)."""
        return [point for d in self.points if only(d) for env in d.envs if (point := measure(d, env)) is not None]


def plan_of(experiment: str, blocks: list[DeclaredBlock], repeats: int, skipped: dict[str, str] | None = None) -> Plan:
    """The plan an experiment's declared blocks make."""
    return Plan(experiment, [b.planned() for b in blocks], repeats, dict(skipped or {}))
