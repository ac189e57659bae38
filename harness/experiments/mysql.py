"""`harness run mysql`: sysbench OLTP on MariaDB (O_DIRECT, a small buffer pool), physical against
virtual, one VM against many, sweeping one axis at a time around a base point. Config section [mysql]."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field
from rich.table import Table

from harness import backends
from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import Section, VmCounts, each
from harness.config.core import Config
from harness.experiments import Flag, RunContext
from harness.measure import sweep
from harness.measure.declaration import Declared, DeclaredBlock, plan_of
from harness.measure.pipeline import Point
from harness.measure.plan import Plan
from harness.report import plots, tables
from harness.report.plots import plt
from harness.results.environment import accel_label, tcg_caveat
from harness.results.samples import Sample
from harness.workloads import sysbench
from harness.workloads.sysbench import DbPoint


class Settings(Section):
    """Sweeps one axis at a time around the base point (the first value of each list)."""
    tests: list[Literal["oltp_read_only", "oltp_write_only", "oltp_read_write"]] = Field(
        ["oltp_read_only", "oltp_read_write"], min_length=1, description="sysbench OLTP tests")
    threads: Annotated[list[int], each(lambda t: 1 <= t <= 64, "client threads must be between 1 and 64")] = Field(
        [16], min_length=1, description="sysbench client threads (1-64)")
    page_sizes: list[Literal["4k", "8k", "16k", "32k", "64k"]] = Field(["16k"], min_length=1,
                                                                        description="innodb_page_size values")
    buffer_pool_fractions: Annotated[list[float], each(
        lambda f: 0.03 <= f <= 0.5, "buffer pool fractions must be between 0.03 and 0.5 of the data size")] = Field(
        [0.1], min_length=1, description="InnoDB buffer pool as a fraction of the data (0.03-0.5)")
    compression: list[Literal[0, 4, 8]] = Field([0], min_length=1,
                                                description="ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE (0 = none)")
    vm_counts: VmCounts = Field([1], min_length=1, description="VMs sharing the device (aggregate TPS)")
    tables: int = Field(4, ge=1, le=1024, description="sysbench tables")
    table_size: int = Field(10000, ge=100, description="rows per table")
    runtime_s: int = Field(30, ge=1, le=86400, description="sysbench run seconds per point")
    filesystem: Literal["ext4", "xfs"] = Field("ext4", description="filesystem made on the data disk")


@dataclass(frozen=True)
class Planned:
    axis: str           # the swept axis this point belongs to ("base" for the base point)
    point: DbPoint
    vm_count: int

    @property
    def name(self) -> str:
        return f"{self.point.label()}-n{self.vm_count}"


# Where a host slot's database is mounted, on whichever host: tmpfs-backed, so nothing outlives a
# reboot, and named with the fleet prefix, so that `gc` finds a mount or server a killed run left.
HOST_MOUNT_DIR = "/run"

AXES = {"tests": "test", "threads": "threads", "page_sizes": "page_size",
        "buffer_pool_fractions": "buffer_pool_fraction", "compression": "key_block_size"}


def plan(cfg: Config, fleet_size: int) -> tuple[list[Planned], dict[str, str]]:
    c = cfg.mysql
    base = DbPoint(test=c.tests[0], threads=c.threads[0], page_size=c.page_sizes[0],
                   buffer_pool_fraction=c.buffer_pool_fractions[0], key_block_size=c.compression[0],
                   tables=c.tables, table_size=c.table_size, runtime_s=c.runtime_s, filesystem=c.filesystem)
    n0 = c.vm_counts[0]
    planned = [Planned("base", base, n0)]
    for axis, field in AXES.items():
        planned += [Planned(axis, replace(base, **{field: v}), n0) for v in getattr(c, axis)[1:]]
    planned += [Planned("vm_counts", base, n) for n in c.vm_counts[1:]]
    skipped = {p.name: f"needs {p.vm_count} VMs, the fleet has {fleet_size} (raise fleet.vms)"
               for p in planned if p.vm_count > fleet_size}
    return [p for p in planned if p.vm_count <= fleet_size], skipped


class Mysql:
    question = "sysbench OLTP on MariaDB, physical against virtual"
    name = "mysql"
    section = "mysql"
    Settings = Settings
    headline = "aggregate_tps"
    flags = (Flag("--tests", ("mysql.tests",), "Comma-separated sysbench tests, e.g. oltp_read_only,oltp_read_write."),
             Flag("--threads", ("mysql.threads",), "Comma-separated client thread counts."),
             Flag("--vm-counts", ("mysql.vm_counts",), "Comma-separated VM counts."),
             Flag("--runtime", ("mysql.runtime_s",)))
    uses_fleet = True

    def guest_image(self, cfg: Config) -> str:
        """The full image: MariaDB and sysbench are in it."""
        return "full"

    def host_packages(self, cfg: Config) -> tuple[str, ...]:
        return sysbench.HOST_PACKAGES

    def fleet_size(self, cfg: Config) -> int:
        return max(cfg.mysql.vm_counts)

    def declared(self, cfg: Config, fleet_size: int) -> tuple[DeclaredBlock[Planned], dict[str, str]]:
        """One block, the fleet (grown to the largest VM count): each point on the host and in the
        VMs; and the points the fleet is too small for, with why."""
        planned, skipped = plan(cfg, fleet_size)
        return DeclaredBlock(f"the fleet ({cfg.disk.backend})", tuple(
            Declared(p.name, p, p.point.runtime_s, p.vm_count) for p in planned)), skipped

    def plan(self, cfg: Config) -> Plan:
        block, skipped = self.declared(cfg, self.fleet_size(cfg))
        return plan_of(self.name, [block], cfg.repeat.count, skipped)

    def points(self, ctx: RunContext, block: DeclaredBlock[Planned]) -> list[Point]:
        tb = ctx.testbed

        def at(d: Declared[Planned], env: str) -> Point:
            p, vms = d.what, tb.vms[:d.what.vm_count]
            meta = {"axis": p.axis, "point": p.name, "vm_count": p.vm_count, **p.point.metadata()}
            slots = [{"device": tb.device_path, "offset": vm.slice_offset, "size": vm.slice_bytes,
                      "mount": f"{HOST_MOUNT_DIR}/{tb.prefix}-db{i}"} for i, vm in enumerate(vms)]
            return sweep.point_in(env, p.name, partial(sysbench.on_host, ctx.host, p.point, slots),
                                  (tb.disk["backend"], tuple(vm.name for vm in vms),
                                   partial(sysbench.in_guests, tb.uri, p.point, vms)),
                                  parse=sysbench.parse, aggregate=sysbench.aggregate, headline=self.headline, meta=meta,
                                  raw_suffix=".sysbench.txt", on_failure=sysbench.failure_files)
        return block.made(at)

    def refusal(self, cfg: Config) -> str | None:
        """Before anything is made: the physical baseline mounts a filesystem on a slice of the
        fleet's block device on the host, which a fleet of Ceph images has not."""
        if not backends.get(cfg.disk.backend).host_slices:
            return (f"mysql needs a block device on the host for its physical baseline, and the {cfg.disk.backend} "
                    "backend's disks are not slices of one (Ceph images). Fix: --set disk.backend=virtio-blk (or another "
                    "backend `harness backend list` shows)")
        return None

    def measures(self, ctx: RunContext) -> sweep.OnFleet:
        block, skipped = self.declared(ctx.cfg, len(ctx.testbed.vms))
        return sweep.OnFleet(self.points(ctx, block), [d.label for d in block.points], skipped)

    def summarize(self, ctx: RunContext) -> None:
        rows = mysql_rows(ctx.store.samples)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        for axis in sorted({r["axis"] for r in rows} - {"base"}):
            png = mysql_axis(rows, axis, ctx.store.dir / f"mysql-{axis}.png",
                             title=f"sysbench TPS by {axis} (accel={accel}"
                                   f"{tcg_caveat(accel)})")
            step(f"plot: {png}")
        write_atomic(ctx.store.dir / "summary.txt", print_mysql(rows, accel))


# --- its summary: rows over repeats, the table, the plot --------------------
MYSQL_AXIS_KEYS = {"tests": "db_test", "threads": "db_threads", "page_sizes": "db_page_size",
                   "buffer_pool_fractions": "db_buffer_pool_fraction", "compression": "db_key_block_size",
                   "vm_counts": "vm_count"}


def mysql_rows(samples: list[Sample]) -> list[dict]:
    """One row per point: physical and virtual aggregates side by side, with the axis values."""
    rows: dict[str, dict] = {}
    for s in samples:
        m = s.metadata
        if m.get("experiment") != "mysql" or m.get("scope") != "aggregate":
            continue
        row = rows.setdefault(m["point"], {"point": m["point"], "axis": m["axis"], "errors": [],
                                           **{axis: m[key] for axis, key in MYSQL_AXIS_KEYS.items()}})
        if s.status != "ok":
            row["errors"].append(f"{m['env']}: {s.error}")
            row[f"{m['env']}_failed"] = True
            continue
        row.setdefault(f"{m['env']}_{s.metric}", []).append(s.value)
    return [tables.means(r) for r in rows.values()]


def print_mysql(rows: list[dict], accel: str) -> str:
    table = Table(title=f"mysql: sysbench aggregate TPS, physical against virtual (accel={accel}"
                        f"{tcg_caveat(accel)})")
    for col in ("point", "axis", "VMs", "phys TPS", "virt TPS", "virt/phys", "phys p95 ms", "virt p95 ms"):
        table.add_column(col, justify="left" if col in ("point", "axis") else "right")
    for r in rows:
        table.add_row(r["point"], r["axis"], str(r["vm_counts"]), tables.cell(r, "physical_aggregate_tps", 1),
                      tables.cell(r, "virtual_aggregate_tps", 1), tables.cell(r, "virtual_ve_pe_ratio", 3),
                      tables.cell(r, "physical_lat_p95", 2), tables.cell(r, "virtual_lat_p95", 2))
    return tables.render([table], [(r["point"], e) for r in rows for e in r["errors"]])


def mysql_axis(rows: list[dict], axis: str, path: Path, title: str) -> Path:
    """Aggregate TPS along one swept axis (the base point included), physical and virtual."""
    series = [r for r in rows if r["axis"] in (axis, "base")]
    labels = [str(r[axis]) for r in series]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = range(len(series))
    width = 0.38
    for i, (env, color) in enumerate((("physical", "black"), ("virtual", None))):
        ys = [r.get(f"{env}_aggregate_tps") or 0 for r in series]
        ax.bar([x + (i - 0.5) * width for x in xs], ys, width, label=env, color=color)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel(axis)
    ax.set_ylabel("aggregate TPS")
    values = [r.get(f"{e}_aggregate_tps") for r in series for e in ("physical", "virtual")]
    values = [v for v in values if v]
    if values and max(values) > 20 * min(values):
        ax.set_yscale("log")  # PE and VE can be orders apart (TCG): keep both readable
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    plots.title(ax, title)
    return plots.save(fig, path)


EXPERIMENT = Mysql()
