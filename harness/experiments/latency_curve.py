"""`harness run latency-curve`: latency against IOPS for random reads, sweeping fio's rate_iops
from low to saturation, for the host and each backend. Config section [latency_curve].

Each environment is first measured unthrottled (its bound); the curve's steps are fractions of
that environment's own bound, so point names pair up across environments."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Callable, Literal

from pydantic import AfterValidator, Field
from rich.table import Table

from harness.analysis.curve import facts
from harness.analysis.stats import summarize
from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import BlockSize, each
from harness.config.core import Config
from harness.experiments import RunContext, sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings, measured_point, point_id
from harness.fleet.testbed import TestbedRecord
from harness.measure.declaration import Declared, DeclaredBlock
from harness.measure.pipeline import Pipeline, Point
from harness.report import plots, tables
from harness.report.plots import plt
from harness.results.environment import accel_label, tcg_caveat
from harness.results.samples import Sample
from harness.workloads import fio

GROUP = "latency-curve"


class Settings(SweepSettings):
    rw: Literal["randread", "randwrite"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="block size")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth (enough to saturate)")
    fractions: Annotated[list[float], each(lambda f: 0 < f <= 1, "fractions must be in (0, 1]"),
                         AfterValidator(sorted)] = Field(
        [0.1, 0.25, 0.5, 0.75, 0.9, 1.0], min_length=2,
        description="rate_iops steps as fractions of the unthrottled IOPS")
    threshold_pct: float = Field(20, gt=0, description="mark where mean latency has grown this many % over "
                                                       "its value at the lowest rate")


class LatencyCurve(FioMatrix):
    question = "Latency against IOPS, the host against each backend"
    name = GROUP
    section = "latency_curve"
    Settings = Settings
    headline = "lat_mean"   # of the rate steps; each bound is an IOPS point
    flags = sweep_flags("latency_curve", backends_field="latency_curve.backends")

    def group_points(self, cfg: Config) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(GROUP, "unthrottled", c.job(rw=c.rw, bs=c.bs, iodepth=c.iodepth), "iops")]

    def step(self, cfg: Config, fraction: float, bound: float = 1) -> FioPoint:
        """A rate step: a fraction of an environment's unthrottled IOPS (`bound`)."""
        c = cfg.latency_curve
        return FioPoint(GROUP, f"rate-{fraction:.0%}", c.job(rw=c.rw, bs=c.bs, iodepth=c.iodepth,
                                                              rate_iops=max(1, int(bound * fraction))), self.headline)

    def declared(self, cfg: Config, backend: str) -> DeclaredBlock:
        """The unthrottled bound on the host and in the VM, then the rate steps of each."""
        (top,) = self.points(cfg)
        steps = [Declared(p.label, f, fio.tool_seconds(p.job)) for f in cfg.latency_curve.fractions
                 for p in [self.step(cfg, f)]]
        return DeclaredBlock(f"backend {backend}", (Declared(top.label, top, fio.tool_seconds(top.job)), *steps))

    def block_points(self, ctx: RunContext, record: TestbedRecord) -> list[Point]:
        """First the bound of both environments (unthrottled, interleaved) ..."""
        return self.declared(ctx.cfg, record.disk["backend"]).made(
            lambda d, env: measured_point(ctx, record, d.what, env), only=lambda d: isinstance(d.what, FioPoint))

    def later_points(self, ctx: RunContext) -> Callable[[Pipeline, TestbedRecord], list[Point]]:
        """... then the rate steps of both, each a fraction of its own environment's bound, interleaved."""
        def steps(pipeline: Pipeline, record: TestbedRecord) -> list[Point]:
            (top,) = self.points(ctx.cfg)
            bounds = {}

            def at_fraction(d: Declared, env: str) -> Point | None:
                if env not in bounds:
                    pid = point_id(top, env, record.disk["backend"])
                    values = pipeline.values(pid, "iops")
                    bounds[env] = sum(values) / len(values) if values else None
                    if values:
                        step(f"{pid}: bound {bounds[env]:,.0f} IOPS")
                if bounds[env] is None:
                    return None
                return measured_point(ctx, record, self.step(ctx.cfg, d.what, bounds[env]), env)
            return self.declared(ctx.cfg, record.disk["backend"]).made(at_fraction, only=lambda d: isinstance(d.what, float))
        return steps

    def summarize(self, ctx: RunContext) -> None:
        curves = curve_points(ctx.store.samples, GROUP)
        if not curves:
            return
        c = ctx.cfg.latency_curve
        found = {env: facts(pts, c.threshold_pct) for env, pts in curves.items() if len(pts) >= 2}
        accel = accel_label(ctx.environment)
        png = latency_curves(curves, found, ctx.store.dir / "latency-curve.png",
                             title=f"latency against IOPS, {c.rw} {c.bs} QD{c.iodepth} (accel={accel}"
                                   f"{tcg_caveat(accel)})")
        step(f"plot: {png}")
        write_atomic(ctx.store.dir / "summary.txt", print_curves(found, c.threshold_pct, accel))


# --- its summary: rows over repeats, the table, the plot --------------------
def curve_points(samples: list[Sample], group: str) -> dict[str, list[tuple[float, float]]]:
    """Per environment (host or backend): (achieved IOPS, mean latency) of each throttled point,
    in increasing rate order, averaged over repeats."""
    acc: dict[str, dict[str, dict[str, list]]] = {}
    order: dict[str, int] = {}
    for s in samples:
        m = s.metadata
        if m.get("group") != group or s.status != "ok" or m.get("rate_iops", 0) == 0:
            continue
        point = acc.setdefault(m["backend"], {}).setdefault(m["point"], {"iops": [], "lat_mean": []})
        order.setdefault(m["point"], m["rate_iops"])
        if s.metric in point:
            point[s.metric].append(s.value)
    return {env: [(summarize(p["iops"]).mean, summarize(p["lat_mean"]).mean)
                  for _, p in sorted(points.items(), key=lambda kv: order[kv[0]]) if p["iops"] and p["lat_mean"]]
            for env, points in acc.items()}


def print_curves(found: dict, threshold_pct: float, accel: str) -> str:
    table = Table(title=f"latency-curve (accel={accel}{tcg_caveat(accel)})")
    for col in ("env", "bound IOPS", "base lat us", f"knee (lat +{threshold_pct:g}%) IOPS", "IOPS at 95% bound",
                "lat there us", "increase"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for env, f in sorted(found.items(), key=lambda kv: kv[0] != "host"):
        table.add_row(env, f"{f.bound_iops:,.0f}", f"{f.base_lat:,.1f}",
                      "-" if f.knee_iops is None else f"{f.knee_iops:,.0f}", f"{f.iops_at_95:,.0f}",
                      f"{f.lat_at_95:,.1f}", f"{f.increase_at_95:+.0%}")
    return tables.render([table], [])


def latency_curves(curves: dict[str, list[tuple[float, float]]], found: dict, path: Path, title: str) -> Path:
    """Mean latency against achieved IOPS per environment, with each curve's knee marked."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for env, pts in sorted(curves.items(), key=lambda kv: kv[0] != "host"):
        xs, ys = zip(*pts)
        line, = ax.plot(xs, ys, "o-", label=env, color="black" if env == "host" else None)
        f = found.get(env)
        if f and f.knee_iops is not None:
            ax.axvline(f.knee_iops, ls=":", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("achieved IOPS")
    ax.set_ylabel("mean latency (us)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="dotted: latency +threshold", title_fontsize=7)
    plots.title(ax, title)
    return plots.save(fig, path)


EXPERIMENT = LatencyCurve()
