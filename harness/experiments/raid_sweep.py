"""The engine behind raid-levels, stripe-size and filesystems: a list of array setups (one member
alone first, as the base), each provisioned by Terraform with its array under a one-VM sweep
fleet, and the same fio points run on the host (PE) and in the VM (VE) on that array.

Each array point also gets the RAID model's expectation (the single member's figure at the same
point, times the level's factor), measured/expected and the software stack overhead.
Runs on any host with md; a host without md gets an error that offers the nested host.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import Field
from rich.table import Table

from harness import hosts
from harness.analysis import raid_model
from harness.common.console import step
from harness.common.exits import StepFailed
from harness.common.files import write_atomic
from harness.common.schema import BlockSize, StudySection
from harness.config.core import Config
from harness.experiments import Flag, RunContext, full_flag
from harness.fleet.testbed import TestbedRecord
from harness.measure import sweep
from harness.measure.declaration import Declared, DeclaredBlock, envs, plan_of
from harness.measure.pipeline import Pipeline, Point
from harness.measure.plan import Plan
from harness.report import plots, tables
from harness.report.plots import plt
from harness.resources import raid
from harness.resources.devices import size_bytes_on
from harness.results.columns import I, S, column
from harness.results.environment import accel_label, tcg_caveat
from harness.results.samples import Sample
from harness.workloads import fio

SINGLE = "single"
GENERIC_ONLY = {"f2fs", "nilfs2"}   # filesystems Debian's cloud kernel lacks
MD_RESERVE_MIB = 8


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("RAID sweeps (raid-levels, stripe-size, filesystems, mysql-raid, rocksdb)", [
    column("setup", S, "the array setup (`single`, `raid5-n4-c512k`, ...)"),
    column("choice", S, "what the report's verdict ranks at this point in place of the backend: the array, or the "
                    "filesystem on it (`raid5-n4-c512k`, `f2fs on single`)"),
    column("workload", S, "what the verdict compares the choices on (the point without its choice: `randread-direct`)"),
    column("raid_level", (I, S), "the level, `single` for one member"),
    column("members", I, "member drives"),
    column("chunk_kib", (I, S), "the chunk (`n/a` for one member or RAID 1)", "KiB"),
    column("filesystem", S, "`none` for the raw device"),
    column("n_measured", I, "a model's expectation: the repeats it is compared with"),
    column("n_base", I, "the base's repeats it is taken from"),
]),)


class RaidSweepSettings(StudySection):
    """Shared by the RAID experiments: the fio points run on each array, on the host and in a VM."""
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["read", "write", "randread", "randwrite"], min_length=1, description="fio access patterns")
    direct: list[bool] = Field([True, False], min_length=1, description="direct (O_DIRECT) and/or buffered I/O")
    bs: BlockSize = Field("128k", description="block size (the studies use 512k)")
    numjobs: int = Field(4, ge=1, le=256, description="fio jobs (the studies use 64)")
    iodepth: int = Field(1, ge=1, le=4096, description="queue depth per job")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    size_mib: int = Field(128, ge=16, description="the region fio works on (host and VM alike); must fit "
                                                  "the smallest array")
    ve: bool = Field(True, description="also measure inside a VM whose disk is the array (PE and VE side by side)")


def raid_flags(section: str) -> tuple[Flag, ...]:
    return (Flag("--runtime", (f"{section}.runtime_s",)), Flag("--ramp", (f"{section}.ramp_s",)), full_flag(section),
            Flag("--pe-only", (f"{section}.ve",), "Measure on the host only (no VM counterpart).", switch=False))


@dataclass(frozen=True)
class Setup:
    """What Terraform provisions: one member alone (level None, the base) or an array."""
    level: int | None
    members: int
    chunk_kib: int

    @property
    def label(self) -> str:
        return SINGLE if self.level is None else f"raid{self.level}-n{self.members}-c{self.chunk_kib}k"


@dataclass(frozen=True)
class SweepPoint:
    label: str                 # e.g. randread-direct, xfs-write-buffered
    job: fio.FioJob
    filesystem: str | None = None   # made on the disk before the job, which then runs on a file

    def size(self, region: int) -> int:
        """fio's data size: the whole region, or a quarter of it as a file (room for the
        filesystem's metadata; btrfs keeps two copies of it on a small device)."""
        return region // 4 if self.filesystem else region


def filesystem_support(host, fs: str) -> str | None:
    """None when the host can make and mount `fs`, else what is missing."""
    tool = raid.MKFS[fs][0]
    if host.run(["sh", "-c", f"command -v {tool}"], check=False, timeout=60).returncode != 0:
        return f"{tool} is not installed on the {host.name} host"
    probe = f"grep -qw {fs} /proc/filesystems || modprobe -q {fs} && grep -qw {fs} /proc/filesystems"
    if host.run(["sh", "-c", probe], check=False, timeout=60).returncode != 0:
        return f"the {host.name} host's kernel has no {fs} support"
    return None


class RaidSweep:
    uses_fleet = False
    name = ""
    section = ""
    Settings = RaidSweepSettings
    headline = "bw"
    flags: tuple[Flag, ...] = ()

    def setups(self, cfg: Config) -> list[Setup]:
        raise NotImplementedError

    def filesystems(self, cfg: Config) -> list[str | None]:
        return [None]

    def guest_image(self, cfg: Config) -> str:
        """The full image where its guests make a filesystem other than ext4 (the main job's image
        has only ext4's tools)."""
        return "full" if set(self.filesystems(cfg)) - {None, "ext4"} else "fio"

    def guest_kernel(self, cfg: Config) -> str:
        """The VM's kernel: the generic one where a filesystem needs it (GENERIC_ONLY), else the config's."""
        return "generic" if set(self.filesystems(cfg)) & GENERIC_ONLY else cfg.fleet.kernel

    def points(self, cfg: Config, fs_ok=lambda fs: True) -> list[SweepPoint]:
        c = getattr(cfg, self.section)
        return [SweepPoint(f"{fs + '-' if fs else ''}{rw}-{'direct' if d else 'buffered'}",
                      fio.FioJob(rw=rw, bs=c.bs, iodepth=c.iodepth, numjobs=c.numjobs, direct=d,
                                   runtime_s=c.runtime_s, ramp_s=c.ramp_s), fs)
                for fs in self.filesystems(cfg) if fs_ok(fs) for rw in c.patterns for d in c.direct]

    def setup_meta(self, s: Setup, p) -> dict:
        """The point's array and what the report's verdict ranks there (the array, or the filesystem
        on it), and on what workload."""
        fs = getattr(p, "filesystem", None)
        return {"group": self.section, "point": p.label, "setup": s.label,
                "choice": f"{fs} on {s.label}" if fs else s.label, "workload": p.label.removeprefix(f"{fs}-"),
                "raid_level": SINGLE if s.level is None else s.level, "members": s.members,
                "chunk_kib": s.chunk_kib if s.level not in (None, 1) else "n/a"}

    def planned_seconds(self, cfg: Config, p) -> float:
        """A point's own tool time, for the plan."""
        return fio.tool_seconds(p.job)

    def declared(self, cfg: Config, s: Setup) -> DeclaredBlock[SweepPoint]:
        """A setup's block: every point on the host, and in the VM unless measured from the host only."""
        return DeclaredBlock(s.label, tuple(Declared(p.label, p, self.planned_seconds(cfg, p),
                                                     envs=envs(getattr(cfg, self.section).ve)) for p in self.points(cfg)))

    def plan(self, cfg: Config) -> Plan:
        """Every setup the config names (one the host's members cannot hold is skipped when the run
        begins), each a block of its points."""
        return plan_of(self.name, [self.declared(cfg, s) for s in self.setups(cfg)], cfg.repeat.count)

    def refusal(self, cfg: Config) -> str | None:
        """Before anything is made: this machine, when it is the host, without md, fails as a host
        that lacks it does when the run reaches it (exit 4)."""
        host = hosts.this_machine_for(cfg.placement)
        if host is not None and (why := raid.md_support(host)):
            raise StepFailed(why)
        return None

    # --- the sweep -------------------------------------------------------------------------
    def measures(self, ctx: RunContext) -> sweep.Sweep:
        cfg, c = ctx.cfg, getattr(ctx.cfg, self.section)
        host = ctx.host
        if reason := raid.md_support(host):
            raise StepFailed(reason)
        members, allow = raid.members_and_allowlist(cfg.raid, host)
        if not members:
            raise StepFailed("no member devices: set raid.members (and list them in raid.allow), or use a "
                             "nested host (host.kind=nested), whose drives are the members")
        runnable, skipped = [], {}
        for s in self.setups(cfg):
            if s.members > len(members):
                skipped[s.label] = f"needs {s.members} member devices, {len(members)} available"
            elif s.level is not None and (why := raid_model.member_count_problem(s.level, s.members)):
                skipped[s.label] = why
            else:
                runnable.append(s)
        for fs in filter(None, self.filesystems(cfg)):
            if why := filesystem_support(host, fs):
                skipped[f"filesystem {fs}"] = why
        points = self.points(cfg, lambda fs: f"filesystem {fs}" not in skipped)
        measurable = {p.label for p in points}
        # what is skipped, said before a size refusal can end the run
        sweep.record_plan(ctx, {"setups": [s.label for s in runnable], "points": [p.label for p in points]}, skipped)
        member_mib = [size_bytes_on(host, m) >> 20 for m in members]
        if too_small := self.too_small(member_mib, runnable, c.size_mib):
            raise StepFailed(f"{too_small}. Fix: lower {self.section}.size_mib, or use larger member devices"
                             f"{f' ({host.drive_size_field})' if host.drive_size_field else ''}")
        # one VM on each setup, none when measured on the host only
        sweep_cfg = sweep.fleet_config(cfg, "rs", vms=1 if c.ve else 0, disk_size_mib=c.size_mib,
                                       kernel=self.guest_kernel(cfg))

        @contextmanager
        def member_checked():
            """One member alone gets the checks an array's members get, when its block comes."""
            if problems := raid.device_refusals(ctx.host, members[:1], allow, cfg.raid.wipe):
                raise StepFailed("; ".join(problems))
            yield {}

        def fleet(s: Setup) -> sweep.Fleet:
            if s.level is None:
                return sweep.Fleet(sweep_cfg, device=members[0])
            return sweep.Fleet(sweep_cfg, raid=raid.RaidPlan(
                name=f"{sweep_cfg.prefix}-raid", level=s.level, members=members[:s.members], chunk_kib=s.chunk_kib,
                allow=allow, wipe=cfg.raid.wipe, wait_resync=cfg.raid.wait_resync))
        blocks = [sweep.SweepBlock(
            s.label, fleet=fleet(s), **({"place": member_checked} if s.level is None else {}),
            points=lambda record, _tb, s=s: self.declared(cfg, s).made(
                lambda d, env: self.measured_point(ctx, record, s, d.what, env), only=lambda d: d.label in measurable),
            after=lambda pipeline, block, s=s: self.expectations(ctx, pipeline, s, block)) for s in runnable]
        return sweep.Sweep(sweep_cfg, blocks, "the sweep fleet and its array")

    @staticmethod
    def too_small(member_mib: list[int], setups: list[Setup], size_mib: int) -> str | None:
        """Which setup cannot hold the region, found before anything is provisioned, or None. md
        keeps its superblock and data offset on each member: MD_RESERVE_MIB leaves room for them."""
        for s in setups:
            member = min(member_mib[:s.members])
            usable = member if s.level is None else int((member - MD_RESERVE_MIB) * raid_model.data_members(s.level, s.members))
            if usable < size_mib:
                return f"{s.label} holds about {usable} MiB (members of {member} MiB), less than the {size_mib} MiB region"
        return None


    def measured_point(self, ctx: RunContext, record: TestbedRecord, s: Setup, p: SweepPoint, env: str) -> Point:
        c = getattr(ctx.cfg, self.section)
        extra = fio.fs_env(raid.MKFS[p.filesystem] if p.filesystem else None)
        meta = {**self.setup_meta(s, p), "filesystem": p.filesystem or "none", **fio.job_meta(p.job),
                "data_size_bytes": p.size(c.size_mib << 20)}
        common = dict(parse=fio.parse, headline=self.headline, meta=meta)
        vms = record.vms[:1]
        return sweep.point_in(
            env, f"{s.label}/{p.label}", partial(fio.on_host, ctx.host, p.job, device=record.device_path,
                                                 slots=[(0, p.size(c.size_mib << 20))], extra_env=extra),
            (record.disk["backend"], tuple(vm.name for vm in vms),
             partial(fio.in_guests, record.uri, p.job, vms, size=p.size(vms[0].slice_bytes) if vms else 0,
                     extra_env=extra)), **common)

    def expectations(self, ctx: RunContext, pipeline: Pipeline, s: Setup, block: list[Point]) -> None:
        """The RAID model against the single member measured at the same point (and filesystem) in
        the same environment: expected bandwidth, measured/expected and the stack overhead."""
        if s.level is None:
            return
        derived = []
        for mp in block:
            measured, base = pipeline.values(mp.id, "bw"), pipeline.values(f"{SINGLE}/{mp.meta['point']}/{mp.env}", "bw")
            if not measured or not base:
                continue
            bw = sum(measured) / len(measured)
            expected = raid_model.expected(s.level, s.members, mp.meta["rw"], sum(base) / len(base))
            meta = {**pipeline.derived_meta(mp), "n_measured": len(measured), "n_base": len(base)}
            derived += [Sample("expected_bw", expected, "KiB/s", meta),
                        Sample("measured_expected", bw / expected, "ratio", meta),
                        Sample("stack_overhead", raid_model.stack_overhead(bw, expected), "ratio", meta)]
        if derived:
            ctx.store.add(derived)

    def summarize(self, ctx: RunContext) -> None:
        rows = raid_rows(ctx.store.samples)
        if not rows:
            return
        accel = accel_label(ctx.environment)
        accel += tcg_caveat(accel)
        text = print_raid(rows, title=self.name, accel=accel)
        write_atomic(ctx.store.dir / "summary.txt", text)
        png = raid_bars(rows, ctx.store.dir / f"{self.name}.png",
                        title=f"{self.name}: bandwidth, PE and VE per array (accel={accel})")
        step(f"plot: {png}")


def workload_settings_problem(c, section: str) -> str | None:
    """What a database workload's settings (levels, members, filesystem, size_mib) cannot do, or
    None: no level buildable from the members, or a disk too small for the filesystem."""
    if why := raid_model.no_level_buildable(c.levels, c.members):
        return why
    if why := raid.mkfs_size_problem(c.filesystem, c.size_mib, f"{section}.size_mib"):
        return f"{why}, or choose another filesystem"
    return None


class WorkloadSweep(RaidSweep):
    """A database workload on each array and on one member alone (rocksdb, mysql-raid): its section
    has levels, members and the one filesystem the database lives on. Its figures are the
    workload's own: the RAID model, which speaks of device bandwidth, has no expectation for them."""

    def setups(self, cfg: Config) -> list[Setup]:
        c = getattr(cfg, self.section)
        return [Setup(None, 1, 0)] + [Setup(level, c.members, cfg.raid.chunk_kib) for level in c.levels]

    def filesystems(self, cfg: Config) -> list[str | None]:
        return [getattr(cfg, self.section).filesystem]

    def guest_image(self, cfg: Config) -> str:
        """The full image: the database and its benchmark are in it."""
        return "full"

    def expectations(self, ctx: RunContext, pipeline: Pipeline, s: Setup, block: list[Point]) -> None:
        """None (see the class)."""


# --- its summary: rows over repeats, the table, the plot --------------------
def raid_rows(samples: list[Sample]) -> list[dict]:
    """One row per (array setup, point): PE and VE bandwidth with the RAID model's expectation,
    measured/expected and the stack overhead (means over repeats)."""
    rows: dict[tuple, dict] = {}
    for s in samples:
        m = s.metadata
        if "setup" not in m:
            continue
        row = rows.setdefault((m["setup"], m["point"]), {"setup": m["setup"], "point": m["point"], "errors": []})
        if s.status != "ok":
            row["errors"].append(f"{m['env']}: {s.error}")
            row[f"{m['env']}_failed"] = True
            continue
        if s.metric in ("bw", "expected_bw", "measured_expected", "stack_overhead"):
            row.setdefault(f"{m['env']}_{s.metric}", []).append(s.value)
    return [tables.means(r) for r in rows.values()]


def print_raid(rows: list[dict], title: str, accel: str) -> str:
    table = Table(title=f"{title}: bandwidth (MiB/s), measured against the RAID model, accel={accel}")
    for col in ("array", "point", "PE", "PE expected", "PE meas/exp", "PE overhead",
                "VE", "VE expected", "VE meas/exp", "VE overhead", "VE/PE"):
        table.add_column(col, justify="left" if col in ("array", "point") else "right", no_wrap=True)

    def mib(r, key):
        return "-" if r.get(key) is None else f"{r[key] / 1024:,.1f}"

    def ratio(r, key, pct=False):
        return "-" if r.get(key) is None else (f"{r[key]:+.0%}" if pct else f"{r[key]:.2f}")
    for r in rows:
        ve_pe = (f"{r['virtual_bw'] / r['physical_bw']:.2f}" if r.get("virtual_bw") and r.get("physical_bw") else "-")
        table.add_row(r["setup"], r["point"],
                      tables.cell(r, "physical_bw", 0) if r.get("physical_bw") is None else mib(r, "physical_bw"),
                      mib(r, "physical_expected_bw"), ratio(r, "physical_measured_expected"),
                      ratio(r, "physical_stack_overhead", pct=True).lstrip("+"),
                      tables.cell(r, "virtual_bw", 0) if r.get("virtual_bw") is None else mib(r, "virtual_bw"),
                      mib(r, "virtual_expected_bw"), ratio(r, "virtual_measured_expected"),
                      ratio(r, "virtual_stack_overhead", pct=True).lstrip("+"), ve_pe)
    return tables.render([table], [(f"{r['setup']} {r['point']}", e) for r in rows for e in r["errors"]], width=150)


def raid_bars(rows: list[dict], path: Path, title: str) -> Path:
    """Per point, measured/expected for each array, PE and VE side by side (1.0 = the RAID model)."""
    points = list(dict.fromkeys(r["point"] for r in rows))
    setups = list(dict.fromkeys(r["setup"] for r in rows if r["setup"] != "single"))
    fig, axes = plt.subplots(1, max(1, len(points)), figsize=(max(6, 3.2 * len(points)), 4.2), squeeze=False,
                             sharey=True)
    for ax, point in zip(axes[0], points):
        by_setup = {r["setup"]: r for r in rows if r["point"] == point}
        xs = range(len(setups))
        for i, (env, color) in enumerate((("physical", "black"), ("virtual", "tab:blue"))):
            ys = [by_setup.get(s, {}).get(f"{env}_measured_expected") or 0 for s in setups]
            ax.bar([x + (i - 0.5) * 0.4 for x in xs], ys, 0.4, color=color, label="PE" if i == 0 else "VE")
        ax.axhline(1.0, color="gray", ls="--", lw=1)
        ax.set_xticks(list(xs), setups, rotation=35, ha="right", fontsize=7)
        ax.set_title(point, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("measured / expected (RAID model)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    return plots.save(fig, path)


# --- a database workload's summary on the sweep (rocksdb, mysql-raid): a throughput and a latency per point
def workload_rows(samples: list[Sample], by: str, metrics: tuple[str, str], scope: str | None = None,
                  order: list[str] = ()) -> list[dict]:
    """One row per (setup, point named by the metadata key `by`): PE and VE means over repeats of
    the two metrics (throughput first: its noisy points are flagged). `scope` keeps the samples of
    one scope (e.g. a point's aggregate over its VMs). Setups come in the order they were measured,
    and points in `order` (the config's), not in the shuffled order of the repeats."""
    rows: dict[tuple, dict] = {}
    unquiet: dict[tuple, list[str]] = {}
    threshold = 0.10
    for s in samples:
        m = s.metadata
        if by not in m or not tables.measured(s) or (scope and m.get("scope", scope) != scope):
            continue
        key = (m["setup"], m[by])
        row = rows.setdefault(key, {"setup": m["setup"], "point": m[by], "errors": []})
        threshold = m.get("noisy_cv_threshold", threshold)
        if s.status != "ok":
            if f"{m['env']}: {s.error}" not in row["errors"]:
                row["errors"].append(f"{m['env']}: {s.error}")
            row[f"{m['env']}_failed"] = True
        elif s.metric in metrics:
            row.setdefault(f"{m['env']}_{s.metric}", []).append(s.value)
            if s.metric == metrics[0]:
                unquiet.setdefault((key, m["env"]), []).extend(tables.unquiet_reasons(m))
    for (key, env), reasons in unquiet.items():
        tables.flag_noisy(rows[key], f"{env}_{metrics[0]}", reasons, threshold)
    setups = list(dict.fromkeys(setup for setup, _ in rows))
    rank = {point: i for i, point in enumerate(order)}
    ordered = sorted(rows, key=lambda k: (setups.index(k[0]), rank.get(k[1], len(rank))))
    return [tables.means(rows[k]) for k in ordered]


def workload_table(rows: list[dict], title: str, caption: str, point: str,
                   metrics: tuple[tuple[str, str, int], tuple[str, str, int]]) -> str:
    """PE and VE side by side per (array, point): throughput, VE/PE, latency; `metrics` gives each
    metric's (key, column unit, digits)."""
    (tput, tput_unit, tput_digits), (lat, lat_unit, lat_digits) = metrics
    table = Table(title=title, caption=caption)
    for col in ("array", point, f"PE {tput_unit}", f"VE {tput_unit}", "VE/PE", f"PE {lat_unit}", f"VE {lat_unit}"):
        table.add_column(col, justify="left" if col in ("array", point) else "right", no_wrap=True)
    for r in rows:
        pe, ve = r.get(f"physical_{tput}"), r.get(f"virtual_{tput}")
        table.add_row(r["setup"], r["point"], tables.cell(r, f"physical_{tput}", tput_digits),
                      tables.cell(r, f"virtual_{tput}", tput_digits), f"{ve / pe:.2f}" if ve and pe else "-",
                      tables.cell(r, f"physical_{lat}", lat_digits), tables.cell(r, f"virtual_{lat}", lat_digits))
    return tables.render([table], [(f"{r['setup']} {r['point']}", e) for r in rows for e in r["errors"]],
                         width=150, notes=tables.noisy_notes([(f"{r['setup']} {r['point']}", r) for r in rows], tput))


def _env_bars(ax, lat, rows: list[dict], i: int, env: str, metrics: tuple[tuple[str, str], tuple[str, str]]) -> None:
    """One environment's throughput bars on `ax` and its latency markers on `lat`, beside the other's."""
    (tput, tput_label), (lat_key, lat_label) = metrics
    color, label = (("black", "PE"), ("tab:blue", "VE"))[i]
    x = [v + (i - 0.5) * 0.38 for v in range(len(rows))]
    ax.bar(x, [r.get(f"{env}_{tput}") or 0 for r in rows], 0.38, color=color, alpha=0.8,
           label=f"{label} {tput_label}", yerr=[plots.ci(r, f"{env}_{tput}") for r in rows], capsize=3, ecolor="gray")
    ys = [r.get(f"{env}_{lat_key}") for r in rows]
    lat.errorbar([a for a, y in zip(x, ys) if y], [y for y in ys if y], fmt="D", color="tab:red" if i else "darkred",
                 ms=4, capsize=2, label=f"{label} {lat_label}",
                 yerr=[plots.ci(r, f"{env}_{lat_key}") for r, y in zip(rows, ys) if y])


def workload_bars(rows: list[dict], path: Path, title: str, metrics: tuple[tuple[str, str], tuple[str, str]]) -> Path:
    """The RAID-on-NVMe study's figure 6 layout: a panel per array, throughput bars per point (PE
    and VE), latency as markers on a second axis; whiskers are 95% CIs. `metrics`: (key, label) of
    the throughput and of the latency."""
    (tput, tput_label), (lat_key, lat_label) = metrics
    setups = list(dict.fromkeys(r["setup"] for r in rows))
    fig, axes = plt.subplots(1, len(setups), figsize=(max(6, 3.6 * len(setups)), 4.2), squeeze=False, sharey=True)
    top_lat = 1.15 * max((r.get(f"{env}_{lat_key}") or 0) + plots.ci(r, f"{env}_{lat_key}")
                         for r in rows for env in ("physical", "virtual")) or 1
    for n, (ax, setup) in enumerate(zip(axes[0], setups)):
        mine = [r for r in rows if r["setup"] == setup]
        xs = range(len(mine))
        lat = ax.twinx()
        for i, env in enumerate(("physical", "virtual")):
            _env_bars(ax, lat, mine, i, env, metrics)
        ax.set_xticks(list(xs), [r["point"] for r in mine], rotation=30, ha="right", fontsize=8)
        ax.set_title(setup, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        lat.set_ylim(0, top_lat)   # one latency scale over every panel, labelled on the last
        if n < len(setups) - 1:
            lat.tick_params(labelright=False)
    axes[0][0].set_ylim(bottom=0)   # shared by every panel; set once all are drawn, so the tops still fit
    axes[0][0].set_ylabel(tput_label)
    lat.set_ylabel(lat_label)
    handles = [h for a in (axes[0][0], lat) for h in a.get_legend_handles_labels()[0]]
    labels = [lb for a in (axes[0][0], lat) for lb in a.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, fontsize=7, loc="upper center", ncol=4, bbox_to_anchor=(0.5, -0.06))  # under the labels
    fig.suptitle(title, fontsize=9)
    return plots.save(fig, path)
