"""`harness trend METRIC`: a metric's mean and 95% CI over runs, per point, oldest run first: what
changed, and when. Points are paired across runs as `harness compare` pairs them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.analysis.compare import load_rows, place, point_name, values_by_key
from harness.analysis.stats import Summary, summarize
from harness.common.console import warn
from harness.results.samples import NoSamples, SamplesError


@dataclass(frozen=True)
class Seen:
    run_id: str
    point: str          # experiment, group/point and where (host or backend), as compare shows them
    summary: Summary    # over the run's repeats


def label(key: tuple) -> str:
    return f"{key[0]} {point_name(key)} {place(key)}"


def trend(runs: list[tuple[str, Path]], metric: str, point: str | None = None,
          skip_damaged: bool = False) -> list[Seen]:
    """(run id, folder) oldest first -> every point's summary of `metric` in each run that has it;
    `point` keeps those whose name contains it. skip_damaged: a run whose samples are not vtb's is
    left out, said (the index's runs), rather than refused (the runs a user names)."""
    seen = []
    for run_id, path in runs:
        try:
            rows = load_rows(path)
        except NoSamples:   # a run that stored nothing (killed at once)
            continue
        except SamplesError as e:
            if not skip_damaged:
                raise
            warn(f"{run_id} left out: {e}")
            continue
        for key, values in sorted(values_by_key(rows).items()):
            if key[-1] == metric and (point is None or point in label(key)):
                seen.append(Seen(run_id, label(key), summarize(values)))
    return seen
