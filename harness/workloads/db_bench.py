"""RocksDB's db_bench (Debian's rocksdb-tools): one point = one benchmark on a new filesystem on the
disk, with the same runner in a guest and on a host. A read benchmark runs after an unmeasured
fillseq that loads its keys, in the same process."""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from harness.common import paths
from harness.common.exits import StepFailed
from harness.common.schema import Section
from harness.hosts import Node
from harness.libvirt.agent import PATH, guests
from harness.results.outputs import Output
from harness.workloads import run_runner, runner_cpu_s

RUNNER = paths.GUEST_AGENTS / "run-db-bench.sh"
Benchmark = Literal["fillseq", "fillrandom", "readrandom", "readseq"]
LOADER = "fillseq"   # fills the keys a read benchmark reads (every key present)


class DbBenchJob(Section):
    """db_bench's own settings (the study: 100 M keys, 64 write buffers, batches of 8, direct I/O)."""
    num: int = Field(20000, ge=100, description="keys written or read per benchmark (the study: 100,000,000)")
    value_size: int = Field(400, ge=1, le=1 << 20, description="bytes per value")
    threads: int = Field(1, ge=1, le=64, description="db_bench threads")
    write_buffers: int = Field(64, ge=2, le=1024, description="max_write_buffer_number (the study: 64)")
    batch_size: int = Field(8, ge=1, le=1024, description="keys per batch (the study: 8)")
    direct: bool = Field(True, description="direct I/O for reads, flushes and compactions (as the study)")


class DbBenchError(StepFailed):
    pass


def benchmarks(benchmark: str) -> str:
    """db_bench's --benchmarks for one measured benchmark: a read one gets the loader in front."""
    return f"{LOADER},{benchmark}" if benchmark.startswith("read") else benchmark


def timeout_s(job: DbBenchJob) -> float:
    # a TCG guest writes some 10-50 k keys/s; the filesystem, the loader and the slack on top
    return 120 + 2 * job.num * job.threads / 2000


def run(node: Node, job: DbBenchJob, benchmark: str, *, locator: str, mkfs: list[str]) -> str:
    """The benchmark on the disk the locator names (see find-disk.sh) on any node; db_bench's raw output."""
    env = {"PATH": PATH, "DB_MKFS": " ".join(mkfs), "DB_BENCHMARKS": benchmarks(benchmark), "DB_NUM": str(job.num),
           "DB_VALUE_SIZE": str(job.value_size), "DB_THREADS": str(job.threads),
           "DB_WRITE_BUFFERS": str(job.write_buffers), "DB_BATCH": str(job.batch_size),
           "DB_DIRECT": str(job.direct).lower(), "DB_SEED": str(secrets.randbits(31) or 1)}
    return run_runner(node, RUNNER, locator, env=env, timeout=timeout_s(job), tool="db_bench", error=DbBenchError)


def on_host(host: Node, job: DbBenchJob, benchmark: str, *, device: str, mkfs: list[str]) -> list[Output]:
    return [Output("host", run(host, job, benchmark, locator=f"path:{device}", mkfs=mkfs), host=host.name)]


def in_guest(uri: str, job: DbBenchJob, benchmark: str, vm, *, mkfs: list[str]) -> list[Output]:
    with guests(uri, [vm.name]) as agents:
        return [Output(vm.name, run(agents[0], job, benchmark, locator=vm.locator, mkfs=mkfs))]


@dataclass(frozen=True)
class DbBenchResult:
    benchmark: str
    ops_s: float
    us_per_op: float
    mb_s: float            # 0 when db_bench gives none
    p50_us: float
    p99_us: float
    version: str
    cpu_s: float = 0.0     # CPU the runner says db_bench (and mkfs) used

    def metrics(self) -> dict[str, tuple[float, str]]:
        return {"ops": (self.ops_s, "ops/s"), "us_per_op": (self.us_per_op, "us"), "mb_s": (self.mb_s, "MB/s"),
                "lat_p50": (self.p50_us, "us"), "lat_p99": (self.p99_us, "us")}


RESULT = re.compile(r"^(\w+)\s*:\s*([\d.]+) micros/op ([\d.]+) ops/sec(?:[^\n]*?;\s*([\d.]+) MB/s)?[^\n]*$", re.M)
PERCENTILES = re.compile(r"Percentiles: P50: ([\d.]+) P75: [\d.]+ P99: ([\d.]+)")


def parse(raw: str) -> DbBenchResult:
    """db_bench 6.x-7.x output -> the last benchmark's figures (the measured one; see `benchmarks`)."""
    results = list(RESULT.finditer(raw))
    if not results:
        raise ValueError("db_bench output has no benchmark result line (`NAME : X micros/op Y ops/sec`)")
    last = results[-1]
    pct = [m for m in PERCENTILES.finditer(raw) if m.start() > last.end()]
    if not pct:
        raise ValueError(f"db_bench output has no percentiles after {last.group(1)} (run it with --histogram=true)")
    version = re.search(r"^db_bench version ([\w.]+)", raw, re.M)
    return DbBenchResult(benchmark=last.group(1), ops_s=float(last.group(3)), us_per_op=float(last.group(2)),
                         mb_s=float(last.group(4) or 0), p50_us=float(pct[0].group(1)), p99_us=float(pct[0].group(2)),
                         version=f"rocksdb {version.group(1)}" if version else "unknown", cpu_s=runner_cpu_s(raw))
