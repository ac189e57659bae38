"""`harness run breakdown`: QD1 4 KiB latency decomposed by layer for each backend, as in the
latency-breakdown figure of the PE/VE study; a stacked bar per backend. Config section [breakdown].
Method and limits: harness/analysis/breakdown.py (also printed in the run's summary)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from rich.table import Table

from harness import backends
from harness.analysis import breakdown
from harness.analysis.stats import summarize
from harness.common.console import step
from harness.common.files import write_atomic
from harness.common.schema import BlockSize
from harness.config.core import Config
from harness.experiments import RunContext, sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings
from harness.measure.declaration import BOTH, HOST_ONLY, Declared, DeclaredBlock
from harness.report import plots, tables
from harness.report.plots import plt
from harness.results.environment import accel_label, tcg_caveat
from harness.results.samples import Sample
from harness.workloads import fio

GROUP = "breakdown"


class Settings(SweepSettings):
    rw: Literal["randread", "randwrite"] = Field("randread", description="access pattern (QD1)")
    bs: BlockSize = Field("4k", description="block size")


class Breakdown(FioMatrix):
    question = "Where QD1 latency goes, layer by layer, per backend"
    name = section = GROUP
    Settings = Settings
    headline = "lat_mean"
    flags = sweep_flags(GROUP, backends_field="breakdown.backends")

    def backend_names(self, cfg: Config) -> list[str]:
        null = backends.storeless()   # the layers alone: every other backend's reference
        return [b for b in (cfg.breakdown.backends or [cfg.disk.backend]) if b != null] + [null]

    def group_points(self, cfg: Config) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(GROUP, "device", c.job(rw=c.rw, bs=c.bs, iodepth=1), self.headline),
                FioPoint(GROUP, "fio-null", c.job(rw=c.rw, bs=c.bs, iodepth=1, ioengine="null", direct=False),
                         self.headline)]

    def declared(self, cfg: Config, backend: str) -> DeclaredBlock[FioPoint]:
        """The device point on the host and in the VM; the fio-null point on the host, and with the
        storeless backend in the VM too."""
        device, fio_null = self.points(cfg)
        return DeclaredBlock(f"backend {backend}", (
            Declared(device.label, device, fio.tool_seconds(device.job)),
            Declared(fio_null.label, fio_null, fio.tool_seconds(fio_null.job),
                     envs=BOTH if backend == backends.storeless() else HOST_ONLY)))

    def summarize(self, ctx: RunContext) -> None:
        lat: dict[tuple[str, str], float] = {}
        for (b, point), values in values_of(ctx.store.samples, GROUP, "lat_mean").items():
            lat[(b, point)] = summarize(values).mean
        null = backends.storeless()
        needed = [("host", "fio-null"), ("host", "device"), (null, "fio-null"), (null, "device")]
        if any(k not in lat for k in needed):
            return
        host_null, host_dev, guest_null, null_disk = (lat[k] for k in needed)
        per_backend = {b: breakdown.layers(host_null, host_dev, guest_null, null_disk, lat[(b, "device")])
                       for (b, point) in lat if point == "device" and b not in ("host", null)}
        if not per_backend:
            return
        accel = accel_label(ctx.environment)
        png = stacked_layers(per_backend, ctx.store.dir / "breakdown.png",
                             title=f"QD1 {ctx.cfg.breakdown.rw} {ctx.cfg.breakdown.bs} latency by layer "
                                   f"(accel={accel}{tcg_caveat(accel)})")
        step(f"plot: {png}")
        write_atomic(ctx.store.dir / "summary.txt",
                     print_layers(per_backend, accel) + "\nMethod and limits:\n" + breakdown.__doc__)
        tables.record_text("Method and limits", breakdown.__doc__.split("\n\n"))


# --- its summary: rows over repeats, the table, the plot --------------------
def values_of(samples: list[Sample], group: str, metric: str) -> dict[tuple[str, str], list[float]]:
    """(backend or host, point) -> the metric's values over repeats, for one group."""
    out: dict[tuple[str, str], list[float]] = {}
    for s in samples:
        if s.metadata.get("group") == group and s.metric == metric and s.status == "ok":
            out.setdefault((s.metadata["backend"], s.metadata["point"]), []).append(s.value)
    return out


def print_layers(per_backend: dict[str, dict[str, float]], accel: str) -> str:
    table = Table(title=f"latency by layer, us and share of the backend's total (accel={accel}"
                        f"{tcg_caveat(accel)})")
    layers = list(next(iter(per_backend.values())))
    table.add_column("layer", justify="left")
    for b in per_backend:
        table.add_column(b, justify="right")
    for layer in layers:
        table.add_row(layer, *(f"{v[layer]:,.1f} ({v[layer] / sum(v.values()):.0%})" for v in per_backend.values()))
    table.add_row("total", *(f"{sum(v.values()):,.1f}" for v in per_backend.values()))
    return tables.render([table], [])


def stacked_layers(per_backend: dict[str, dict[str, float]], path: Path, title: str) -> Path:
    """One stacked bar per backend, a segment per layer (negative differences drawn as zero)."""
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(per_backend) + 3), 4.5))
    names = list(per_backend)
    bottom = [0.0] * len(names)
    for layer in next(iter(per_backend.values())):
        heights = [max(0.0, per_backend[b][layer]) for b in names]
        ax.bar(names, heights, bottom=bottom, label=layer)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylabel("mean latency (us)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    plots.title(ax, title)
    return plots.save(fig, path)


EXPERIMENT = Breakdown()
