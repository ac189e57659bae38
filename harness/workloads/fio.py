"""fio: the job template in guest-agents/, run in guests via the agent and on the host directly."""
from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from harness.common import paths
from harness.common.console import step
from harness.common.exits import StepFailed
from harness.common.schema import BlockSize, Section, bs_bytes
from harness.hosts import Node
from harness.libvirt.agent import PATH, guests, in_parallel
from harness.results.outputs import Output
from harness.workloads import Tool, fio_jobfile, fio_output, fio_trace, run_runner
from harness.workloads.fio_jobfile import MARGIN_S, JobFile
from harness.workloads.fio_trace import Trace

JOB_TEMPLATE = paths.GUEST_AGENTS / "fio" / "job.fio"
GUEST_RUNNER = paths.GUEST_AGENTS / "run-fio.sh"


class FioJob(Section):
    """One fio job: the workload's own settings (an experiment embeds or builds them)."""
    rw: Literal["randread", "randwrite", "read", "write", "randrw", "rw"] = Field(
        "randread", description="fio access pattern")
    bs: BlockSize = Field("4k", description="block size, e.g. 4k or 128k")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth per fio job")
    numjobs: int = Field(1, ge=1, le=256, description="fio jobs per VM (and per host slot)")
    ioengine: Literal["libaio", "io_uring", "psync", "null"] = Field("libaio", description="fio ioengine")
    direct: bool = Field(True, description="O_DIRECT I/O")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    rate_iops: int = Field(0, ge=0, description="fio rate limit in IOPS per job (0 = none)")
    ios: int = Field(0, ge=0, description="a fixed count of I/Os per job, within runtime_s at most "
                     "(0 = time-based: I/O for runtime_s)")


class FioError(StepFailed):
    pass


class FioTimeout(FioError, TimeoutError):
    """fio ran past its runtime and was stopped: in a guest, a sign of a stuck disk queue."""


@dataclass(frozen=True)
class FioResult:
    """fio's figures for one process running vtb's own job: one job, one direction."""
    iops: float
    bw_kib_s: float
    # None where fio timed none of the direction's I/Os (a job file's job done within its ramp_time):
    # that direction has no latency figures, and its others stand
    lat_mean_us: float | None
    lat_p50_us: float | None
    lat_p99_us: float | None
    lat_p999_us: float | None
    runtime_s: float
    version: str
    cpu_s: float = 0.0      # CPU fio says it used (usr + sys over each job's runtime)
    window: tuple[float, float] | None = None   # the measured run, epoch seconds on its node's clock
    ioengine: str = ""      # the engine fio ran (the runner puts librbd's over the job's on an rbd image)
    direction: str = ""     # read | write | trim | mixed (fio's unified figure of a mixed pattern)
    percentiles_us: dict[float, float] = field(default_factory=dict)   # every one fio was asked for
    bins_ns: dict[int, int] = field(default_factory=dict)   # the completion-latency histogram (json+)

    def as_run(self) -> dict:
        """How fio says it ran, over the job's fields in the sample metadata."""
        return {k: v for k, v in (("ioengine", self.ioengine), ("direction", self.direction)) if v}

    def detail(self, metric: str) -> dict:
        """What a sample of this metric keeps beside its value: a latency sample, the whole distribution."""
        return {"percentiles_us": percentiles_meta(self.percentiles_us)} if metric.startswith("lat_p") else {}

    def metrics(self) -> dict[str, tuple[float, str]]:
        figures = {"iops": (self.iops, "IOPS"), "bw": (self.bw_kib_s, "KiB/s"),
                   "lat_mean": (self.lat_mean_us, "us"), "lat_p50": (self.lat_p50_us, "us"),
                   "lat_p99": (self.lat_p99_us, "us"), "lat_p999": (self.lat_p999_us, "us")}
        return {m: figure for m, figure in figures.items() if figure[0] is not None}


def percentiles_meta(pct: dict[float, float]) -> dict[str, float]:
    """Percentiles as JSON keys ("99.9"), in order."""
    return {f"{p:g}": v for p, v in sorted(pct.items())}


def job_env(job: FioJob, *, offset: int, size: int) -> dict[str, str]:
    return {"FIO_OFFSET": str(offset), "FIO_SIZE": str(size), "FIO_RW": job.rw, "FIO_BS": job.bs,
            "FIO_IODEPTH": str(job.iodepth), "FIO_NUMJOBS": str(job.numjobs), "FIO_IOENGINE": job.ioengine,
            "FIO_DIRECT": str(int(job.direct)), "FIO_RUNTIME": str(job.runtime_s), "FIO_RAMP": str(job.ramp_s),
            "FIO_RATE_IOPS": str(job.rate_iops), "FIO_TIME_BASED": "0" if job.ios else "1",
            "FIO_IO_SIZE": str(job.ios * bs_bytes(job.bs)), "FIO_PERCENTILES": fio_output.PERCENTILE_LIST,
            "FIO_UNIFIED": str(int(mixed(job.rw)))}


def mixed(rw: str) -> bool:
    """A pattern of reads and writes: fio reports it as one figure (unified_rw_reporting) for vtb's job."""
    return rw in ("randrw", "rw")


def job_meta(job: FioJob | JobFile | Trace) -> dict:
    """The job's fields (or the job file's or trace's name, hash and jobs) as sample metadata."""
    return job.model_dump() if isinstance(job, FioJob) else job.meta()


def tool_seconds(job: FioJob | JobFile | Trace) -> float:
    """How long fio runs the job, as asked (its ramp and runtime; a job file's jobs one after
    another; a trace's replay bound), for a run's plan. A job of a fixed request count ends when
    they are done, which only a run can tell: 0 (its runtime is only its bound)."""
    if isinstance(job, FioJob):
        return 0.0 if job.ios else job.runtime_s + job.ramp_s
    return max(0.0, job.timeout_s - MARGIN_S)


def timeout_s(job: FioJob) -> float:
    return job.runtime_s + job.ramp_s + 60


def fs_env(mkfs: list[str] | None, mount_options: str = "") -> dict[str, str]:
    """Makes run-fio.sh put a new filesystem on the disk and run the job on a file in it."""
    return {"FIO_MKFS": " ".join(mkfs), "FIO_MOUNT_OPTIONS": mount_options} if mkfs else {}


def run(node: Node, job: FioJob | JobFile | Trace, *, locator: str, size: int, offset: int = 0,
        extra_env: dict | None = None, captures: dict[str, bytes | str] | None = None) -> str:
    """Runs the job (vtb's template, or a user's job file rendered for this participant's slice) on
    the disk or region the locator names (see find-disk.sh: `serial:`, `pci:` in a guest, `path:`
    or `rbd:` on a host) with the same runner on any node; returns fio's raw JSON. A trace is
    uploaded first; the iologs a capturing job file wrote go into `captures` (see fetch_captures)."""
    payload, iologs, env = None, [], {}
    try:   # a trace or job file is checked against this participant's own slice before anything reaches its node
        if isinstance(job, Trace):
            payload, text, bound = job.payload(offset, size), job.render().encode(), job.timeout_s
        elif isinstance(job, JobFile):
            text, bound = job.runnable(offset, size).encode(), job.timeout_s
            iologs = [j.name for j in job.jobs] if job.capture else []   # the only files fetched back
        else:
            env, text, bound = job_env(job, offset=offset, size=size), JOB_TEMPLATE.read_bytes(), timeout_s(job)
    except fio_jobfile.JobFileError as e:
        raise FioError(f"not run on {node.label}: {e}") from None
    # this run's files on the node (the trace, the iologs) go into a folder of its own, never a guessable name
    scratch = fio_trace.scratch_dir(node, "trace" if payload is not None else "iolog") if payload is not None or iologs else None
    try:
        if payload is not None:
            env["FIO_TRACE"] = f"{scratch}/trace"
            fio_trace.upload(node, env["FIO_TRACE"], payload)
        if iologs:
            env["FIO_IOLOG"] = f"{scratch}/iolog"   # the job file writes $FIO_IOLOG.<job>
        env = {"PATH": PATH, **env, "FIO_RANDSEED": str(secrets.randbits(63)), **(extra_env or {})}
        bound += float(env.get("FIO_START_MAX_WAIT", 0))   # the wait for a shared start is not the job's time
        raw = run_runner(node, GUEST_RUNNER, locator, env=env, input=text, timeout=bound,
                         tool="fio", error=FioError, timeout_error=FioTimeout)
        if captures is not None and iologs:   # offsets relative to the slice: replayable on any other
            captures.update(fio_trace.fetch_captures(node, env["FIO_IOLOG"], iologs, offset))
        return raw
    finally:
        if scratch:
            with contextlib.suppress(Exception):   # best effort: a node that stopped answering has its own error
                node.run(["rm", "-rf", "--", scratch], timeout=60, check=False)


def parse(raw: str) -> FioResult:
    """fio's report of vtb's own job -> FioResult. That job is one reporting group with one
    direction (a mixed pattern is fio's own `mixed` figure, by unified_rw_reporting): a report of
    several jobs or directions is someone else's job, whose figures are never summed here."""
    try:
        report = fio_output.read(raw)
    except fio_output.FioOutputError as e:
        raise FioError(str(e)) from None
    figures = [(job, f) for job in report.jobs for f in job.directions if f.direction != fio_output.SYNC]
    if not figures:
        raise FioError("fio completed no I/O")
    if len(figures) > 1:
        apart = ", ".join(f"{job.name} {f.direction}" for job, f in figures)
        raise FioError(f"fio reported {len(figures)} figures ({apart}), and vtb's own job has one: a job file of "
                       "several jobs or directions is read per job and direction, never summed")
    job, f = figures[0]
    # vtb's own job is its one figure, and its experiments read its latency: none is an error here
    if missing := {50.0, 99.0, 99.9} - set(f.percentiles_us):
        raise FioError(f"job {job.name}: fio reported no {', '.join(f'{p:g}th' for p in sorted(missing))} percentile "
                       f"of the completion latency (its percentile_list is {sorted(f.percentiles_us)}, and fio times "
                       f"no I/O done within ramp_time); vtb asks for {fio_output.PERCENTILE_LIST}")
    return _result(report, job, f)


def _result(report: fio_output.Report, job: fio_output.Job, f: fio_output.Figures) -> FioResult:
    """One job's one direction as a FioResult; its window, the job's runtime before fio's stamp. A
    percentile fio did not report (it timed none of the direction's I/Os) is no figure."""
    pct = f.percentiles_us
    return FioResult(iops=f.iops, bw_kib_s=f.bw_kib_s, lat_mean_us=f.lat_mean_us, lat_p50_us=pct.get(50.0),
                     lat_p99_us=pct.get(99.0), lat_p999_us=pct.get(99.9), runtime_s=job.runtime_s, version=report.version,
                     cpu_s=job.cpu_s, window=report.window_of([job]) if len(report.jobs) == 1 else None,
                     ioengine=job.engine, direction=f.direction, percentiles_us=pct, bins_ns=f.bins_ns)


@dataclass(frozen=True)
class JobReport:
    """fio's report of a job file: each job's each direction a facet of the point, never summed."""
    version: str
    window: tuple[float, float] | None
    cpu_s: float
    parts: tuple[tuple[str, dict, FioResult], ...]   # (facet key, what names it, its figures)

    def facets(self) -> tuple[tuple[str, dict, FioResult], ...]:
        return self.parts


def parse_jobs(raw: str, prefix: str = "") -> JobReport:
    """fio's report of any job file: one FioResult per job (or reporting group) and direction, in
    the file's order; a job's fsync figures (psync with fsync) beside its writes. `prefix` starts
    each facet's name (the VM count of a point, where a run sweeps it)."""
    try:
        report = fio_output.read(raw)
    except fio_output.FioOutputError as e:
        raise FioError(str(e)) from None
    measured = [job for job in report.jobs if job.name != fio_jobfile.FILL and not job.name.startswith(fio_jobfile.STEADY)]
    steady = {job.name.removeprefix(fio_jobfile.STEADY): job for job in report.jobs
              if job.name.startswith(fio_jobfile.STEADY)}
    fill = next((job for job in report.jobs if job.name == fio_jobfile.FILL), None)
    preconditioned = {"precondition_fill_s": fill.runtime_s,   # the fill writes 1 MiB at a time
                      "precondition_fill_mib": sum(d.ios for d in fill.directions)} if fill else {}
    parts, names = [], [job.name for job in measured]
    for i, job in enumerate(measured):
        name = job.name if names.count(job.name) == 1 else f"{job.name}.{i}"   # numjobs without group_reporting
        # preconditioned: how the fill went, and whether the job was steady before it counted
        extra = {**preconditioned, **steady_state(steady.get(job.name))} if fill else {}
        parts += _job_parts(report, job, f"{prefix}{name}", extra)
    if not parts:
        raise FioError("fio completed no I/O")
    return JobReport(report.version, report.window_of(measured), sum(j.cpu_s for j in report.jobs), tuple(parts))


def _job_parts(report: fio_output.Report, job: fio_output.Job, name: str, extra: dict) -> list[tuple[str, dict, Any]]:
    """One job's facets, a direction each (`<name>/<direction>`), its fsync figures beside its writes."""
    sync = job.direction(fio_output.SYNC)
    parts = []
    for f in job.directions:
        if f.direction == fio_output.SYNC:
            continue
        key = f"{name}/{f.direction}"
        meta = {"point": key, "job": job.name, "direction": f.direction, "ioengine": job.engine, "group_id": job.group,
                **extra}
        if sync and f.direction == "write":
            meta.update({"sync_ios": sync.ios, "sync_lat_mean_us": sync.lat_mean_us,
                         "sync_percentiles_us": percentiles_meta(sync.percentiles_us)})
        parts.append((key, meta, _result(report, job, f)))
    return parts


def steady_state(run: fio_output.Job | None) -> dict:
    """What a sample says of its job's steady state: reached or not, after how long, by what criterion."""
    if run is None or run.steady is None:
        return {"steady_state_reached": False, "steady_state_why": "fio ran no steady-state detection for this job"}
    return {"steady_state_reached": run.steady["attained"], "steady_state_after_s": run.runtime_s,
            "steady_state_criterion": run.steady["criterion"], "steady_state_window_s": run.steady["window_s"]}


# Participants of one point start fio at one moment, this far ahead: time to issue every command
# and page fio in (a TCG guest just resumed takes about a second), so that none starts late. A node
# says its own lead (`start_lead_s`: this machine's processes start at once); this is the default.
START_MARGIN_S = 1.5
MAX_START_MARGIN_S = 30.0
LAG_DECAY = 0.5   # what a learnt lag keeps after a point its kind met in time


class SharedStart:
    """When a point's participants start: far enough ahead that the last command reaches its node
    in time. How late participants turned up (seen from fio's own timestamps) is learned per
    participant and per kind of node, so that a loaded host (4 TCG guests on 2 cores start seconds
    apart) gets a wider margin from then on instead of measuring its participants one after
    another, while the host's own fio processes, which start at once, do not wait for the guests' lag.
    What is learnt halves with every point the kind then meets in time: a run's first point (guests
    just restored page fio in; seen 4.4 s late) does not widen all the later ones."""

    def __init__(self) -> None:
        self.lag_per_participant_s: dict[str, float] = {}   # by kind of node (its class)

    def margin_s(self, kinds: list[str], lead_s: float = START_MARGIN_S) -> float:
        """How far ahead participants of these kinds start: the slowest one's own lead, plus what
        they were seen to lag."""
        late = max((kinds.count(k) * self.lag_per_participant_s.get(k, 0.0) for k in set(kinds)), default=0.0)
        return min(MAX_START_MARGIN_S, lead_s + 1.5 * late)

    def envs(self, offsets: list[float], kinds: list[str], extra_env: dict | None,
             lead_s: float = START_MARGIN_S) -> tuple[list[dict], float | None]:
        """Each participant's environment, with the start on its own clock when there are several;
        and that start on this machine's clock (None for one participant)."""
        if len(offsets) < 2:
            return [dict(extra_env or {}) for _ in offsets], None
        margin = self.margin_s(kinds, lead_s)
        start = time.time() + margin
        return [{**(extra_env or {}), "FIO_START_AT": f"{start + off:.3f}", "FIO_START_MAX_WAIT": f"{2 * margin:g}"}
                for off in offsets], start

    def learn(self, planned_s: float, windows: list[tuple[float, float] | None], offsets: list[float],
              kinds: list[str], lead_s: float = START_MARGIN_S) -> None:
        """planned_s: when the measured runs should have begun (the start plus the ramp), here."""
        for kind in dict.fromkeys(kinds):
            starts = [w[0] - off for w, off, k in zip(windows, offsets, kinds) if w and k == kind]
            if not starts:   # no report says when they began (a failed run): nothing to learn
                continue
            late, count = max(starts) - planned_s, kinds.count(kind)
            learnt = self.lag_per_participant_s.get(kind, 0.0)
            seen = late / count if late > 0.25 * lead_s else 0.0
            self.lag_per_participant_s[kind] = max(seen, LAG_DECAY * learnt)
            if seen > learnt:
                step(f"  participants ({kind}) began up to {late:.1f} s after their shared start (by fio's report "
                     f"times): shared starts of {count} now allow {self.margin_s([kind] * count, lead_s):.1f} s")


SHARED_START = SharedStart()   # one per run (a process): what it learned holds for the run's later points


@dataclass(frozen=True)
class Target:
    """One participant of a point: a region of a disk on a node (a host slot, or a guest's disk)."""
    node: Node
    locator: str
    offset: int
    size: int
    who: str            # names its output (raw file, the `vm` column)
    host: str = ""      # the host it runs on (or whose guest it is)


def together(job: FioJob | JobFile | Trace, targets: list[Target], extra_env: dict | None = None) -> list[Output]:
    """The job on every target at once, from one barrier and one start time on every node's clock
    (each node's offset is asked once), so that the participants' runs overlap. A lone participant's
    offset is asked too: its report's window, put on this machine's clock, is what observers of
    the point (a Ceph node's link counters) measure over, and a guest's clock is seconds off."""
    nodes = list({id(t.node): t.node for t in targets}.values())   # each asked at once: seconds per node under TCG
    offsets = dict(zip(map(id, nodes), in_parallel(lambda node: node.clock_offset_s(), nodes)))
    offs = [offsets[id(t.node)] for t in targets]
    kinds = [type(t.node).__name__ for t in targets]
    lead = max(getattr(t.node, "start_lead_s", START_MARGIN_S) for t in targets)
    envs, start = SHARED_START.envs(offs, kinds, extra_env, lead)
    captured: list[dict[str, bytes | str]] = [{} for _ in targets]
    raws = in_parallel(lambda i: run(targets[i].node, job, locator=targets[i].locator, offset=targets[i].offset,
                                     size=targets[i].size, extra_env=envs[i], captures=captured[i]), range(len(targets)))
    if start is not None:
        SHARED_START.learn(start + job.ramp_s, [window_of(raw) for raw in raws], offs, kinds, lead)
    return [Output(t.who, raw, extra, clock_offset_s=off, host=t.host)
            for t, raw, off, extra in zip(targets, raws, offs, captured)]


def window_of(raw: str) -> tuple[float, float] | None:
    """When fio's measured run went (epoch seconds on its node's clock), or None where the output says none."""
    try:
        report = fio_output.read(raw)
    except fio_output.FioOutputError:
        return None   # the pipeline records why when it parses
    return report.window


def slot_targets(host, device: str, slots: list[tuple[int, int]], *, who: str = "host-slot") -> list[Target]:
    """Host slots: (offset, size) regions of a host device (a path, or an `rbd:` image, read through librbd)."""
    locator = device if device.startswith("rbd:") else f"path:{device}"
    return [Target(host, locator, off, size, f"{who}{i}", host.name) for i, (off, size) in enumerate(slots)]


def guest_targets(agents: list, vms: list, *, size: int | None = None, host: str = "", offset: int = 0) -> list[Target]:
    """Each VM's data disk (the whole disk unless `size`, from `offset`)."""
    return [Target(a, vm.locator, offset, size or vm.slice_bytes, vm.name, host) for a, vm in zip(agents, vms)]


def on_host(host, job: FioJob | JobFile | Trace, *, device: str, slots: list[tuple[int, int]],
            extra_env: dict | None = None) -> list[Output]:
    """The job on each (offset, size) region of a host device at once: one output per host slot."""
    return together(job, slot_targets(host, device, slots), extra_env)


def in_guests(uri: str, job: FioJob | JobFile | Trace, vms: list, *, size: int | None = None, offset: int = 0,
              extra_env: dict | None = None) -> list[Output]:
    """The job in each VM at once, on its data disk (the whole disk unless `size`, from `offset`)."""
    with guests(uri, [vm.name for vm in vms]) as agents:
        return together(job, guest_targets(agents, vms, size=size, offset=offset), extra_env)


def across_hosts(job: FioJob | JobFile | Trace, *, slots: list[tuple] = (), fleets: list[tuple] = ()) -> list[Output]:
    """One point over several hosts, every participant started together: `slots` are
    (host, device, [(offset, size)]) groups (host fio), `fleets` (host, uri, [VmInfo]) groups."""
    with contextlib.ExitStack() as stack:
        targets = [t for host, device, regions in slots
                   for t in slot_targets(host, device, regions, who=f"{host.name}-slot")]
        for host, uri, vms in fleets:
            agents = stack.enter_context(guests(uri, [vm.name for vm in vms]))
            targets += guest_targets(agents, vms, host=host.name)
        return together(job, targets)


def qd1_job(settings, rw: str, bs: str) -> FioJob:
    """One job, one request in flight: a QD1 latency point, with the experiment's runtime, ramp and engine."""
    return FioJob(rw=rw, bs=bs, iodepth=1, numjobs=1, runtime_s=settings.runtime_s, ramp_s=settings.ramp_s,
                  ioengine=settings.ioengine)


TOOL = Tool("fio", on_host, in_guests, parse, job_meta, tool_seconds, qd1_job)
