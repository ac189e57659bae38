"""`harness run queue-depth`: IOPS and latency against the queue depth, the host against each
backend, and the depth where each stops gaining. Config section [queue_depth].

Each depth is a point of the fio matrix (the host's in the backend's block, in shuffled rounds).
Along each curve, a depth's gain over the previous one is a ratio with its 95% CI (the one test
every verdict takes, Holm-adjusted along the curve); the curve stops gaining at the first depth
whose gain is not a significant rise. At each depth, the backend's IOPS against the host's of its
own block."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from rich.table import Table

from harness.analysis import scaling
from harness.analysis.stats import summarize
from harness.common.console import console, step
from harness.common.files import write_atomic
from harness.common.schema import BlockSize, PositiveInts
from harness.config.core import Config
from harness.experiments import Flag, RunContext, sweep_flags
from harness.experiments.fio_matrix import FioMatrix, FioPoint, SweepSettings
from harness.experiments.matrix_summary import matrix_rows
from harness.report import plots, tables
from harness.report.plots import plt
from harness.results.environment import accel_label, tcg_caveat

GROUP = "queue-depth"


class Settings(SweepSettings):
    ioengine: Literal["libaio", "io_uring"] = Field("libaio", description="fio ioengine (an asynchronous one: a "
                                                                           "synchronous one ignores the queue depth)")
    rw: Literal["randread", "randwrite"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="block size")
    iodepths: Annotated[PositiveInts, AfterValidator(lambda v: sorted(set(v)))] = Field(
        [1, 4, 16, 64], min_length=2, description="queue depths swept (one fio job each)")


class QueueDepth(FioMatrix):
    question = "IOPS and latency against queue depth, the host against each backend"
    name = GROUP
    section = "queue_depth"
    Settings = Settings
    headline = "iops"
    flags = (*sweep_flags("queue_depth", backends_field="queue_depth.backends"),
             Flag("--iodepths", ("queue_depth.iodepths",), "Comma-separated queue depths, e.g. 1,8,32."))

    def group_points(self, cfg: Config) -> list[FioPoint]:
        c = self.settings(cfg)
        return [FioPoint(GROUP, f"{c.rw}-qd{qd}", c.job(rw=c.rw, bs=c.bs, iodepth=qd), self.headline)
                for qd in c.iodepths]

    def summarize(self, ctx: RunContext) -> None:
        """The matrix's table and bars, then each curve: where it stops gaining, the share of the
        host at each depth, and the plot of IOPS and latency against depth."""
        super().summarize(ctx)
        by_env, host_of = curves(ctx.store.samples)
        if not by_env:
            return
        accel = accel_label(ctx.environment)
        c = ctx.cfg.queue_depth
        png = depth_curves(by_env, host_of, ctx.store.dir / "queue-depth-curves.png",
                           title=f"{c.rw} {c.bs}: IOPS and mean latency against queue depth, mean ± 95% CI "
                                 f"(accel={accel}{tcg_caveat(accel)})")
        step(f"plot: {png}")
        summary = ctx.store.dir / "summary.txt"
        before = summary.read_text() if summary.exists() else ""
        write_atomic(summary, before + print_curves(by_env, host_of, accel))


# --- its summary: values by depth, the table, the plot --------------------
Curves = dict[str, dict[int, dict[str, list[float]]]]   # host or backend -> depth -> metric -> repeat values


def curves(samples: list) -> tuple[Curves, dict[str, str]]:
    """Each backend's curve and the host's of its own block (`host`, or `host (B's block)` when
    several backends were measured, each block with its host baseline); and each backend's host curve."""
    blocks = sorted({s.metadata["block"] for s in samples if s.metadata.get("group") == GROUP and "block" in s.metadata})
    by_env: Curves = {}
    host_of: dict[str, str] = {}
    for b in blocks:
        found = depth_values(matrix_rows([s for s in samples if s.metadata.get("block") == b], GROUP))
        host_of[b] = "host" if len(blocks) == 1 else f"host ({b}'s block)"
        by_env.update({host_of[b] if env == "host" else env: v for env, v in found.items()})
    return by_env, host_of


def depth_values(rows: list[dict]) -> Curves:
    """host or backend -> queue depth -> metric -> its repeat values (iops, lat_mean)."""
    out: Curves = {}
    for r in rows:
        depth = int(r["label"].rsplit("-qd", 1)[1])
        for env, res in r["results"].items():
            for metric in ("iops", "lat_mean"):
                if values := res.get(metric + tables.VALUES):
                    out.setdefault(env, {}).setdefault(depth, {})[metric] = values
    return out


def steps_of(by_env: Curves, env: str, host: str | None = None) -> list[scaling.Step]:
    """A curve's steps: each depth's gain over the previous one, and its IOPS against its block's
    host curve (`host`)."""
    iops = {qd: v["iops"] for qd, v in by_env[env].items() if v.get("iops")}
    against = {qd: v["iops"] for qd, v in by_env.get(host, {}).items() if v.get("iops")} if host else None
    return scaling.curve(iops, against)


def stops_gaining(steps: list[scaling.Step]) -> str:
    if len(steps) < 2:
        return "one depth: no curve"
    untested = [f"QD{s.vm_count}" for s in steps[1:] if s.gain is None]
    note = f"; untested at {', '.join(untested)} (fewer than two repeats that vary)" if untested else ""
    if (at := scaling.knee(steps)) is None:
        return f"kept gaining to QD{steps[-1].vm_count}{note}"
    i = [s.vm_count for s in steps].index(at)
    before, gain = steps[i - 1].vm_count, steps[i].gain.percent()
    said = (f"IOPS fell from QD{before} to QD{at}, {gain}: it stops gaining there" if steps[i].fell else
            f"no significant gain from QD{before} to QD{at}, {gain}: it stops gaining there, or gains less than "
            "the noise shows")
    if later := [s for s in steps[i + 1:] if s.rose]:   # a deeper queue that gained again: said, not hidden
        said += "; " + ", ".join(f"it gained again at QD{s.vm_count} ({s.gain.percent()})" for s in later)
    return said + note


def print_curves(by_env: Curves, host_of: dict[str, str], accel: str) -> str:
    table = Table(title=f"{GROUP}: IOPS against queue depth, gain over the previous depth and against the host "
                        f"(95% CI; accel={accel}{tcg_caveat(accel)})")
    for col in ("env", "QD", "IOPS", "mean lat us", "gain over previous QD", "against the host"):
        table.add_column(col, justify="left" if col == "env" else "right")
    verdicts = []
    for env in sorted(by_env, key=lambda e: not e.startswith("host")):
        steps = steps_of(by_env, env, host_of.get(env))
        for s in steps:
            v = by_env[env][s.vm_count]
            lat = v.get("lat_mean")
            table.add_row(env, str(s.vm_count), f"{sum(v['iops']) / len(v['iops']):,.0f}",
                          f"{sum(lat) / len(lat):,.1f}" if lat else "-", s.gain_text(),
                          s.share.percent() if s.share else "-")
        verdicts.append(f"{env}: {stops_gaining(steps)}")
    tables.record_text("where each curve stops gaining", verdicts, verdict=True)
    text = tables.render([table], [])
    for line in verdicts:
        console.print(line, highlight=False)
    return text + "\n".join(verdicts) + "\n"


def depth_curves(by_env: Curves, host_of: dict[str, str], path: Path, title: str) -> Path:
    """IOPS and mean latency against queue depth (log 2 axis), one line per host or backend, a
    dotted line where a curve stops gaining."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    for env in sorted(by_env, key=lambda e: not e.startswith("host")):
        color = "black" if env == "host" else None
        line = _draw(top, by_env[env], "iops", env, color)
        _draw(bottom, by_env[env], "lat_mean", env, line.get_color())
        if (at := scaling.knee(steps_of(by_env, env, host_of.get(env)))) is not None:
            top.axvline(at, ls=":", color=line.get_color(), alpha=0.7)
    depths = sorted({qd for by_depth in by_env.values() for qd in by_depth})
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(depths, [str(d) for d in depths])
    bottom.minorticks_off()
    for ax, label in ((top, "IOPS"), (bottom, "mean latency (us)")):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        plots.log_if_spread(ax, [y for line in ax.get_lines() for y in line.get_ydata()])
    bottom.set_xlabel("queue depth")
    top.legend(fontsize=8, title="dotted: stops gaining", title_fontsize=7)
    plots.title(top, title)
    return plots.save(fig, path)


def _draw(ax, by_depth: dict[int, dict[str, list[float]]], metric: str, label: str, color):
    """One curve of a metric's mean ± 95% CI by depth; its line."""
    found = [(qd, summarize(v[metric])) for qd, v in sorted(by_depth.items()) if v.get(metric)]
    bars = ax.errorbar([qd for qd, _ in found], [st.mean for _, st in found], yerr=[st.ci95 or 0 for _, st in found],
                       marker="o", capsize=3, label=label, color=color)
    return bars.lines[0]


EXPERIMENT = QueueDepth()
