"""fio's JSON report, read as fio wrote it: per job (a reporting group, where group_reporting made
one) and per direction, never summed across them. fio 2.x reports microseconds, 3.x nanoseconds;
`--output-format=json+` adds each direction's completion-latency histogram, from which the
percentiles of several participants together are taken (a mean of their percentiles is none)."""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.common.exits import StepFailed
from harness.results.metrics import PERCENTILES

PERCENTILE_LIST = ":".join(f"{p:g}" for p in PERCENTILES)   # fio's percentile_list
IO_DIRECTIONS = ("read", "write", "trim")
MIXED = "mixed"   # unified_rw_reporting: fio's own figure over reads and writes together
SYNC = "sync"     # fsync/fdatasync calls (psync jobs with fsync=N): latency only
REPORTED = (*IO_DIRECTIONS, MIXED, SYNC)


class FioOutputError(StepFailed):
    pass


@dataclass(frozen=True)
class Figures:
    """One direction of one job, as fio reports it."""
    direction: str                 # read | write | trim | mixed | sync
    ios: int
    iops: float | None             # None for sync (fio reports no rate for it)
    bw_kib_s: float | None
    lat_mean_us: float | None      # total latency (submission + completion), fio's `lat`; None: fio timed no I/O
    clat_mean_us: float | None     # completion latency (None for sync: fio times the call as a whole)
    # completion latency, fio's list: empty where fio timed none of the I/Os it counted (a job that
    # finished within its ramp_time, as a verify job on a small region does)
    percentiles_us: dict[float, float] = field(default_factory=dict)
    bins_ns: dict[int, int] = field(default_factory=dict)   # its histogram (json+): bin value in ns -> count
    lat_sd_us: float | None = None  # the total latency's standard deviation over the requests


@dataclass(frozen=True)
class Job:
    """One job of a report (one reporting group under group_reporting)."""
    name: str
    group: int
    runtime_s: float
    cpu_s: float                   # usr + sys over its runtime
    engine: str                    # the ioengine fio says it ran
    directions: tuple[Figures, ...]
    steady: dict | None = None     # fio's steady-state detection (`steadystate`): criterion, attained
    start_s: float | None = None   # when its measured run began, epoch seconds on its node's clock (fio >= 3.36)

    def direction(self, name: str) -> Figures | None:
        return next((d for d in self.directions if d.direction == name), None)


@dataclass(frozen=True)
class Report:
    version: str
    timestamp_s: float             # when fio wrote it, epoch seconds on its node's clock: after its jobs ended
                                   # and their engines shut down (librbd's can take seconds)
    jobs: tuple[Job, ...]

    @property
    def window(self) -> tuple[float, float] | None:
        return self.window_of(self.jobs)

    def window_of(self, jobs: Iterable[Job]) -> tuple[float, float] | None:
        """When these jobs ran, epoch seconds on the node's clock: from each job's start where fio
        says it (fio >= 3.36). Older fio says only when it wrote the report, after the jobs and
        their engines' shutdown: the window is taken to end then (late by that shutdown), groups
        one after another (a stonewall starts a new one), a group's jobs side by side."""
        jobs = list(jobs)
        if jobs and all(job.start_s for job in jobs):
            return min(job.start_s for job in jobs), max(job.start_s + job.runtime_s for job in jobs)
        groups: dict[int, float] = {}
        for job in jobs:
            groups[job.group] = max(groups.get(job.group, 0.0), job.runtime_s)
        span = sum(groups.values())
        return (self.timestamp_s - span, self.timestamp_s) if span and self.timestamp_s else None


def _figures(direction: str, d: dict) -> Figures | None:
    if direction == SYNC:
        if not d.get("total_ios"):
            return None
        lat = d["lat_ns"]
        return Figures(SYNC, d["total_ios"], None, None, _mean(lat, 1000), None, _pct(lat, 1000), _bins(lat),
                       _sd(lat, 1000))
    if "clat_ns" in d:        # fio 3.x: nanoseconds
        n, clat, lat, scale = d["total_ios"], d["clat_ns"], d["lat_ns"], 1000
    elif "clat" in d and "lat" in d:   # fio 2.x: microseconds; 2.1.x has no total_ios (iops x runtime)
        n = d.get("total_ios", round(d["iops"] * d.get("runtime", 0) / 1000))
        clat, lat, scale = d["clat"], d["lat"], 1
    else:
        raise KeyError("clat_ns")
    if not n:
        return None
    return Figures(direction, n, d["iops"], d["bw"], _mean(lat, scale), _mean(clat, scale), _pct(clat, scale),
                   _bins(clat) if scale == 1000 else {}, _sd(lat, scale))


def _mean(stat: dict, scale: float) -> float | None:
    """A latency's mean, or None where fio took no sample of it (its N, fio 3.x): a mean of 0."""
    return stat["mean"] / scale if stat.get("N", 1) else None


def _sd(stat: dict, scale: float) -> float | None:
    return stat["stddev"] / scale if stat.get("N", 1) and "stddev" in stat else None


def _pct(stat: dict, scale: float) -> dict[float, float]:
    return {float(k): v / scale for k, v in stat.get("percentile", {}).items()}


def _bins(stat: dict) -> dict[int, int]:
    return {int(k): v for k, v in stat.get("bins", {}).items()}


def read(raw: str) -> Report:
    """fio's JSON (json or json+), after any warning lines fio printed before it."""
    start = raw.find("{")
    if start < 0:
        raise FioOutputError("fio printed no JSON")
    try:
        doc = json.loads(raw[start:])
    except json.JSONDecodeError as e:
        # fio writes a bare -nan (or inf) where a steady-state slope has one sample: not JSON, read as null
        repaired = re.sub(r"(:\s*)-?(nan|inf)\b", r"\1null", raw[start:])
        try:
            doc = json.loads(repaired)
        except json.JSONDecodeError:
            raise FioOutputError(f"fio output is not valid JSON: {e}") from None
    version = doc.get("fio version", "unknown")
    engine = doc.get("global options", {}).get("ioengine", "")
    jobs = []
    try:   # a group of one entry is one job or a reporting group (numjobs clones reported apart share a group)
        in_group = Counter(job.get("groupid", 0) for job in doc["jobs"])
        for job in doc["jobs"]:
            if job.get("error"):
                raise FioOutputError(f"fio job {job.get('jobname')} failed with error {job['error']}")
            ms = job.get("job_runtime") or max(job.get(d, {}).get("runtime", 0) for d in IO_DIRECTIONS)
            options = {**doc.get("global options", {}), **job.get("job options", {})}
            wall = _wall_ms(job, max(1, fio_count(options.get("numjobs")) or 1) if in_group[job.get("groupid", 0)] == 1 else 1)
            figures = [f for name in REPORTED if name in job and (f := _figures(name, job[name])) is not None]
            ss = job.get("steadystate")
            steady = {"criterion": ss.get("ss"), "attained": bool(ss.get("attained")), "window_s": ss.get("duration")
                      } if ss else None
            # fio's CPU shares are of job_runtime, summed over a reporting group like the CPU itself
            jobs.append(Job(job.get("jobname", ""), job.get("groupid", 0), wall / 1000,
                            (job.get("usr_cpu", 0) + job.get("sys_cpu", 0)) / 100 * ms / 1000,
                            job.get("job options", {}).get("ioengine") or engine, tuple(figures), steady,
                            _start_s(job, options)))
    except KeyError as e:
        raise FioOutputError(f"cannot read the JSON of {version}: no {e} field where fio 2.x or 3.x has one; "
                             "run fio 3.x, or report this layout") from None
    return Report(version, doc.get("timestamp_ms", 0) / 1000, tuple(jobs))


def _start_s(job: dict, options: dict) -> float | None:
    """fio's job_start (ms), where it reads the wall clock: job_start_clock_id unset or 0 (CLOCK_REALTIME)."""
    realtime = str(options.get("job_start_clock_id", "0")).strip() in ("0", "")
    return job["job_start"] / 1000 if realtime and job.get("job_start") else None


def _wall_ms(job: dict, members: int) -> float:
    """How long a job, or a reporting group of `members` jobs side by side, ran (ms). fio's
    job_runtime is a job's own, but a reporting group's is the sum over its jobs: it is divided by
    their count, and no shorter than the longest direction (fio's runtime of a direction is the
    longest of the group's jobs). It is never longer than the directions one after another (a verify
    after its writes), which also bounds a count that numjobs understates (a group of several sections)."""
    spans = [job[d]["runtime"] for d in IO_DIRECTIONS if job.get(d, {}).get("runtime")]
    longest = max(spans or [job.get(MIXED, {}).get("runtime", 0)])
    total = job.get("job_runtime")
    if not total:   # fio 2.x
        return longest
    wall = max(total / members, longest) if members > 1 else total
    return min(wall, sum(spans)) if spans else wall   # unified reporting's one runtime is its longest direction's


def fio_count(value: str | None) -> int | None:
    """A count (numjobs) as fio reads it: decimal (leading zeros too) or 0x hex; 1 when not given,
    None in a form vtb does not read (fio_jobfile refuses it before a run)."""
    value = (value or "1").strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", value):
        return int(value, 16)
    return int(value) if re.fullmatch(r"[0-9]+", value) else None   # ASCII: isdigit() takes `1²`


def merged_percentiles(histograms: Iterable[dict[int, int]], percentiles: Iterable[float] = PERCENTILES
                       ) -> dict[float, float]:
    """The percentiles (us) of the I/Os of several histograms together, the way fio takes them from
    one: the first bin at which the running count reaches p% of all I/Os. Empty without histograms."""
    merged: Counter[int] = Counter()
    for h in histograms:
        merged.update(h)
    total = sum(merged.values())
    if not total:
        return {}
    out, running, wanted = {}, 0, sorted(percentiles)
    for value, count in sorted(merged.items()):
        running += count
        while wanted and running >= wanted[0] / 100 * total:
            out[float(wanted.pop(0))] = value / 1000
    return out
