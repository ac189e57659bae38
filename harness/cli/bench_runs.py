"""`harness bench`'s figures read from what ran before it, measuring nothing: the main job's last
run here (its wall time over its fio time, each point's overhead and start skew, by environment and
participants), and a fresh machine's way to its first result, step by step, from the log
`scripts/first-result.sh` keeps."""
from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

from harness.results.store import RunStore

MAIN_JOB = "harness run vm-scaling"
FIRST_RESULT_LOG = Path("/var/tmp/vtb-first-result.log")
# scripts/first-result.sh's lines: "<seconds since the first command> <line>"
_LINE = re.compile(r"^(\d+(?:\.\d+)?) (.*)$")
_STEP_DONE = re.compile(r"^\[([\w-]+)\] done in (\d+) s$")
_MEASURED = re.compile(r"^[\d.]+s +aggregate_iops [\d,.]+ IOPS")   # a point's figure, as the run prints it


def last_main_job(results_dir: Path) -> RunStore | None:
    """The last completed run of the README's main job, as typed (no option), in the results folder."""
    runs = []
    for manifest in results_dir.glob("*/run.json"):
        try:
            m = json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue   # not a run's manifest as vtb writes it: not the main job's
        if isinstance(m, dict) and m.get("command") == MAIN_JOB and m.get("status") == "completed" and m.get("wall_s"):
            runs.append((m.get("started", 0), manifest.parent))
    return RunStore.reopened(max(runs)[1]) if runs else None


def main_job(results_dir: Path) -> dict:
    """The main job's last run: wall time over the time fio ran (runtime and ramp of every point run),
    and per point (environment and participants) the mean overhead beyond fio and the settle wait,
    the settle wait, and how far apart the participants started."""
    store = last_main_job(results_dir)
    if store is None:
        return {}
    needed = ("point", "point_wall_s", "runtime_s", "ramp_s", "settle_wait_s")
    rows = [s.metadata for s in store.samples
            if s.metric == "aggregate_iops" and all(s.metadata.get(k) is not None for k in needed)]
    fio_s = sum(r["runtime_s"] + r["ramp_s"] for r in rows)
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)

    def mean(point_rows: list[dict], of) -> float:
        return round(statistics.fmean(of(r) for r in point_rows), 2)
    points = sorted(by_point)
    return {
        "main_job_run_id": store.run_id,
        "main_job_wall_s": store.manifest["wall_s"],
        "main_job_fio_s": fio_s,
        "main_job_wall_over_fio": round(store.manifest["wall_s"] / fio_s, 3) if fio_s else None,
        "main_job_overhead_per_point_s": {p: mean(by_point[p], lambda r: r["point_wall_s"] - r["runtime_s"]
                                                  - r["ramp_s"] - r["settle_wait_s"]) for p in points},
        "main_job_settle_wait_per_point_s": {p: mean(by_point[p], lambda r: r["settle_wait_s"]) for p in points},
        "main_job_start_skew_s": {p: mean(by_point[p], lambda r: r["window_start_spread_s"]) for p in points
                                  if all(r.get("window_start_spread_s") is not None for r in by_point[p])},
    }


def first_result(log: Path = FIRST_RESULT_LOG) -> dict:
    """A fresh machine's `make testbed up && harness run vm-scaling`, from its timed log: each set-up
    step's own time (they run side by side), `make testbed up` whole, and the first result."""
    if not log.is_file():
        return {}
    steps: dict[str, float] = {}
    up_done = done = first = None
    for line in log.read_text(errors="replace").splitlines():
        if not (m := _LINE.match(line)):
            continue
        t, text = float(m[1]), m[2].strip()
        if step := _STEP_DONE.match(text):
            steps[step[1]] = float(step[2])
        elif text == "vtb-first-result: testbed up done":
            up_done = t
        elif text == "vtb-first-result: done (exit 0)":
            done = t
        elif first is None and up_done is not None and _MEASURED.search(text):
            first = t
    if up_done is None or done is None:
        return {}   # a run that failed gives no figure
    return {"first_result_steps_s": steps, "first_result_testbed_up_s": up_done, "first_result_first_point_s": first,
            "first_result_s": done,
            "first_result_measured_on": time.strftime("%Y-%m-%d", time.localtime(log.stat().st_mtime))}
