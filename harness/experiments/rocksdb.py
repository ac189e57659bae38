"""`harness run rocksdb`: RocksDB's db_bench (fillseq, fillrandom, readrandom, readseq) on a filesystem
on RAID 0, 1 and 10 arrays and on one member alone, PE and VE: the RAID-on-NVMe study's figure 6.
Config section [rocksdb]; member devices from [raid]. Runs on the RAID sweep's plumbing (arrays
through Terraform, a one-VM fleet on each, the nested host where this host has no md)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pydantic import Field, model_validator

from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import Filesystem, RaidLevel
from harness.config.core import Config
from harness.experiments import Flag, RunContext
from harness.experiments.raid_sweep import (
    Setup,
    WorkloadSweep,
    workload_bars,
    workload_rows,
    workload_settings_problem,
    workload_table,
)
from harness.fleet.testbed import TestbedRecord
from harness.measure import sweep
from harness.measure.pipeline import Point
from harness.resources.raid import MKFS
from harness.results.columns import B, I, N, S, column
from harness.results.environment import accel_label
from harness.results.samples import Sample
from harness.workloads import db_bench
from harness.workloads.db_bench import Benchmark, DbBenchJob

# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("rocksdb", [
    column("db_<setting>", (S, I, N, B), "rocksdb: db_bench's settings"),
    column("benchmark", S, "rocksdb: the db_bench benchmark"),
]),)


class Settings(DbBenchJob):
    levels: list[RaidLevel] = Field([0, 1, 10], min_length=1, description="RAID levels (with one member alone as the base)")
    members: int = Field(4, ge=2, le=64, description="member devices per array")
    benchmarks: list[Benchmark] = Field(["fillseq", "fillrandom", "readrandom", "readseq"], min_length=1,
                                        description="db_bench benchmarks, each a point")
    filesystem: Filesystem = Field("ext4", description="filesystem the database lives on (the study: ext4)")
    size_mib: int = Field(128, ge=16, description="the disk each database lives on (host and VM alike); must fit "
                                                  "the keys and the smallest array")
    ve: bool = Field(True, description="also measure inside a VM whose disk is the array (PE and VE side by side)")

    @model_validator(mode="after")
    def _fits(self) -> "Settings":
        if why := workload_settings_problem(self, "rocksdb"):
            raise ValueError(why)
        # the keys uncompressed, with room for compaction's copies and the write-ahead log
        need_mib = 3 * self.num * (self.value_size + 16) >> 20
        if need_mib > self.size_mib // 2:
            raise ValueError(f"rocksdb: num={self.num} keys of {self.value_size} bytes need about {need_mib} MiB, "
                             f"more than half of size_mib={self.size_mib}; lower num or raise size_mib")
        return self


@dataclass(frozen=True)
class SweepPoint:
    label: str          # the benchmark
    benchmark: str


class RocksDb(WorkloadSweep):
    question = "RocksDB's db_bench on RAID and one drive, PE and VE"
    name = "rocksdb"
    section = "rocksdb"
    Settings = Settings
    headline = "ops"
    flags = (Flag("--num", ("rocksdb.num",)),
             Flag("--pe-only", ("rocksdb.ve",), "Measure on the host only (no VM counterpart).", switch=False))

    def points(self, cfg: Config, fs_ok=lambda fs: True) -> list[SweepPoint]:
        c = cfg.rocksdb
        return [SweepPoint(b, b) for b in c.benchmarks] if fs_ok(c.filesystem) else []

    def planned_seconds(self, cfg: Config, p: SweepPoint) -> float:
        return 0.0   # db_bench runs a number of keys, not a time: what it takes is learnt as overhead

    def measured_point(self, ctx: RunContext, record: TestbedRecord, s: Setup, p: SweepPoint, env: str) -> Point:
        c = ctx.cfg.rocksdb
        job = DbBenchJob(**c.model_dump(include=set(DbBenchJob.model_fields)))
        mkfs = MKFS[c.filesystem]
        meta = {**self.setup_meta(s, p), "benchmark": p.benchmark, "filesystem": c.filesystem,
                **{f"db_{k}": v for k, v in job.model_dump().items()}}
        common = dict(parse=db_bench.parse, headline=self.headline, meta=meta,
                      raw_suffix=".txt")
        vm = record.vms[0] if record.vms else None
        return sweep.point_in(
            env, f"{s.label}/{p.label}", partial(db_bench.on_host, ctx.host, job, p.benchmark,
                                                 device=record.device_path, mkfs=mkfs),
            (record.disk["backend"], (vm.name,) if vm else (),
             partial(db_bench.in_guest, record.uri, job, p.benchmark, vm, mkfs=mkfs)), **common)

    def summarize(self, ctx: RunContext) -> None:
        rows = db_rows(ctx.store.samples, ctx.cfg.rocksdb.benchmarks)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        text = print_rows(rows, accel, ctx.cfg.rocksdb)
        write_atomic(ctx.store.dir / "summary.txt", text)
        png = db_bars(rows, ctx.store.dir / "rocksdb.png",
                      title=f"rocksdb: db_bench per array, PE and VE (mean ± 95% CI; accel={accel})")
        step(f"plot: {png}")


def db_rows(samples: list[Sample], order: list[str] = ()) -> list[dict]:
    """One row per (setup, benchmark): PE and VE ops/s and µs/op over repeats."""
    return workload_rows(samples, "benchmark", ("ops", "us_per_op"), order=order)


def print_rows(rows: list[dict], accel: str, c: Settings) -> str:
    return workload_table(
        rows, f"rocksdb: db_bench ops/s and µs/op (mean ±95% CI), {c.num} keys of {c.value_size} B, "
              f"{c.filesystem}, accel={accel}",
        "Debian's db_bench is built with assertions on (it says so), so absolute ops/s are low: "
        "compare arrays, and PE with VE, rather than with the study's figures",
        "benchmark", (("ops", "ops/s", 0), ("us_per_op", "µs/op", 2)))


def db_bars(rows: list[dict], path: Path, title: str) -> Path:
    return workload_bars(rows, path, title, (("ops", "ops/s"), ("us_per_op", "µs/op")))


EXPERIMENT = RocksDb()
