"""`harness run device-profile`: the Optane micro-benchmark study's two views of a device, for
several devices side by side, from the host (PE) and from a VM whose disk is the device (VE).

- Sequential bandwidth across the address space: the profiled span is cut into zones
  (`zone_mib`), and each zone is read and written on its own, so bandwidth can be plotted against
  the offset (an HDD's outer tracks are faster than its inner ones; flash is flat).
- 4 KiB random read and write at QD1, a fixed count of requests (`random_ios`; the study: 100,000)
  per run. IOPS is the mean over repeats with its 95% CI; each run's own CI over its requests
  (from fio's mean and standard deviation of request latency) is kept beside it.

Devices (`devices`), on this machine: "default" (the fleet's kind of disk: a prefilled file in the
pool), "tmpfs" (a file in /dev/shm behind a loop device: RAM), "brd" (the kernel's RAM disk, where
it has one). On any host: "drive" (a nested host's first emulated drive, or the first of
`raid.members`), "md" (a RAID 0 array over the member devices, built through Terraform as the RAID
experiments build theirs), or the path of a block device on the allowlist (`raid.allow`).
Each device gets a one-VM sweep fleet whose data disk is the whole profiled span."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator
from rich.table import Table

from harness.common.console import step, warn
from harness.common.files import write_atomic
from harness.common.schema import BlockSize, Section, each
from harness.config.core import Config
from harness.experiments import Flag, RunContext
from harness.fleet.testbed import TestbedRecord
from harness.measure import sweep
from harness.measure.declaration import Declared, DeclaredBlock, envs, plan_of
from harness.measure.pipeline import PHYSICAL, Point
from harness.measure.plan import Plan
from harness.report import plots, tables
from harness.report.plots import plt
from harness.resources import raid
from harness.results.columns import I, S, column
from harness.results.environment import accel_label, tcg_caveat
from harness.workloads import fio, fio_output

DEVICES = ("default", "tmpfs", "brd", "drive", "md")
ELSEWHERE = "profile drive, md or an allowlisted device there"
# made by the engine for their block on this machine (brd: loaded with one disk of the span's size, unloaded after)
SCRATCH = {"tmpfs": sweep.Scratch("tmpfs", "tmpfs", elsewhere=ELSEWHERE),
           "brd": sweep.Scratch("brd", "brd", elsewhere=ELSEWHERE)}
Z_95 = 1.959964   # a normal quantile: the request counts are large


# The columns its samples add to the core's (harness/results/columns.py)
COLUMNS = (("device-profile", [
    column("profiled_device", S, "the device"),
    column("profile", S, "`zone` or `random`"),
    column("zone", I, "the zone"),
    column("zone_offset_mib", I, "its offset", "MiB"),
]),)


class Settings(Section):
    devices: Annotated[list[str], each(lambda d: d in DEVICES or d.startswith("/dev/"),
                                       f"every device must be one of {', '.join(DEVICES)}, or a /dev/ path on raid.allow")] = \
        Field(["default", "tmpfs"], min_length=1,
              description=f"devices to profile side by side ({', '.join(DEVICES)}, or an allowlisted /dev/ path)")
    size_mib: int = Field(256, ge=16, description="the profiled span of each device (the VM's whole data disk)")
    zone_mib: int = Field(64, ge=4, description="each zone's size: bandwidth is measured zone by zone (the study: 128 MB)")
    seq_bs: BlockSize = Field("1m", description="block size of the sequential zone reads and writes")
    seq_runtime_s: int = Field(2, ge=1, le=600, description="seconds per zone and direction")
    random_ios: int = Field(2000, ge=100, le=10_000_000, description="4 KiB requests per random run (the study: 100,000)")
    random_max_s: int = Field(120, ge=5, description="a random run stops here even if its requests are not all done")
    ve: bool = Field(True, description="also measure inside a VM whose disk is the device (PE and VE side by side)")

    @model_validator(mode="after")
    def _zones_fit(self) -> "Settings":
        if self.size_mib % self.zone_mib:
            raise ValueError(f"device_profile.size_mib={self.size_mib} is not a whole number of zones of "
                             f"device_profile.zone_mib={self.zone_mib}; make it a multiple")
        if self.size_mib // self.zone_mib > 64:
            raise ValueError(f"device_profile: {self.size_mib // self.zone_mib} zones; use at most 64 (raise zone_mib)")
        return self

    @property
    def zones(self) -> int:
        return self.size_mib // self.zone_mib


@dataclass(frozen=True)
class RequestStats(fio.FioResult):
    """fio's figures plus the request-level view of one QD1 run: IOPS as one over the mean request
    latency (fio's own IOPS divides by a runtime in whole milliseconds, coarse for a few thousand
    fast requests), and the run's own 95% CI of it from the requests' latency spread."""
    ios: int = 0
    lat_sd_us: float = 0.0

    def metrics(self) -> dict[str, tuple[float, str]]:
        half = Z_95 * self.lat_sd_us / math.sqrt(self.ios) if self.ios else 0.0
        lo = 1e6 / (self.lat_mean_us + half)
        hi = 1e6 / (self.lat_mean_us - half) if self.lat_mean_us > half else float("inf")
        return {**super().metrics(), "requests": (float(self.ios), "I/Os"), "iops_req": (1e6 / self.lat_mean_us, "IOPS"),
                "iops_req_ci_lo": (lo, "IOPS"), "iops_req_ci_hi": (hi, "IOPS")}


def parse_requests(raw: str) -> RequestStats:
    base = fio.parse(raw)   # one job, one direction (it refuses others)
    d = fio_output.read(raw).jobs[0].direction(base.direction)
    return RequestStats(**vars(base), ios=d.ios, lat_sd_us=d.lat_sd_us or 0.0) if d else RequestStats(**vars(base))


class DeviceProfile:
    question = "A device's bandwidth by zone and its random IOPS, PE and VE"
    uses_fleet = False
    name = "device-profile"
    section = "device_profile"
    Settings = Settings
    headline = "iops_req"
    flags = (Flag("--devices", ("device_profile.devices",), "Comma-separated devices, e.g. default,tmpfs."),
             Flag("--pe-only", ("device_profile.ve",), "Measure from the host only (no VMs).", switch=False))

    def jobs(self, c: Settings) -> list[tuple[str, dict, fio.FioJob]]:
        """(label, meta, job): every zone read and written, then the two random runs."""
        out = []
        for k in range(c.zones):
            for rw in ("read", "write"):
                out.append((f"zone{k:02d}-{rw}", {"profile": "zone", "zone": k, "zone_offset_mib": k * c.zone_mib,
                                                   "direction": rw},
                            fio.FioJob(rw=rw, bs=c.seq_bs, iodepth=4, numjobs=1, direct=True,
                                       runtime_s=c.seq_runtime_s, ramp_s=0)))
        for rw, direction in (("randread", "read"), ("randwrite", "write")):
            out.append((f"random-{direction}", {"profile": "random", "direction": direction},
                        fio.FioJob(rw=rw, bs="4k", iodepth=1, numjobs=1, direct=True, runtime_s=c.random_max_s,
                                   ramp_s=0, ios=c.random_ios)))
        return out

    def declared(self, c: Settings, device: str) -> DeclaredBlock[tuple[dict, fio.FioJob]]:
        """A device's block: every job on the host, and in the VM unless measured from the host only."""
        return DeclaredBlock(f"device {device}", tuple(Declared(label, (meta, job), fio.tool_seconds(job), envs=envs(c.ve))
                                                       for label, meta, job in self.jobs(c)))

    def plan(self, cfg: Config) -> Plan:
        return plan_of(self.name, [self.declared(cfg.device_profile, name) for name in cfg.device_profile.devices],
                       cfg.repeat.count)

    def measures(self, ctx: RunContext) -> sweep.Sweep:
        cfg, c = ctx.cfg, ctx.cfg.device_profile
        # no VM when measured from the host only
        sweep_cfg = sweep.fleet_config(cfg, "dp", vms=1 if c.ve else 0, disk_size_mib=c.size_mib, device=None)
        jobs = self.jobs(c)
        blocks = [sweep.SweepBlock(
            f"device {name}",
            place=lambda name=name: self._device(ctx, sweep_cfg, name), keep_fleet=False, rebuildable=False,
            fleet=sweep.Fleet(sweep_cfg, scratch=SCRATCH.get(name)),
            points=lambda record, _tb, name=name: self.declared(c, name).made(
                lambda d, env: self._point(ctx, record, name, d.label, *d.what, env)))
                  for name in c.devices]
        return sweep.Sweep(sweep_cfg, blocks, "the sweep fleet", {"devices": c.devices,
                                                                  "points": [label for label, _, _ in jobs]})

    @contextlib.contextmanager
    def _device(self, ctx: RunContext, sweep: Config, name: str):
        """Where the device's fleet goes, as Testbed arguments ({} = the fleet's own prefilled file,
        a block device, or an array), or None when this host cannot have it (said, and skipped)."""
        if name == "default" and not ctx.host.is_this_machine:
            warn(f"device default skipped: it is made on this machine, and the fleet is on the {ctx.host.name} "
                 f"host. Fix: {ELSEWHERE}")
            yield None
        elif name in ("drive", "md") or name.startswith("/dev/"):
            yield self._on_host_device(ctx, sweep, name)
        else:
            yield {}

    @staticmethod
    def _on_host_device(ctx: RunContext, sweep: Config, name: str) -> dict | None:
        """A drive, an array over the members, or an allowlisted device, after the same safety
        checks the RAID experiments make (a refused device is skipped with every reason)."""
        members, allow = raid.members_and_allowlist(ctx.cfg.raid, ctx.host)
        if name == "md":
            if why := raid.md_support(ctx.host):
                warn(f"device md skipped: {why}")
                return None
            if len(members) < 2:
                warn("device md skipped: a RAID 0 array needs 2 member devices. Fix: list them in raid.members "
                     "and raid.allow, or use a nested host (host.kind=nested), whose drives are the members")
                return None
            r = ctx.cfg.raid
            return {"raid": raid.RaidPlan(name=f"{sweep.prefix}-raid", level=0, members=members, chunk_kib=r.chunk_kib,
                                          allow=allow, wipe=r.wipe, wait_resync=r.wait_resync,
                                          host=ctx.host.descriptor())}
        device = name if name != "drive" else (members[0] if members else None)
        if device is None:
            warn("device drive skipped: no member device. Fix: list one in raid.members and raid.allow, or use a "
                 "nested host (host.kind=nested)")
            return None
        if problems := raid.device_refusals(ctx.host, [device], allow, ctx.cfg.raid.wipe):
            warn(f"device {name} skipped: {'; '.join(problems)}")
            return None
        return {"device": device}

    def _point(self, ctx: RunContext, record: TestbedRecord, device: str, label: str, meta: dict,
               job: fio.FioJob, env: str) -> Point:
        c = ctx.cfg.device_profile
        zone = meta["profile"] == "zone"
        # the first slice of the device: the VM's disk, or where it would be (PE only)
        offset, size = (meta["zone"] * (c.zone_mib << 20), c.zone_mib << 20) if zone else (0, c.size_mib << 20)
        common = dict(parse=parse_requests, headline="bw" if zone else "iops_req",
                      meta={"point": label, "group": device, "profiled_device": device, **meta, **fio.job_meta(job)})
        vms = record.vms[:1]
        return sweep.point_in(env, f"{device}/{label}", partial(fio.on_host, ctx.host, job, device=record.device_path,
                                                                slots=[(offset, size)]),
                              (record.disk["backend"], tuple(vm.name for vm in vms),
                               partial(fio.in_guests, record.uri, job, vms, size=size, offset=offset)), **common)

    # --- the summary ---------------------------------------------------------------------
    def summarize(self, ctx: RunContext) -> None:
        rows = [{**s.metadata, "metric": s.metric, "value": s.value, "status": s.status}
                for s in ctx.store.samples if "profiled_device" in s.metadata and s.metadata.get("repeat") != "all"]
        zones, randoms = zone_rows(rows), random_rows(rows)
        if not zones and not randoms:
            return
        accel = accel_label(ctx.environment)
        accel += tcg_caveat(accel)
        write_atomic(ctx.store.dir / "summary.txt", print_summary(zones, randoms, asymmetry(zones, randoms), accel,
                                                                  ctx.cfg.device_profile))
        for png in (zones_plot(zones, ctx.store.dir / "device-profile-zones.png"),
                    random_plot(randoms, ctx.store.dir / "device-profile-random.png")):
            if png:
                step(f"plot: {png}")


def _rows(rows: list[dict], profile: str, keys: tuple[str, ...], metrics: tuple[str, ...]) -> list[dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        if r.get("profile") != profile:
            continue
        key = tuple(r[k] for k in keys)
        row = out.setdefault(key, {**{k: r[k] for k in keys}, "failed": False})
        if r["status"] != "ok":
            row["failed"] = True
        elif r["metric"] in metrics:
            row.setdefault(r["metric"], []).append(r["value"])
    return [tables.means(r) for r in sorted(out.values(), key=lambda r: tuple(r[k] for k in keys))]


def zone_rows(rows: list[dict]) -> list[dict]:
    """Per device, direction, env and zone: the mean bandwidth over repeats (KiB/s, with its CI)."""
    return _rows(rows, "zone", ("profiled_device", "direction", "env", "zone", "zone_offset_mib"), ("bw",))


def random_rows(rows: list[dict]) -> list[dict]:
    """Per device, direction and env: mean IOPS over repeats (with its CI), and each run's own CI
    over its requests (averaged over the repeats)."""
    return _rows(rows, "random", ("profiled_device", "direction", "env"),
                 ("iops_req", "lat_mean", "requests", "iops_req_ci_lo", "iops_req_ci_hi"))


def asymmetry(zones: list[dict], randoms: list[dict]) -> list[dict]:
    """Read over write, per device and env: random IOPS and the mean sequential bandwidth."""
    out = []
    for dev, env in dict.fromkeys((r["profiled_device"], r["env"]) for r in [*zones, *randoms]):
        def mean_of(rows, direction, metric, dev=dev, env=env):
            vals = [r[metric] for r in rows if r["profiled_device"] == dev and r["env"] == env
                    and r["direction"] == direction and r.get(metric) is not None]
            return sum(vals) / len(vals) if vals else None
        ratio = lambda a, b: a / b if a is not None and b else None   # noqa: E731
        out.append({"device": dev, "env": env,
                    "seq": ratio(mean_of(zones, "read", "bw"), mean_of(zones, "write", "bw")),
                    "random": ratio(mean_of(randoms, "read", "iops_req"), mean_of(randoms, "write", "iops_req"))})
    return out


def print_summary(zones: list[dict], randoms: list[dict], asym: list[dict], accel: str, c: Settings) -> str:
    r = Table(title=f"device-profile: 4 KiB random at QD1, {c.random_ios:,} requests per run; mean ± 95% CI over "
                    f"repeats, accel={accel}")
    for col in ("device", "direction", "env", "IOPS (1/latency)", "lat us", "run's CI over its requests"):
        r.add_column(col, justify="left" if col in ("device", "direction", "env") else "right", no_wrap=True)
    for row in randoms:
        req = ("-" if row.get("iops_req_ci_lo") is None else
               f"{row['iops_req_ci_lo']:,.0f} - {row['iops_req_ci_hi']:,.0f}")
        r.add_row(row["profiled_device"], row["direction"], row["env"], tables.cell(row, "iops_req"),
                  tables.cell(row, "lat_mean", 1), req)
    z = Table(title=f"sequential bandwidth (MiB/s) by zone of {c.zone_mib} MiB, {c.seq_bs} blocks")
    zone_ids = sorted({row["zone_offset_mib"] for row in zones})
    for col in ("device", "direction", "env", *(f"@{o} MiB" for o in zone_ids)):
        z.add_column(col, justify="left" if col in ("device", "direction", "env") else "right", no_wrap=True)
    lines: dict[tuple, dict] = {}
    for row in zones:
        lines.setdefault((row["profiled_device"], row["direction"], row["env"]), {})[row["zone_offset_mib"]] = row
    for (dev, direction, env), by_zone in lines.items():
        z.add_row(dev, direction, env, *("failed" if by_zone.get(o, {}).get("bw") is None
                                         else f"{by_zone[o]['bw'] / 1024:,.0f}" for o in zone_ids))
    a = Table(title="read/write asymmetry (read over write)")
    for col in ("device", "env", "sequential bandwidth", "random IOPS"):
        a.add_column(col, justify="left" if col in ("device", "env") else "right")
    for row in asym:
        a.add_row(row["device"], row["env"], *("-" if row[k] is None else f"{row[k]:.2f}x" for k in ("seq", "random")))
    failures = [(f"{row['profiled_device']} {row['direction']} {row['env']}", "failed")
                for row in [*zones, *randoms] if row["failed"]]
    return tables.render([r, z, a], failures, width=120)


def zones_plot(zones: list[dict], path: Path) -> Path | None:
    """Bandwidth against offset: one line per device, direction and environment."""
    if not zones:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4))
    lines: dict[tuple, list] = {}
    for row in zones:
        if row.get("bw") is not None:
            lines.setdefault((row["profiled_device"], row["direction"], row["env"]), []).append(row)
    for (dev, direction, env), rs in sorted(lines.items()):
        ax.errorbar([r["zone_offset_mib"] for r in rs], [r["bw"] / 1024 for r in rs],
                    yerr=[plots.ci(r, "bw") / 1024 for r in rs], marker="o" if direction == "read" else "s",
                    ls="-" if env == PHYSICAL else "--", capsize=3,
                    label=f"{dev} {direction} {'PE' if env == PHYSICAL else 'VE'}")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("zone offset (MiB from the start of the device)")
    ax.set_ylabel("bandwidth (MiB/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("device-profile: sequential bandwidth across the address space (mean ± 95% CI)", fontsize=9)
    return plots.save(fig, path)


def random_plot(randoms: list[dict], path: Path) -> Path | None:
    """4 KiB random IOPS bars per device and direction (PE and VE side by side), CI whiskers."""
    ok = [r for r in randoms if r.get("iops_req") is not None]
    if not ok:
        return None
    groups = list(dict.fromkeys((r["profiled_device"], r["direction"]) for r in ok))
    envs = list(dict.fromkeys(r["env"] for r in ok))
    width = 0.8 / len(envs)
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(groups)), 4))
    for j, env in enumerate(envs):
        xs, ys, errs = [], [], []
        for i, (dev, direction) in enumerate(groups):
            row = next((r for r in ok if (r["profiled_device"], r["direction"], r["env"]) == (dev, direction, env)), None)
            if row:
                xs.append(i + (j - (len(envs) - 1) / 2) * width)
                ys.append(row["iops_req"])
                errs.append(plots.ci(row, "iops_req"))
        ax.bar(xs, ys, width, yerr=errs, capsize=4, label="PE (host)" if env == PHYSICAL else "VE (in a VM)")
        for x, y in zip(xs, ys):   # small bars stay readable beside large ones
            ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
    ax.set_ylim(bottom=0)   # a CI from few repeats can reach below zero; IOPS cannot
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{dev}\n{direction}" for dev, direction in groups], fontsize=8)
    ax.set_ylabel("4 KiB random IOPS at QD1")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    ax.set_title("device-profile: random IOPS (mean ± 95% CI over repeats)", fontsize=9)
    return plots.save(fig, path)


EXPERIMENT = DeviceProfile()
