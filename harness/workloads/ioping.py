"""ioping (Debian's ioping): one request at a time, a pause between requests, each request's
latency kept; the same runner in a guest and on a host. `harness run latency` measures with it
where `latency.tools` names it: the points `<pattern>-qd1-ioping`.

Unlike fio's QD1 points, which issue the next request as the last completes, ioping waits
`interval_ms` between requests, so each one meets an idle device: the latency a lone request
sees (the tool's own use), not the latency under a QD1 stream."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from harness.common import paths
from harness.common.exits import StepFailed
from harness.common.schema import BlockSize, Section, bs_bytes
from harness.hosts import Node
from harness.libvirt.agent import PATH, guests
from harness.results.columns import I, N, column
from harness.results.outputs import Output
from harness.workloads import Tool, run_runner, runner_cpu_s

RUNNER = paths.GUEST_AGENTS / "run-ioping.sh"
WARMUP = 2   # requests ioping times but leaves out of its figures (-a): the first finds cold caches
# requests at most (-c): each is some 330 bytes of JSON, and a guest agent returns at most 16 MiB of output
MAX_REQUESTS = 40_000


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("ioping (latency.tools)", [
    column("ioping_interval_ms", N, "the pause between requests", "ms"),
    column("ioping_work_mib", I, "the region the requests fall in", "MiB"),
]),)


class IopingJob(Section):
    rw: Literal["randread", "read", "randwrite", "write"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="request size")
    runtime_s: int = Field(10, ge=1, le=86400, description="seconds of requests (ioping -w)")
    interval_ms: float = Field(10, ge=0, le=60000, description="pause between requests (0: back to back)")
    work_mib: int = Field(128, ge=1, description="the region the requests fall in (-S), within the participant's slice")
    direct: bool = Field(True, description="O_DIRECT (-D)")


class IopingError(StepFailed):
    pass


def argv(job: IopingJob, size: int, offset: int) -> list[str]:
    """ioping's arguments for the job on a region of `size` bytes from `offset`: JSON, every request."""
    work = min(job.work_mib << 20, size)
    if work < bs_bytes(job.bs):
        raise IopingError(f"the participant's region ({size} bytes) is smaller than one request ({job.bs})")
    # -C with -D: O_DIRECT passes the page cache, and without -C ioping 1.3 syncs after each write
    # inside the timed request, which fio's QD1 writes do not
    return ["-J", "-a", str(WARMUP), "-c", str(MAX_REQUESTS + WARMUP), "-i", f"{job.interval_ms:g}ms",
            "-w", f"{job.runtime_s}s", "-s", job.bs, "-S", str(work), "-o", str(offset),
            *(["-D", "-C"] if job.direct else []),
            *(["-L"] if job.rw in ("read", "write") else []),
            *(["-WWW"] if job.rw.endswith("write") else [])]   # a device is written only when asked three times


def timeout_s(job: IopingJob) -> float:
    return job.runtime_s + 60 + WARMUP * job.interval_ms / 1000


def run(node: Node, job: IopingJob, *, locator: str, size: int, offset: int = 0) -> str:
    """The job on the disk the locator names (see find-disk.sh) on any node; ioping's raw output."""
    if locator.startswith("rbd:"):
        raise IopingError("ioping reaches block devices and files, not an RBD image through librbd: measure the "
                          "rbd backend's host side with fio (latency.tools = [\"fio\"])")
    env = {"PATH": PATH, "IOPING_ARGS": " ".join(argv(job, size, offset))}
    return run_runner(node, RUNNER, locator, env=env, timeout=timeout_s(job), tool="ioping", error=IopingError)


def _one(job: IopingJob, participants: list) -> None:
    if len(participants) != 1:
        raise IopingError(f"ioping measures one participant at a time, not {len(participants)}: set the point's vms to 1")


def on_host(host: Node, job: IopingJob, *, device: str, slots: list[tuple[int, int]]) -> list[Output]:
    _one(job, slots)
    (offset, size), = slots
    locator = device if device.startswith("rbd:") else f"path:{device}"
    return [Output("host-slot0", run(host, job, locator=locator, size=size, offset=offset), host=host.name)]


def in_guests(uri: str, job: IopingJob, vms: list) -> list[Output]:
    _one(job, vms)
    with guests(uri, [vms[0].name]) as agents:
        return [Output(vms[0].name, run(agents[0], job, locator=vms[0].locator, size=vms[0].slice_bytes))]


@dataclass(frozen=True)
class IopingResult:
    latencies_us: tuple[float, ...]   # each measured request's, in order
    version: str
    cpu_s: float = 0.0

    def metrics(self) -> dict[str, tuple[float, str]]:
        lat = np.asarray(self.latencies_us)
        p50, p95, p99, p999 = np.percentile(lat, [50, 95, 99, 99.9])
        return {"lat_mean": (float(lat.mean()), "us"), "lat_p50": (float(p50), "us"), "lat_p95": (float(p95), "us"),
                "lat_p99": (float(p99), "us"), "lat_p999": (float(p999), "us"),
                "requests": (float(len(lat)), "requests")}


def parse(raw: str) -> IopingResult:
    """The runner's output (ioping's version, its JSON, the runner's CPU line) -> every measured
    request's latency (ioping 1.x reports nanoseconds; warm-up requests are marked ignored)."""
    start, end = raw.find("["), raw.rfind("]")
    if start < 0 or end < start:
        raise ValueError("ioping output has no JSON report (run with -J)")
    try:
        report = json.loads(raw[start:end + 1])
    except json.JSONDecodeError as e:
        raise ValueError(f"ioping's JSON report does not parse: {e}") from None
    lat = tuple(r["io"]["time"] / 1000 for r in report if "io" in r and not r["io"].get("ignored"))
    if not lat:
        raise ValueError("ioping's report has no measured request (every request was a warm-up, or none ran)")
    version = next((line.strip() for line in raw[:start].splitlines() if line.startswith("ioping ")), "unknown")
    return IopingResult(lat, version, runner_cpu_s(raw))


def job_meta(job: IopingJob) -> dict:
    """The job as sample columns: fio's names where they mean the same, ioping_* for its own."""
    return {"rw": job.rw, "bs": job.bs, "runtime_s": job.runtime_s, "ramp_s": 0, "direct": job.direct, "iodepth": 1,
            "numjobs": 1, "ioping_interval_ms": job.interval_ms, "ioping_work_mib": job.work_mib}


def tool_seconds(job: IopingJob) -> float:
    return job.runtime_s + WARMUP * job.interval_ms / 1000


def qd1_job(settings, rw: str, bs: str) -> IopingJob:
    """The latency experiment's pattern as ioping requests, for its runtime plus ramp (ioping has no ramp)."""
    return IopingJob(rw=rw, bs=bs, runtime_s=settings.runtime_s + settings.ramp_s)


TOOL = Tool("ioping", on_host, in_guests, parse, job_meta, tool_seconds, qd1_job, host_packages=("ioping",))
