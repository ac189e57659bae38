"""The verdict a report opens with: for each workload (a point, or a job and direction of a job
file), the backends ranked by their share of bare metal (with its CI), their p99 latency and I/Os
per CPU-second, and a winner named only where the statistics allow; then one recommendation under
a stated priority (iops, latency or efficiency).

Every test is Welch's t-test on log values (analysis/stats.py), Holm-adjusted over the
workloads of the table it decides; backends are ranked by the geometric mean that test compares,
and a winner needs the ratio's whole CI on the better side as well as the adjusted p."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.analysis.stats import Difference, center, difference, on_logs, p_text, ranked_tests, summarize, wins
from harness.results.metrics import LOWER, Direction, direction
from harness.results.samples import participant_sample, summed_points

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
    entries: list[Entry]             # best first, by the headline's geometric mean (what the test compares)
    noun: str = "backend"            # what its entries are: backends, or a sweep's choices (arrays, filesystems)
    winner: dict[str, str | None] = field(default_factory=dict)   # priority -> backend named, or None
    tested: dict[str, bool] = field(default_factory=dict)         # priority -> whether a test could be made
    said: dict[str, str] = field(default_factory=dict)            # priority -> the verdict in words


def _key(row: dict) -> tuple[str, str] | None:
    """(workload, where) of a measured repeat, where is "host" or the backend; in a sweep whose
    points declare a `choice` (an array, a filesystem on it), that choice, and its own host baseline."""
    if row.get("status") != "ok" or row.get("repeat") == "all" or row.get("env") is None:
        return None
    if choice := row.get("choice"):
        name = f"{row.get('group') or row.get('experiment', '')} {row.get('workload', '')}"
        return name, f"host@{choice}" if row["env"] == "physical" else choice
    block = "" if row.get("group") or row.get("block") in (None, "", row.get("backend")) else f" {row['block']}"
    setup = f" {row['setup']}" if row.get("setup") else ""   # a RAID sweep's array: a workload of its own
    point = str(row.get("point", "")).replace("virtual-", "").replace("physical-", "")
    name = f"{row.get('group') or row.get('experiment', '')}{block}{setup} {point}"
    return name, "host" if row["env"] == "physical" else row.get("backend", "")


def _collect(rows: list[dict], headlines: dict[str, str]) -> dict[str, dict]:
    """workload -> its headline and, per place (host per block, or backend), metric -> values.
    `headlines` ({experiment or group: its headline}) serves samples that predate recording theirs."""
    found: dict[str, dict] = {}
    summed = summed_points(rows)
    for r in rows:
        if (k := _key(r)) is None or r.get("value") is None or participant_sample(r, summed):
            continue
        name, where = k
        w = found.setdefault(name, {"metric": None, "better": None, "at": {},
                                    "noun": "setup" if r.get("choice") else "backend"})
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
        better = Direction(w["better"]) if w["better"] else direction(metric)
        if better is None:   # a metric of unknown direction is not judged (as compare does not)
            continue
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
        logs = on_logs(*(e.values for e in entries))
        entries.sort(key=lambda e: center(e.values, logs), reverse=better is not LOWER)
        # a sweep's choices each have a host of their own (their share of bare metal says it)
        host = next((f.get(metric, []) for p, f in places.items() if p.startswith("host")), []) \
            if w["noun"] == "backend" else []
        out.append(Workload(name, metric, better, host, entries, w["noun"]))
    out.sort(key=lambda w: w.name)
    for priority in PRIORITIES:
        _decide(out, priority)
    return out


def said(ranked: list[str], diff: Difference | None, p: float | None, what: str, note: str = "",
         alpha: float = ALPHA, *, lower: bool, noun: str = "backend") -> str:
    """A best-against-runner-up test in words: the winner with its effect and CI, a tie with the
    largest difference the noise allows, or why no test was made; `note` follows the best's name,
    `lower` says which way is better, `noun` what is ranked."""
    if len(ranked) == 1:
        return f"{ranked[0]}{note}, the only {noun} measured"
    if diff is None or p is None:
        return f"no test: one repeat, or no spread in the repeats (set repeat.count >= 2); best {ranked[0]}"
    if wins(diff, p, lower, alpha):
        return f"{ranked[0]}{note}: {what} {diff.percent()} against {ranked[1]}, {p_text(p)}"
    return f"tie: {ranked[0]} and {ranked[1]} differ by no more than {diff.bound:.0%} in {what} at this noise ({p_text(p)})"


def _decide(found: list[Workload], priority: str) -> None:
    """Each workload's best backend on `priority` against its runner-up, Holm over the workloads."""
    lower = [priority == "latency" or (priority == "iops" and w.better is LOWER) for w in found]
    tests = ranked_tests([[(e.backend, e.judged(priority)) for e in w.entries] for w in found], lower)
    for w, low, (ranked, diff, p) in zip(found, lower, tests):
        what = {"iops": w.metric, "latency": "p99 latency", "efficiency": "I/Os per CPU-second"}[priority]
        w.tested[priority] = p is not None
        w.winner[priority] = ranked[0] if wins(diff, p, low, ALPHA) else None
        w.said[priority] = said(ranked, diff, p, what, lower=low, noun=w.noun) if ranked else f"not measured ({what})"


def recommendation(found: list[Workload], priority: str) -> str:
    """One sentence: the backend that wins the most workloads on `priority`, or why none can be named."""
    backends = sorted({e.backend for w in found for e in w.entries})
    if not found:
        return "No workload was measured on a backend."
    noun = found[0].noun
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
        return (f"No {noun} is significantly ahead on {PRIORITIES[priority]} in any of the {len(tested)} tested "
                f"workload(s) at this noise: a tie{untested}. More repeats (repeat.count) narrow the intervals.")
    leaders = [b for b, n in wins.items() if n == best]
    lead = " and ".join(leaders)
    return (f"Prefer {lead} for {PRIORITIES[priority]}: significantly best on {best} of {len(tested)} tested "
            f"workload(s)" + (f", no significant difference on {ties}" if ties else "") + f"{untested}." +
            (" Equal wins: look at the workloads that matter to you." if len(leaders) > 1 else ""))
