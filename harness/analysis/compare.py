"""`harness compare A B`: the same points in two runs (or a run and a stored baseline), the
relative change of each metric with its CI, Welch's t-test on log values (Holm-adjusted over
every compared metric), and a regression verdict."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis.stats import Difference, difference, holm, summarize
from harness.results.metrics import LOWER, Direction, direction
from harness.results.samples import FIX, NoSamples, participant_sample, read_samples, summed_points

DERIVED = {"ve_pe_ratio"}          # follows from other metrics; compared through them


def declared_directions(rows: list[dict]) -> dict[str, Direction]:
    """{metric: direction} for the headline metrics, as the samples recorded them."""
    return {r["headline"]: Direction(r["better"]) for r in rows if r.get("headline") and r.get("better")}


def load_rows(source: Path) -> list[dict]:
    """A run folder or a samples.jsonl file (a stored baseline is just a copy of one), checked
    (`read_samples`): anything else is bad input."""
    path = source / "samples.jsonl" if source.is_dir() else source
    if not path.exists():
        raise NoSamples(f"{source}: no samples.jsonl. {FIX}")
    return read_samples(path)


def key(row: dict) -> tuple | None:
    """What makes two samples the same point: None for per-process rows of multi-VM points."""
    if row.get("status") != "ok" or row.get("value") is None or row["metric"] in DERIVED:
        return None
    if row.get("scope") != "aggregate" and row.get("group") is None:
        return None
    return (*point_of(row), row["metric"])


def point_of(row: dict) -> tuple:
    """A point as compare pairs it: (experiment, group, point, backend, env)."""
    return (row.get("experiment", ""), row.get("group", ""), row.get("point", ""), row.get("backend", ""),
            row.get("env", ""))


def values_by_key(rows: list[dict]) -> dict[tuple, list[float]]:
    """Each point's values of each metric over its repeats; a point of several participants (its
    `aggregate_*` figures) by its own figures only, never each participant's as more repeats."""
    summed = summed_points(rows)
    out: dict[tuple, list[float]] = {}
    for r in rows:
        if (k := key(r)) is not None and not participant_sample(r, summed):
            out.setdefault(k, []).append(float(r["value"]))
    return out


def place(k: tuple) -> str:
    """Where a compared point ran: "physical" (the host), or its backend."""
    _, _, _, backend, env, *_ = k
    return backend if env == "virtual" and backend else env


def point_name(k: tuple) -> str:
    experiment, group, point, *_ = k
    return f"{group}/{point}" if group else point


@dataclass(frozen=True)
class Change:
    key: tuple
    a: list[float]
    b: list[float]
    rel_change: float           # B over A - 1 (geometric means where tested, else arithmetic)
    p_value: float | None       # Holm-adjusted over the comparison; None when a side has a single value
    diff: Difference | None     # the ratio of B to A with its CI (and its own p)
    regression: bool
    improvement: bool


def as_dict(c: Change) -> dict:
    """A change as data (`harness compare --json`)."""
    experiment, group, point, backend, env, metric = c.key
    return {"experiment": experiment, "group": group, "point": point, "backend": backend, "env": env, "metric": metric,
            "a": c.a, "b": c.b, "change": c.rel_change, "ci95": [c.diff.low - 1, c.diff.high - 1] if c.diff else None,
            "p": c.p_value, "regression": c.regression, "improvement": c.improvement}


def compare(a_rows: list[dict], b_rows: list[dict], alpha: float, min_change: float) -> tuple[list[Change], int]:
    """(changes of the paired points, number of points found in only one of the runs)."""
    a, b = values_by_key(a_rows), values_by_key(b_rows)
    declared = {**declared_directions(a_rows), **declared_directions(b_rows)}
    changes = []
    paired = sorted(set(a) & set(b))
    diffs = [difference(a[k], b[k]) for k in paired]
    adjusted = holm([d.p_value if d else None for d in diffs])
    for k, d, p in zip(paired, diffs, adjusted):
        ma, mb = summarize(a[k]).mean, summarize(b[k]).mean
        rel = d.change if d else mb / ma - 1 if ma else float("inf")   # the change shown, with its CI
        significant = p is not None and p < alpha and abs(rel) >= min_change
        better = direction(k[-1], declared)
        judged = significant and better is not None   # a metric of unknown direction is not judged
        worse = rel > 0 if better is LOWER else rel < 0
        changes.append(Change(k, a[k], b[k], rel, p, d, judged and worse, judged and not worse))
    return changes, len(set(a) ^ set(b))


@dataclass(frozen=True)
class Lost:
    """A point the baseline (A) measured that the run under test (B) did not: it failed, or is not in it."""
    point: tuple        # point_of: (experiment, group, point, backend, env)
    why: str

    def as_dict(self) -> dict:
        experiment, group, point, backend, env = self.point
        return {"experiment": experiment, "group": group, "point": point, "backend": backend, "env": env,
                "why": self.why}


def share_a_point(a_rows: list[dict], b_rows: list[dict]) -> bool:
    """Whether B has any of A's points at all, measured or failed: runs that share none are not
    a run and its baseline (a wrong run named), and compare refuses them rather than call every
    point of A lost."""
    return bool({point_of(r) for r in a_rows} & {point_of(r) for r in b_rows})


def lost(a_rows: list[dict], b_rows: list[dict]) -> list[Lost]:
    """The points A measured and B did not, each with B's own error where B has one: a gate
    must not pass a run because the points that would have regressed failed."""
    measured_b = {k[:-1] for k in values_by_key(b_rows)}
    errors: dict[tuple, str] = {}
    for r in b_rows:
        if r.get("status") == "failed":
            errors.setdefault(point_of(r), f"failed in B: {r.get('error') or 'no error recorded'}")
    return [Lost(p, errors.get(p, "not in B"))
            for p in sorted({k[:-1] for k in values_by_key(a_rows)} - measured_b)]
