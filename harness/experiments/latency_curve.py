"""`harness run latency-curve`: latency against IOPS for random reads, sweeping fio's rate_iops
from low to saturation, for the host and each backend. Config section [latency_curve].

Each environment is first measured unthrottled (its bound); the curve's steps are fractions of
that environment's own bound, so point names pair up across environments."""
from __future__ import annotations

from harness.analysis.curve import facts
from harness.config import Config
from harness.console import step
from harness.experiments import RunContext
from harness.experiments.fio_matrix import FioMatrix, Point
from harness.report import plots, tables
from harness.store import write_atomic

GROUP = "latency-curve"


class LatencyCurve(FioMatrix):
    name = "latency-curve"
    groups = (GROUP,)

    def backend_names(self, cfg: Config) -> list[str]:
        return cfg.latency_curve.backends or [cfg.disk.backend]

    def points(self, cfg: Config) -> list[Point]:
        c = cfg.latency_curve
        return [Point(GROUP, "unthrottled", c.job(rw=c.rw, bs=c.bs, iodepth=c.iodepth), "iops", False)]

    def sweep(self, ctx: RunContext, measure, who: str) -> None:
        c = ctx.cfg.latency_curve
        (top,) = self.points(ctx.cfg)
        step(f"[{who}] unthrottled")
        bound = measure(top)
        if not bound:
            return
        for f in c.fractions:
            rate = max(1, int(bound * f))
            step(f"[{who}] rate_iops={rate:,} ({f:.0%} of {bound:,.0f})")
            measure(Point(GROUP, f"rate-{f:.0%}", c.job(rw=c.rw, bs=c.bs, iodepth=c.iodepth, rate_iops=rate),
                          "lat_mean", True))

    def summarize(self, ctx: RunContext) -> None:
        curves = tables.curve_points(ctx.store.samples, GROUP)
        if not curves:
            return
        c = ctx.cfg.latency_curve
        found = {env: facts(pts, c.threshold_pct) for env, pts in curves.items() if len(pts) >= 2}
        accel = ctx.environment["accel"]
        png = plots.latency_curves(curves, found, ctx.store.dir / "latency-curve.png",
                                   title=f"latency against IOPS, {c.rw} {c.bs} QD{c.iodepth} (accel={accel}"
                                         f"{', not performance numbers' if accel == 'tcg' else ''})")
        step(f"plot: {png}")
        write_atomic(ctx.store.dir / "summary.txt", tables.print_curves(found, c.threshold_pct, accel))


EXPERIMENT = LatencyCurve()
