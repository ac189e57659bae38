"""The commands that gate and track over time: `harness baseline save|list` and `harness trend`
(`harness compare` gates; it takes a baseline's name where it takes a run)."""
from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from harness.cli import json_outputs
from harness.cli.app import cli, load, resolve_run, with_config
from harness.common.console import console


@cli.group(short_help="Runs kept by name, to compare against.")
def baseline() -> None:
    """Runs kept by name, to compare against (`harness compare NAME RUN`)."""


@baseline.command("save", short_help="Keep RUN's samples as baseline NAME.")
@with_config
@click.argument("name")
@click.argument("run")
def baseline_save(config_path, overrides, name, run) -> None:
    """Keep RUN's samples as baseline NAME (replacing an older one of that name)."""
    from harness.results import baselines
    cfg = load(config_path, overrides)
    try:
        into = baselines.save(cfg.results_dir, name, resolve_run(cfg, run))
    except baselines.BaselineError as e:
        raise click.ClickException(str(e)) from None
    console.print(f"baseline {name}: {into}", markup=False)


@baseline.command("list")
@with_config
@click.option("--json", "as_json", is_flag=True, help="Print the baselines as a JSON list instead.")
def baseline_list(config_path, overrides, as_json) -> None:
    """The baselines, with the run each was saved from."""
    from harness.results import baselines
    cfg = load(config_path, overrides)
    if as_json:
        click.echo(json_outputs.dumps("baseline-list", baselines.listing(cfg.results_dir)))
        return
    table = Table(title=f"baselines in {baselines.folder(cfg.results_dir)}")
    for col in ("name", "saved", "from run"):
        table.add_column(col)
    for b in baselines.listing(cfg.results_dir):
        table.add_row(escape(b["name"]), time.strftime("%Y-%m-%d %H:%M", time.localtime(b["saved"])), escape(b["from"]))
    console.print(table)


@cli.command(short_help="METRIC's mean and 95% CI over runs, per point.")
@with_config
@click.argument("metric")
@click.option("--point", help="Only the points whose name contains this (e.g. virtual-n2, or a backend; default: every "
                                 "point).")
@click.option("--runs", "run_ids", help="Comma-separated run ids or folders, in this order (default: every run "
                                        "in the results folder, oldest first).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False),
              help="Where to write the plot (default: trend-METRIC.png in the results folder; with --json, "
                   "only when given).")
@click.option("--json", "as_json", is_flag=True, help="Print each run's figure per point as a JSON list instead.")
def trend(config_path, overrides, metric, point, run_ids, out, as_json) -> None:
    """METRIC's mean and 95% CI over runs, per point: a table and a plot."""
    from harness.analysis import trend as trends
    from harness.report import trend_plot
    from harness.results.store import RunIndex
    cfg = load(config_path, overrides)
    if run_ids:
        runs = [(r, resolve_run(cfg, r)) for r in run_ids.split(",") if r]
    else:
        runs = [(r["run_id"], Path(r["path"])) for r in RunIndex(cfg.results_dir).list()]
    seen = trends.trend(runs, metric, point, skip_damaged=not run_ids)
    if not seen:
        raise click.ClickException(f"no run has {metric}{f' at a point matching {point!r}' if point else ''} "
                                   f"among {len(runs)} run(s). Fix: a metric the runs measured (e.g. "
                                   "aggregate_iops, iops, lat_p99; `harness runs` lists them)")
    if as_json:
        click.echo(json_outputs.dumps("trend", [{"run_id": s.run_id, "point": s.point, "metric": metric, "n": s.summary.n,
                                                 "mean": s.summary.mean, "ci95": s.summary.ci95, "cv": s.summary.cv}
                                                for s in seen]))
        if out:   # the plot only where asked for: --json is for a script, and writes nothing else
            trend_plot.plot(seen, out, metric)
        return
    table = Table(title=f"{metric} over {len(dict.fromkeys(s.run_id for s in seen))} run(s)")
    for col in ("run", "point", "mean ± 95% CI (CV)", "n"):
        table.add_column(col, justify="right" if col in ("mean ± 95% CI (CV)", "n") else "left")
    for s in seen:
        table.add_row(escape(s.run_id), escape(s.point), s.summary.format(), str(s.summary.n))
    console.print(table)
    png = trend_plot.plot(seen, out or cfg.results_dir / f"trend-{metric}.png", metric)
    console.print(f"plot: {png}", markup=False)
