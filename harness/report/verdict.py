"""The verdict a report opens with: for each workload (a point, or a job and direction of a job
file), the backends ranked by their share of bare metal (with its CI), their p99 latency and I/Os
per CPU-second, and a winner named only where the statistics allow; then one recommendation under
a stated priority (iops, latency or efficiency).

Every test is Welch's t-test on log values (analysis/stats.py), Holm-adjusted over the
workloads of the table it decides."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis.stats import Difference, difference, holm, p_text, summarize
from harness.results.metrics import HIGHER, LOWER, Direction, direction

ALPHA = 0.05
# what each priority judges: the point's own headline, its p99 latency, its I/Os per CPU-second
PRIORITIES = {"iops": "the headline metric", "latency": "p99 latency", "efficiency": "I/Os per CPU-second"}


@dataclass
class Entry:
    """A backend on a workload."""
    backend: str
    values: list[float]              # the headline, per repeat
    of_host: Difference | None       # the headline over its host baseline (PE), with its CI
    ratio: float | None              # the same ratio of means, where one repeat allows no CI
    p99: list[float] = field(default_factory=list)
    per_cpu: list[float] = field(default_factory=list)

    def judged(self, priority: str) -> list[float]:
        return {"iops": self.values, "latency": self.p99, "efficiency": self.per_cpu}[priority]


@dataclass
class Workload:
    name: str
    metric: str
    better: Direction
    host: list[float]
    entries: list[Entry]             # best first, by the headline's mean
    winner: dict[str, str | None] = field(default_factory=dict)   # priority -> backend named, or None
    tested: dict[str, bool] = field(default_factory=dict)         # priority -> whether a test could be made
    said: dict[str, str] = field(default_factory=dict)            # priority -> the verdict in words


def _key(row: dict) -> tuple[str, str] | None:
    """(workload, where) of a measured repeat, where is "host" or the backend."""
    if row.get("status") != "ok" or row.get("repeat") == "all" or "env" not in row:
        return None
    block = "" if row.get("group") or row.get("block") in (None, "", row.get("backend")) else f" {row['block']}"
    setup = f" {row['setup']}" if row.get("setup") else ""   # a RAID sweep's array: a workload of its own
    point = str(row.get("point", "")).replace("virtual-", "").replace("physical-", "")
    name = f"{row.get('group') or row.get('experiment', '')}{block}{setup} {point}"
    return name, "host" if row["env"] == "physical" else row.get("backend", "")


def _collect(rows: list[dict], headlines: dict[str, str]) -> dict[str, dict]:
    """workload -> its headline and, per place (host per block, or backend), metric -> values.
    `headlines` ({experiment or group: its headline}) serves samples that predate recording theirs."""
    found: dict[str, dict] = {}
    aggregated = {(_key(r), r["metric"]) for r in rows if r.get("scope") == "aggregate" and _key(r)}
    for r in rows:
        if (k := _key(r)) is None or r.get("value") is None:
            continue
        if r.get("scope") in ("vm", "slot") and (k, r["metric"]) in aggregated:
            continue   # several participants: the point's own figures, not each one's
        name, where = k
        w = found.setdefault(name, {"metric": None, "better": None, "at": {}})
        if r.get("headline"):
            w["metric"], w["better"] = r["headline"], r.get("better")
        elif w["metric"] is None:
            w["metric"] = headlines.get(r.get("group") or r.get("experiment", ""))
        # the fio matrix measures a host baseline in each backend's block: it pairs with that backend
        # (elsewhere a block, such as a node count, names the workload itself)
        at = f"host@{r['block']}" if where == "host" and r.get("group") and r.get("block") else where
        w["at"].setdefault(at, {}).setdefault(r["metric"], []).append(float(r["value"]))
    return found


def workloads(rows: list[dict], headlines: dict[str, str] | None = None) -> list[Workload]:
    """Every workload with at least one backend measured, its backends ranked, and the verdicts."""
    out = []
    for name, w in _collect(rows, headlines or {}).items():
        metric = w["metric"]
        if metric is None:
            continue
        better = Direction(w["better"]) if w["better"] else direction(metric) or HIGHER
        places = w["at"]
        entries = []
        for backend, figures in places.items():
            if backend.startswith("host") or metric not in figures:
                continue
            host = places.get(f"host@{backend}", places.get("host", {})).get(metric, [])
            ratio = summarize(figures[metric]).mean / summarize(host).mean if host and summarize(host).mean else None
            entries.append(Entry(backend, figures[metric], difference(host, figures[metric]) if host else None, ratio,
                                 figures.get("lat_p99", []), figures.get("ios_per_cpu_s", [])))
        if not entries:
            continue
        entries.sort(key=lambda e: summarize(e.values).mean, reverse=better is not LOWER)
        host = next((f.get(metric, []) for p, f in places.items() if p.startswith("host")), [])
        out.append(Workload(name, metric, better, host, entries))
    out.sort(key=lambda w: w.name)
    for priority in PRIORITIES:
        _decide(out, priority)
    return out


def _decide(found: list[Workload], priority: str) -> None:
    """Each workload's best backend on `priority` against its runner-up, Holm over the workloads."""
    tests = []
    for w in found:
        lower = priority == "latency" or (priority == "iops" and w.better is LOWER)
        ranked = sorted((e for e in w.entries if e.judged(priority)), key=lambda e: summarize(e.judged(priority)).mean,
                        reverse=not lower)
        diff = difference(ranked[1].judged(priority), ranked[0].judged(priority)) if len(ranked) > 1 else None
        tests.append((w, ranked, diff))
    adjusted = holm([d.p_value if d else None for _, _, d in tests])
    for (w, ranked, diff), p in zip(tests, adjusted):
        what = {"iops": w.metric, "latency": "p99 latency", "efficiency": "I/Os per CPU-second"}[priority]
        w.winner[priority], w.tested[priority] = None, p is not None
        if not ranked:
            w.said[priority] = f"not measured ({what})"
        elif len(ranked) == 1:
            w.said[priority] = f"{ranked[0].backend}, the only backend measured"
        elif diff is None or p is None:
            w.said[priority] = (f"no test: one repeat, or no spread in the repeats (set repeat.count >= 2); best mean "
                                f"{ranked[0].backend}")
        elif p < ALPHA:
            w.winner[priority] = ranked[0].backend
            w.said[priority] = f"{ranked[0].backend}: {what} {diff.percent()} against {ranked[1].backend}, {p_text(p)}"
        else:
            w.said[priority] = (f"tie: {ranked[0].backend} and {ranked[1].backend} differ by no more than "
                                f"{diff.bound:.0%} in {what} at this noise ({p_text(p)})")


def recommendation(found: list[Workload], priority: str) -> str:
    """One sentence: the backend that wins the most workloads on `priority`, or why none can be named."""
    backends = sorted({e.backend for w in found for e in w.entries})
    if not found:
        return "No workload was measured on a backend."
    if len(backends) == 1:
        return f"Only {backends[0]} was measured: no choice to make; its share of bare metal is below."
    tested = [w for w in found if w.tested.get(priority)]
    if not tested:
        return (f"No workload could be tested on {PRIORITIES[priority]} (not measured, or too few repeats with "
                "spread): no recommendation. " + ("Fix: repeat.count >= 2." if any(w.entries[0].judged(priority)
                                                                                  for w in found) else ""))
    wins = {b: sum(w.winner.get(priority) == b for w in tested) for b in backends}
    best = max(wins.values())
    ties = len(tested) - sum(wins.values())
    untested = f" ({len(found) - len(tested)} workload(s) could not be tested)" if len(tested) < len(found) else ""
    if best == 0:
        return (f"No backend is significantly ahead on {PRIORITIES[priority]} in any of the {len(tested)} tested "
                f"workload(s) at this noise: a tie{untested}. More repeats (repeat.count) narrow the intervals.")
    leaders = [b for b, n in wins.items() if n == best]
    lead = " and ".join(leaders)
    return (f"Prefer {lead} for {PRIORITIES[priority]}: significantly best on {best} of {len(tested)} tested "
            f"workload(s)" + (f", no significant difference on {ties}" if ties else "") + f"{untested}." +
            (" Equal wins: look at the workloads that matter to you." if len(leaders) > 1 else ""))
