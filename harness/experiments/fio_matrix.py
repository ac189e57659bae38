"""The engine behind latency, iops, bandwidth and backends: a list of fio points run on the host
(the physical baseline) and in a VM, for each backend, all on the same host device.

It brings up a sweep fleet of its own (vtb-sw-<fleet>-*, one VM), re-provisions it for each
backend (the device stays), and tears it down at the end, so the user's fleet is untouched.
Each backend is one block of the pipeline: its points and the host's, interleaved in shuffled
rounds, so every VE/PE ratio compares measurements taken side by side.
Backends that cannot run here are listed with their reason, never silently dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Literal

from pydantic import Field

from harness import backends
from harness.backends import BackendNames
from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import Section
from harness.config.core import Config
from harness.experiments import RunContext, matrix_summary, registry
from harness.fleet.testbed import TestbedRecord
from harness.hosts import Host
from harness.measure import aggregate, sweep
from harness.measure.declaration import Declared, DeclaredBlock, plan_of
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Pipeline, Point
from harness.measure.plan import Plan
from harness.report import percentile_plot
from harness.results.environment import accel_label, tcg_caveat
from harness.workloads import Tool, fio


class SweepSettings(Section):
    """The settings every experiment of the matrix shares (each adds its own points' fields)."""
    backends: BackendNames = Field([], description="backends to compare; empty = disk.backend")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    ioengine: Literal["libaio", "io_uring", "psync"] = Field("libaio", description="fio ioengine")

    def job(self, **fields) -> fio.FioJob:
        return fio.FioJob(**{"runtime_s": self.runtime_s, "ramp_s": self.ramp_s, "ioengine": self.ioengine, **fields})


@dataclass(frozen=True)
class FioPoint:
    group: str          # the experiment whose point this is: latency, iops, bandwidth, ...
    label: str          # e.g. randread-qd1, randread-j4-qd64, read-128k
    job: fio.FioJob | fio.JobFile | fio.Trace
    headline: str       # the metric this point is about
    parse: Callable[[str], Any] | None = None   # the tool's own parser when None; fio.parse_jobs for a job
                                                # file: a point per job and direction
    vms: int = 1        # VMs at once (and as many host slots for the baseline); their figures summed
    tool: Tool = fio.TOOL   # what runs the job

    def __post_init__(self):
        if self.parse is None:
            object.__setattr__(self, "parse", self.tool.parse)


# a point of several participants is judged on their sum
AGGREGATE_OF = {"iops": "aggregate_iops", "bw": "aggregate_bw"}


def point_id(p: FioPoint, env: str, backend: str) -> str:
    """A matrix point's id: the host's names the backend whose block it belongs to."""
    return f"{p.group}/{p.label}/host@{backend}" if env == PHYSICAL else f"{p.group}/{p.label}/{backend}"


def measured_point(ctx: RunContext, record: TestbedRecord, p: FioPoint, env: str) -> Point:
    """A fio point of the matrix in one environment of a backend's block: host fio on the VMs'
    slices of the device, or fio in the sweep VMs (one, or `p.vms` at once, their figures summed)."""
    vms, backend = record.vms[:p.vms], record.disk["backend"]
    several = dict(aggregate=aggregate.aggregate, headline=AGGREGATE_OF.get(p.headline, p.headline)) \
        if p.vms > 1 else dict(headline=p.headline)
    common = dict(parse=p.parse, **several, meta={"group": p.group, "point": p.label, "block": backend,
                                                  **({"vm_count": p.vms} if p.vms > 1 else {}), **p.tool.job_meta(p.job)})
    return sweep.point_in(env, p.label, partial(p.tool.on_host, ctx.host, p.job, device=record.device_path,
                                                slots=[(vm.slice_offset, vm.slice_bytes) for vm in vms]),
                          (backend, tuple(vm.name for vm in vms), partial(p.tool.in_guests, record.uri, p.job, vms)),
                          ids=(point_id(p, PHYSICAL, backend), point_id(p, VIRTUAL, backend)), **common)


def on_loop(sweep_cfg: Config, host: Host, backend: str) -> bool:
    """A backend that needs a block device (passthrough-block) with none named (only a device file
    here): it runs on a loop device over a prefilled file instead, so the block-device path is
    measured everywhere."""
    return backends.get(backend).needs_block_device and sweep_cfg.fleet.device is None and host.is_this_machine


class FioMatrix:
    """An experiment of the matrix: its own points (`group_points`, from its own section), or those
    of the experiments it groups (`groups`, e.g. backends: latency, iops and bandwidth)."""
    uses_fleet = False
    name = ""
    section = ""
    groups: tuple[str, ...] = ()  # the experiments whose points it measures (default: its own)
    plots_percentiles = False     # also plot latency against percentile, host against backends, per point
    Settings = SweepSettings
    headline = ""

    def settings(self, cfg: Config):
        return getattr(cfg, self.section)

    def fleet_vms(self, cfg: Config) -> int:
        """The sweep fleet's VMs: its largest point's."""
        return max(p.vms for p in self.points(cfg))

    def sweep_config(self, cfg: Config) -> Config:
        return sweep.fleet_config(cfg, "sw", vms=self.fleet_vms(cfg))

    def group_points(self, cfg: Config) -> list[FioPoint]:
        """This experiment's own fio points."""
        raise NotImplementedError

    def _grouped(self) -> list["FioMatrix"]:
        return [registry()[g] for g in self.groups] if self.groups else [self]

    def backend_names(self, cfg: Config) -> list[str]:
        return self.settings(cfg).backends or [cfg.disk.backend]

    def points(self, cfg: Config) -> list[FioPoint]:
        return [p for e in self._grouped() for p in e.group_points(cfg)]

    def declared(self, cfg: Config, backend: str) -> DeclaredBlock[FioPoint]:
        """What one backend's block measures: each point on the host and in the VM."""
        return DeclaredBlock(f"backend {backend}", tuple(Declared(p.label, p, p.tool.tool_seconds(p.job), p.vms)
                                                         for p in self.points(cfg)))

    def plan(self, cfg: Config) -> Plan:
        return plan_of(self.name, [self.declared(cfg, b) for b in self.backend_names(cfg)], cfg.repeat.count)

    def measures(self, ctx: RunContext) -> sweep.Sweep | None:
        sweep_cfg = self.sweep_config(ctx.cfg)
        names = self.backend_names(ctx.cfg)
        skipped = {f"backend {b}": why for b, why in sweep.verdicts(ctx.host, sweep_cfg, names).items()
                   if why and not on_loop(sweep_cfg, ctx.host, b)}   # on a loop device of its own, it can
        runnable = [b for b in names if f"backend {b}" not in skipped]
        planned = {"backends": runnable, "points": [p.label for p in self.points(ctx.cfg)]}
        if not runnable:
            sweep.record_plan(ctx, planned, skipped)
            return None
        return sweep.Sweep(sweep_cfg, [self.sweep_block(ctx, sweep_cfg, b) for b in runnable], "the sweep fleet",
                           planned, skipped)

    def sweep_block(self, ctx: RunContext, sweep_cfg: Config, backend: str) -> sweep.SweepBlock:
        """A backend's block: the sweep VM served by it. The fleet stays up for the next backend to
        re-provision, except on a loop device of its own (on_loop), which goes when the block is done."""
        loop = sweep.Scratch("loop", "passthrough", "no block device named (fleet.device), so a loop device over a "
                             "prefilled file") if on_loop(sweep_cfg, ctx.host, backend) else None
        return sweep.SweepBlock(
            f"backend {backend}", fleet=sweep.Fleet(sweep_cfg, backend=backend, scratch=loop),
            points=lambda record, _tb: self.block_points(ctx, record), later=self.later_points(ctx))

    def later_points(self, ctx: RunContext) -> Callable[[Pipeline, TestbedRecord], list[Point]] | None:
        """Points that follow from the block's first figures (none here)."""
        return None

    def block_points(self, ctx: RunContext, record: TestbedRecord) -> list[Point]:
        """This experiment's points of one backend's block, as declared."""
        return self.declared(ctx.cfg, record.disk["backend"]).made(lambda d, env: measured_point(ctx, record, d.what, env))

    def summarize(self, ctx: RunContext) -> None:
        text = ""
        accel = accel_label(ctx.environment)
        for e in self._grouped():
            group, headline = e.name, e.headline
            rows = matrix_summary.matrix_rows(ctx.store.samples, group)
            if not rows:
                continue
            png = matrix_summary.backends_bars(rows, ctx.store.dir / f"{group}.png", metric=headline,
                                               title=f"{group}: {headline}, host against backends, mean ± 95% CI (accel="
                                                     f"{accel}{tcg_caveat(accel)})")
            text += matrix_summary.print_matrix(rows, group, headline, accel=accel)
            step(f"plot: {png}")
            if self.plots_percentiles and (png := percentile_plot.plot(
                    ctx.store.samples, ctx.store.dir / f"{group}-percentiles.png", group=group,
                    title=f"{group}: completion latency by percentile, host against backends (accel={accel}"
                          f"{tcg_caveat(accel)})")):
                step(f"plot: {png}")
                text += f"\nlatency percentiles, host against backends: {png.name}\n"
        if text:
            write_atomic(ctx.store.dir / "summary.txt", text)
