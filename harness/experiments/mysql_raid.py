"""`harness run mysql-raid`: sysbench OLTP on MariaDB on RAID 0, 1, 5, 6 and 10 arrays and on one
member alone, PE and VE: the RAID-on-NVMe study's TPC-C figure, with sysbench standing in for TPC-C
(no TPC-C kit ships in Debian). Config section [mysql_raid]; member devices from [raid]. Runs on
the RAID sweep's plumbing (arrays through Terraform, a one-VM fleet on each, the nested host where
this host has no md), with the mysql experiment's runner."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import RaidLevel, StudySection
from harness.config.core import Config
from harness.experiments import Flag, RunContext, full_flag
from harness.experiments.mysql import HOST_MOUNT_DIR
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
from harness.results.columns import S, column
from harness.results.environment import accel_label
from harness.results.samples import Sample
from harness.workloads import sysbench
from harness.workloads.sysbench import DbPoint

STAND_IN = ("sysbench OLTP stands in for the study's TPC-C (no TPC-C kit ships in Debian): "
            "transactions/s of sysbench's mix, not tpmC")


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("mysql-raid", [
    column("stands_in_for", S, "mysql-raid: the benchmark of the reproduced study it stands in for (TPC-C)"),
]),)


class Settings(StudySection):
    FULL = {"levels": [0, 1, 5, 6, 10], "runtime_s": 30}
    levels: list[RaidLevel] = Field([5, 10], min_length=1,
                                    description="RAID levels (with one member alone as the base; full: the study's "
                                                "0, 1, 5, 6, 10)")
    members: int = Field(4, ge=2, le=64, description="member devices per array")
    tests: list[Literal["oltp_read_only", "oltp_write_only", "oltp_read_write"]] = Field(
        ["oltp_read_write"], min_length=1, description="sysbench OLTP tests, each a point (TPC-C is a read-write mix)")
    threads: int = Field(16, ge=1, le=64, description="sysbench client threads")
    tables: int = Field(4, ge=1, le=1024, description="sysbench tables")
    table_size: int = Field(10000, ge=100, description="rows per table")
    runtime_s: int = Field(10, ge=1, le=86400, description="sysbench run seconds per point (full: 30)")
    page_size: Literal["4k", "8k", "16k", "32k", "64k"] = Field("16k", description="innodb_page_size")
    buffer_pool_fraction: float = Field(0.1, ge=0.03, le=0.5,
                                        description="InnoDB buffer pool as a fraction of the data (0.03-0.5)")
    filesystem: Literal["ext4", "xfs"] = Field("ext4", description="filesystem the database lives on")
    size_mib: int = Field(128, ge=16, description="the disk each database lives on (host and VM alike); must fit "
                                                  "the data and the smallest array")
    ve: bool = Field(True, description="also measure inside a VM whose disk is the array (PE and VE side by side)")

    @model_validator(mode="after")
    def _fits(self) -> "Settings":
        if why := workload_settings_problem(self, "mysql_raid"):
            raise ValueError(why)
        need_mib = -(-int(self.point(self.tests[0]).env("")["DB_NEED_BYTES"]) >> 20)
        if need_mib > self.size_mib * 0.9:   # the filesystem's own metadata takes the rest
            raise ValueError(f"mysql_raid: {self.tables} tables of {self.table_size} rows need about {need_mib} MiB "
                             f"with the redo log, more than 90% of size_mib={self.size_mib}; lower tables or "
                             "table_size, or raise size_mib")
        return self

    def point(self, test: str) -> DbPoint:
        return DbPoint(test=test, threads=self.threads, page_size=self.page_size,
                       buffer_pool_fraction=self.buffer_pool_fraction, key_block_size=0, tables=self.tables,
                       table_size=self.table_size, runtime_s=self.runtime_s, filesystem=self.filesystem)


@dataclass(frozen=True)
class SweepPoint:
    label: str          # the sysbench test
    db: DbPoint


class MysqlRaid(WorkloadSweep):
    question = "sysbench OLTP on each RAID level, PE and VE"
    name = "mysql-raid"
    section = "mysql_raid"
    Settings = Settings
    headline = "aggregate_tps"
    flags = (Flag("--tests", ("mysql_raid.tests",), "Comma-separated sysbench tests, e.g. oltp_read_only,oltp_read_write."),
             Flag("--threads", ("mysql_raid.threads",)), Flag("--runtime", ("mysql_raid.runtime_s",)),
             Flag("--pe-only", ("mysql_raid.ve",), "Measure on the host only (no VM counterpart).", switch=False),
             full_flag("mysql_raid"))

    def host_packages(self, cfg) -> tuple[str, ...]:
        return sysbench.HOST_PACKAGES

    def points(self, cfg: Config, fs_ok=lambda fs: True) -> list[SweepPoint]:
        c = cfg.mysql_raid
        return [SweepPoint(t, c.point(t)) for t in c.tests] if fs_ok(c.filesystem) else []

    def planned_seconds(self, cfg: Config, p: SweepPoint) -> float:
        return p.db.runtime_s

    def measured_point(self, ctx: RunContext, record: TestbedRecord, s: Setup, p: SweepPoint, env: str) -> Point:
        meta = {**self.setup_meta(s, p), "vm_count": 1, "stands_in_for": "TPC-C", **p.db.metadata()}
        common = dict(parse=sysbench.parse, aggregate=sysbench.aggregate, headline=self.headline, meta=meta,
                      raw_suffix=".sysbench.txt", on_failure=sysbench.failure_files)
        # the host's slot is the region the VM's disk is (offset 0, size_mib): PE and VE use the same blocks
        slot = {"device": record.device_path, "offset": 0, "size": ctx.cfg.mysql_raid.size_mib << 20,
                "mount": f"{HOST_MOUNT_DIR}/{record.prefix}-db0"}
        vms = record.vms[:1]
        return sweep.point_in(env, f"{s.label}/{p.label}", partial(sysbench.on_host, ctx.host, p.db, [slot]),
                              (record.disk["backend"], tuple(vm.name for vm in vms),
                               partial(sysbench.in_guests, record.uri, p.db, vms)), **common)

    def summarize(self, ctx: RunContext) -> None:
        rows = tps_rows(ctx.store.samples, ctx.cfg.mysql_raid.tests)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        write_atomic(ctx.store.dir / "summary.txt", print_tps(rows, accel, ctx.cfg.mysql_raid))
        png = tps_bars(rows, ctx.store.dir / "mysql-raid.png",
                       title=f"mysql-raid: sysbench TPS per array, PE and VE (mean ± 95% CI; accel={accel})")
        step(f"plot: {png}")


def tps_rows(samples: list[Sample], order: list[str] = ()) -> list[dict]:
    """One row per (setup, test): PE and VE transactions/s and p95 latency over repeats."""
    return workload_rows(samples, "db_test", ("aggregate_tps", "lat_p95"), scope="aggregate", order=order)


def print_tps(rows: list[dict], accel: str, c: Settings) -> str:
    return workload_table(
        rows, f"mysql-raid: sysbench TPS and p95 latency (mean ±95% CI), {c.threads} threads, {c.tables}x"
              f"{c.table_size} rows, {c.filesystem}, accel={accel}",
        STAND_IN, "test", (("aggregate_tps", "TPS", 1), ("lat_p95", "p95 ms", 2)))


def tps_bars(rows: list[dict], path: Path, title: str) -> Path:
    return workload_bars(rows, path, title, (("aggregate_tps", "TPS"), ("lat_p95", "p95 ms")))


EXPERIMENT = MysqlRaid()
