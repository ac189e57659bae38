"""A run's plan before anything runs: its blocks (each a setup the sweep provisions, or the user's
fleet), the points in each, the repeats, and an estimated duration from what this host has cost
before (`costs.json` in the results folder, kept per host and learnt after every run):

- a block's setup: what a run spends outside its points (provisioning a fleet, an array, a Ceph
  cluster, the summary), per block, by experiment;
- a point's overhead beyond its tool's own time (settle wait, suspending VMs, starting the tool,
  collecting its output), by environment and participants;
- the noise of a point's repeats (the median CV of its headline), from which the plan says the
  smallest difference its repeats can resolve and how many repeats 5% and 10% would need.

A figure the host has not measured yet (a fresh host's every figure, or an experiment it has not run)
is the development machine's, shipped with vtb (`development-costs.json`, per host kind measured
there: local and nested), and the plan says so; the host's own runs' figures replace them.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats as sps

from harness.common.console import duration
from harness.common.files import write_atomic

KEEP = 5   # the costs of the last KEEP runs are averaged: a host's speed drifts
# the development machine's costs (2 cores, guests under TCG), learnt from its default runs
SHIPPED = Path(__file__).with_name("development-costs.json")


@dataclass(frozen=True)
class PlannedPoint:
    label: str
    env: str             # physical | virtual
    seconds: float       # the tool's own time (ramp and runtime), 0 where only the run can tell
    participants: int = 1


@dataclass(frozen=True)
class Block:
    label: str           # e.g. "backend nbd", "raid5-n4-c64k", "the fleet"
    points: list[PlannedPoint]


@dataclass
class Plan:
    experiment: str
    blocks: list[Block]
    repeats: int
    skipped: dict[str, str] = field(default_factory=dict)   # what will not run, with why

    @property
    def point_runs(self) -> int:
        return self.runs_in(self.blocks)

    def runs_in(self, blocks: list[Block]) -> int:
        """The point runs these blocks plan: their points, each repeated."""
        return self.repeats * sum(len(b.points) for b in blocks)

    def block(self, label: str) -> Block:
        """The block of this label; PlanDisagrees where the plan has none."""
        if (found := next((b for b in self.blocks if b.label == label), None)) is None:
            raise PlanDisagrees(f"{self.experiment}: its run makes a block {label!r} that its plan does not have "
                                f"(planned: {', '.join(b.label for b in self.blocks)})")
        return found

    @property
    def untimed(self) -> int:
        """Its points whose tool time only a run tells (they end when their requests are done)."""
        return sum(1 for b in self.blocks for p in b.points if not p.seconds)


class PlanDisagrees(RuntimeError):
    """A bug of an experiment's: its run makes a block or points that its plan does not have."""


def host_key(host_name: str) -> str:
    """The host costs are kept for: the first host of a fleet that spans several."""
    return host_name.split(",")[0]


class Costs:
    """What runs on one host have cost, in the results folder's costs.json; where the host has no
    figure of its own for an experiment yet, the development machine's for it (shipped with vtb),
    then the host's own typical figures, then the development machine's."""

    def __init__(self, results_dir: Path, host: str, shipped: Path | None = None):
        """`shipped`: the development machine's figures (SHIPPED), by host kind."""
        self.path = Path(results_dir) / "costs.json"
        self.where = f"host {host}" if "," not in host else f"hosts {host} (costs as measured on {host_key(host)})"
        self.host = host_key(host)
        self.all = _read(self.path)
        self.mine: dict = self.all.get(self.host, {})
        self.dev: dict = _read(shipped).get(self.host, {}) if shipped else {}

    @property
    def shipped(self) -> bool:
        """Whether every figure is the development machine's: this host has none of its own yet."""
        return bool(self.dev) and not self.mine

    def _sources(self) -> tuple[tuple[dict, str], ...]:
        return (self.mine, "this host"), (self.dev, "the development machine")

    def _scaled(self, value: float, suffixes: tuple[str, ...]) -> tuple[float, str]:
        """A development machine's figure for an experiment not run here yet, scaled by how this
        host's per-point overheads of the experiments run on both compare (the median ratio: its
        speed; a setup's own figures would not tell it: a fleet already up makes one near 0)."""
        here, there = self.mine.get("overhead_s", {}), self.dev.get("overhead_s", {})
        for suffix in suffixes:
            ratios = [statistics.fmean(here[k]) / statistics.fmean(there[k]) for k in here
                      if ":" in k and k.endswith(suffix) and here[k] and there.get(k) and statistics.fmean(there[k]) > 0]
            if ratios:
                return value * statistics.median(ratios), "the development machine's, scaled to this host's"
        return value, "the development machine's"

    def setup_s(self, experiment: str) -> tuple[float, str]:
        """A block's setup cost for the experiment, and where it comes from."""
        if values := self.mine.get("setup_s", {}).get(experiment):
            return statistics.fmean(values), "measured"
        if values := self.dev.get("setup_s", {}).get(experiment):
            return self._scaled(statistics.fmean(values), ("",))
        for figures, whose in self._sources():
            if (typical := _typical(figures, "setup_s", "")) is not None:
                return typical, f"other experiments' on {whose} (none of this one's yet)"
        return 0.0, "none measured on this host yet"

    def overhead_s(self, env: str, participants: int, experiment: str = "") -> float | None:
        return self.overhead_from(env, participants, experiment)[0]

    def overhead_from(self, env: str, participants: int, experiment: str = "") -> tuple[float | None, str]:
        """A point's overhead beyond its tool's time, and whose: this experiment's own where measured
        here, else on the development machine, scaled (a workload's set-up, such as a database's,
        is part of it); else a typical experiment's (a median: a database's would pull a mean far
        from fio's)."""
        shared = (f"{env}/{participants}", env)
        own = tuple(f"{experiment}:{key}" for key in shared) if experiment else ()
        if values := next((v for key in own if (v := self.mine.get("overhead_s", {}).get(key))), None):
            return statistics.fmean(values), "measured"
        if values := next((v for key in own if (v := self.dev.get("overhead_s", {}).get(key))), None):
            return self._scaled(statistics.fmean(values), tuple(f":{key}" for key in shared))
        for figures, whose in self._sources():
            for key in shared:
                if (typical := _typical(figures, "overhead_s", key)) is not None:
                    return typical, f"other experiments' on {whose}"
        return None, ""

    def measured(self, experiment: str, or_shipped: bool = False) -> bool:
        """Whether a run of the experiment has taught its own point costs on this host (or, with
        `or_shipped`, on the development machine)."""
        return any(key.startswith(f"{experiment}:") for figures in ((self.mine, self.dev) if or_shipped else (self.mine,))
                   for key in figures.get("overhead_s", {}))

    def _noise(self) -> tuple[float | None, str]:
        """The repeats' CV, and whose: this host's, else the development machine's."""
        for figures, whose in self._sources():
            if values := figures.get("noise_cv", {}).get("headline"):
                return statistics.fmean(values), whose
        return None, "this host"

    def noise_cv(self) -> float | None:
        return self._noise()[0]

    def noise_from(self) -> str:
        return self._noise()[1]

    def learn(self, experiment: str, setup_s: float | None, overheads: dict[str, list[float]],
              noise: float | None, shared: bool = True) -> None:
        """Adds one run's costs and writes the file (atomically). `shared`: its point overheads
        stand for every experiment's too (not when they hold tool time the plan could not tell)."""
        def keep(kind: str, key: str, value: float) -> None:
            values = self.mine.setdefault(kind, {}).setdefault(key, [])
            values.append(round(value, 3))
            del values[:-KEEP]
        if setup_s is not None:
            keep("setup_s", experiment, setup_s)
        for key, values in overheads.items():   # this experiment's own, and every experiment's
            keep("overhead_s", f"{experiment}:{key}", statistics.fmean(values))
            if shared:
                keep("overhead_s", key, statistics.fmean(values))
        if noise is not None:
            keep("noise_cv", "headline", noise)
        self.all[self.host] = self.mine
        write_atomic(self.path, json.dumps(self.all, indent=1, sort_keys=True))


def _typical(figures: dict, kind: str, key: str) -> float | None:
    """The median of a shared figure (key "": the median of every experiment's mean, as setup_s keeps them)."""
    if key:
        values = figures.get(kind, {}).get(key)
        return statistics.median(values) if values else None
    means = [statistics.fmean(v) for v in figures.get(kind, {}).values() if v]
    return statistics.median(means) if means else None


def _read(path: Path) -> dict:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Estimate:
    seconds: float
    notes: list[str]


def estimate(plan: Plan, costs: Costs) -> Estimate:
    """The plan's duration from the host's costs, and what the figure lacks."""
    notes = ["the development machine's costs, shipped with vtb (2 cores, guests under TCG): this host's own "
             "replace them as it runs"] if costs.shipped else []
    setup, source = costs.setup_s(plan.experiment)
    if source != "measured":
        notes.append(f"block setup: {source}")
    total, unknown, whose = setup * len(plan.blocks), set(), set()
    for block in plan.blocks:
        for p in block.points:
            overhead, came_from = costs.overhead_from(p.env, p.participants, plan.experiment)
            if overhead is None:
                unknown.add(p.env)
            whose.add(came_from)
            total += plan.repeats * (p.seconds + (overhead or 0.0))
    if unknown:
        notes.append(f"no per-point overhead measured on this host yet for {', '.join(sorted(unknown))} points: "
                     "their tools' own time only")
    if (untimed := plan.untimed) and not costs.measured(plan.experiment, or_shipped=True):
        notes.append(f"{untimed} point(s) end when their requests are done, which a first run of {plan.experiment} "
                     "measures: until then, their overhead only")
    elif others := sorted(w for w in whose if w.startswith("other")):
        notes.append(f"per-point overhead: {' and '.join(others)} (a workload's own set-up, such as a database's, "
                     f"is counted once a run of {plan.experiment} has measured it)")
    elif not costs.shipped and (dev := sorted(w for w in whose if w not in ("measured", ""))):
        notes.append(f"per-point overhead of {plan.experiment}: {dev[-1]} (this host's own replace it after its "
                     "first run of it)")
    return Estimate(total, notes)


def resolvable(cv: float, repeats: int) -> float:
    """The smallest relative difference between two points that `repeats` repeats of each resolve
    at 95% (the half-width of the difference's CI), for repeats of coefficient of variation `cv`."""
    if repeats < 2:
        return math.inf
    return float(sps.t.ppf(0.975, 2 * repeats - 2)) * cv * math.sqrt(2 / repeats)


def repeats_for(cv: float, difference: float, cap: int = 1000) -> int | None:
    """The fewest repeats that resolve `difference` (None: more than `cap`)."""
    return next((n for n in range(2, cap + 1) if resolvable(cv, n) <= difference), None)


def describe(plan: Plan, costs: Costs, precision: float | None = None, max_count: int = 0,
             budget_s: float | None = None) -> str:
    """The plan as the run's log and `--plan` say it; with a precision, what the added rounds may
    take at most (every point to max_count, or the budget)."""
    est = estimate(plan, costs)
    lines = [f"plan: {plan.experiment}, {len(plan.blocks)} block(s), {plan.point_runs} point runs "
             f"({plan.repeats} shuffled repeat(s) of each point), on {costs.where}"]
    for b in plan.blocks:
        envs = sorted({p.env for p in b.points})
        lines.append(f"  {b.label}: {len(b.points)} points ({', '.join(envs)})")
    for what, why in plan.skipped.items():
        lines.append(f"  skipped: {what} ({why})")
    lines.append(f"estimated duration: {duration(est.seconds)}" + (f" ({'; '.join(est.notes)})" if est.notes else ""))
    if precision is not None:
        most = estimate(Plan(plan.experiment, plan.blocks, max(max_count, plan.repeats)), costs).seconds
        bound = f"at most {duration(most)} with every point at repeat.max_count={max_count}"
        lines.append(f"precision ±{precision:.0%}: rounds are added to the points whose VE/PE ratio interval is wider, "
                     + (f"until the budget of {duration(budget_s)} ({bound})" if budget_s else bound))
    if (cv := costs.noise_cv()) is not None:
        need = {d: repeats_for(cv, d) for d in (0.05, 0.10)}
        lines.append(f"noise on {costs.noise_from()}: repeats vary by a CV of "
                     f"{cv:.0%}; {plan.repeats} repeat(s) resolve a "
                     f"difference of {resolvable(cv, plan.repeats):.0%} or more; 10% needs "
                     f"{need[0.10] or '>1000'} repeats, 5% needs {need[0.05] or '>1000'} (repeat.count)")
    else:
        lines.append("noise on this host: none measured yet (a first run measures it)")
    return "\n".join(lines)


def learnt_from(plan: Plan, rows: list[dict], wall_s: float, blocks_run: int) -> tuple[float | None, dict, float | None]:
    """One finished run's costs: its setup per block (the time outside its points), its points'
    overhead beyond their planned tool time by environment and participants, and the median CV of
    its points' headline over repeats."""
    planned: dict[tuple[str, int], list[float]] = {}
    for b in plan.blocks:
        for p in b.points:
            planned.setdefault((p.env, p.participants), []).append(p.seconds)
    walls, headline = _walls_and_headlines(rows)
    overheads: dict[str, list[float]] = {}
    for (env, n), values in walls.items():
        beyond = max(0.0, statistics.fmean(values) - statistics.fmean(planned.get((env, n)) or [0.0]))
        overheads.setdefault(f"{env}/{n}", []).append(beyond)
        overheads.setdefault(env, []).append(beyond)
    points_s = sum(sum(v) for v in walls.values())
    # a point that failed, or was measured again after its guest stopped answering, spent its wait
    # outside the points measured: as setup, it would stretch every later plan of the experiment
    waited = any(r.get("status") not in (None, "ok") or r.get("retried_after") for r in rows)
    setup = max(0.0, wall_s - points_s) / blocks_run if blocks_run and walls and not waited else None
    return setup, overheads, _median_cv(headline)


def _walls_and_headlines(rows: list[dict]) -> tuple[dict[tuple[str, int], list[float]], dict]:
    """Each measured (point, repeat)'s wall time once, by environment and participants; and each
    point's headline values by repeat (its participants' beside each other)."""
    walls: dict[tuple[str, int], list[float]] = {}
    seen, headline = set(), {}
    for r in rows:
        if r.get("status") != "ok" or not isinstance(r.get("repeat"), int) or "point_wall_s" not in r:
            continue
        if r.get("metric") == r.get("headline") and r.get("scope") in ("aggregate", "slot", "vm"):
            headline.setdefault(r.get("point_id"), {}).setdefault(r["repeat"], []).append(float(r["value"]))
        key = (str(r.get("point_id", "")).split("#")[0], r.get("repeat"))
        if key not in seen:
            seen.add(key)
            walls.setdefault((r["env"], int(r.get("vm_count") or 1)), []).append(float(r["point_wall_s"]))
    return walls, headline


def _median_cv(headline: dict) -> float | None:
    """The median over points of their headline's CV over repeats (participants summed)."""
    cvs = []
    for by_repeat in headline.values():
        values = [sum(v) if len(v) > 1 else v[0] for v in by_repeat.values()]
        if len(values) >= 2 and statistics.fmean(values) > 0:
            cvs.append(statistics.stdev(values) / statistics.fmean(values))
    return statistics.median(cvs) if cvs else None
