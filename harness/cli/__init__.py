"""The `harness` command: its arguments and what it prints. The run's wiring, and the order in which
teardown and gc reach this machine, the nested hosts and the [[hosts]], are harness.engine's."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import typing
from pathlib import Path

import click
from rich.markup import escape

from harness.cli import json_outputs
from harness.cli.app import DEBUG, Probability, Share, cli, config_params, load, resolve_run, with_config
from harness.common.console import console, error, step
from harness.common.exits import Exit
from harness.common.schema import ConfigError, bs_bytes


@cli.group(short_help="Bring the fleet up or down.")
def testbed() -> None:
    """Bring the fleet up or down (`make testbed up` runs `harness testbed up`)."""


@testbed.command("up", short_help="Bring the fleet up (or keep it, when it is as configured).")
@with_config
def testbed_up(config_path, overrides) -> None:
    """Probe the accelerator, terraform apply the fleet (and its [raid] array), wait for every guest agent."""
    from harness.engine import runner
    from harness.fleet import users_fleet
    from harness.fleet.testbed import Testbed
    cfg = load(config_path, overrides)
    deployed = Testbed.deployed_vms(cfg)
    if "vms" not in cfg.fleet.model_fields_set and deployed > cfg.fleet.vms:
        step(f"keeping the fleet's {deployed} VMs (an experiment grew it; set fleet.vms to change that)")
        cfg = runner.grown(cfg, deployed)
    users_fleet.for_config(cfg).up()


@testbed.command("down", short_help="Tear the fleet down and remove what it left.")
@with_config
@click.option("--all", "everything", is_flag=True, help="Also remove every other vtb- resource on this host.")
def testbed_down(config_path, overrides, everything) -> None:
    """terraform destroy, then remove anything left with the fleet's prefix."""
    from harness.fleet.testbed import TestbedError
    try:
        _down(config_path, overrides, everything)
    except TestbedError as e:   # what could not be removed, named: its own exit status
        error(str(e))
        sys.exit(Exit.LEFTOVERS)


def _down(config_path, overrides, everything) -> None:
    from harness.engine import cleanup
    from harness.fleet.testbed import TestbedError
    done = cleanup.torn_down(load(config_path, overrides), everything, say=step)
    step(f"testbed down: removed {len(done.removed)} leftover(s)" + "".join(f"\n    {r}" for r in done.removed)
         + "".join(f"\n    {n}" for n in done.notes))
    if done.failed:
        raise TestbedError("\n".join(done.failed))


def _run_as_json(store, status: str) -> None:
    """A run's last line with --json, whatever its outcome."""
    click.echo(json_outputs.dumps("run", {"run_id": store.run_id, "folder": str(store.dir), "status": status,
                                          "failed_samples": sum(s.status != "ok" for s in store.samples),
                                          "failed_blocks": list(store.manifest.get("blocks_failed") or {})},
                                  indent=None))


@cli.command(short_help="Remove vtb- leftovers that no live state owns.")
@with_config
@click.option("--all", "everything", is_flag=True, help="Every vtb- resource, even what live state owns.")
def gc(config_path, overrides, everything) -> None:
    """Remove vtb- leftovers that no live state owns (domains, pools, QEMU processes, loops, mounts).
    Fleets with state in a state dir, and the nested host, are kept; a SIGKILLed run's sweep fleet is not."""
    from harness.engine import cleanup
    from harness.hosts import HostsNotAnswering
    done = cleanup.collected(load(config_path, overrides), everything,
                             say=lambda said: console.print(f"gc: {said}", markup=False))
    for r in done.removed:
        console.print(f"removed {r}", markup=False)
    for n in done.notes:
        console.print(f"gc: {n}", markup=False)
    console.print(f"gc: {len(done.removed)} removed" + (f", {len(done.notes)} left (see above)" if done.notes else ""))
    if done.unanswered:
        raise HostsNotAnswering(f"gc left the [[hosts]] untouched: {done.unanswered}")
    if done.notes:   # each named above, with its fix
        sys.exit(Exit.LEFTOVERS)


@cli.group()
def backend() -> None:
    """Disk backends: what each is and whether this host can run it."""


@backend.command("list")
@with_config
def backend_list(config_path, overrides) -> None:
    """Every backend with its preflight verdict on this host."""
    from rich.table import Table

    from harness import backends
    from harness.fleet.testbed import Testbed
    cfg = load(config_path, overrides)
    table = Table(title="disk backends")
    for col in ("backend", "what", "runs here"):
        table.add_column(col)
    for name, b in backends.all_backends().items():
        try:
            reason = Testbed(cfg).for_backend(name).backend_verdict()
        except ConfigError as e:
            reason = re.sub(r"^invalid configuration(, \d+ problems)?:\s*", "", str(e))
        table.add_row(name, b.summary, "[green]yes[/green]" if not reason else f"[red]no[/red]: {reason}")
    console.print(table)


@cli.group(short_help="The nested host: an L1 VM that plays the host where this one lacks md.")
def host() -> None:
    """The testbed host: a nested host (an L1 VM) for machines without md."""


@host.group("nested", short_help="The nested host: an L1 VM that plays the host.")
def host_nested() -> None:
    """An L1 VM that plays the host (emulated NVMe drives, libvirtd, KVM inside); set host.kind=nested to use it."""


@host_nested.command("up", short_help="Boot the nested host, or keep it when it answers.")
@with_config
@click.option("--count", type=click.IntRange(1, 8), default=None,
              help="Boot this many nested hosts, each with sshd and the testbed's key, and print (last) the path "
                   "of a config that drives them all as ssh hosts (default: one, no such config).")
def host_nested_up(config_path, overrides, count) -> None:
    """Boot the nested host (kept when already up and answering), or --count N of them."""
    from harness.common import paths
    from harness.fleet import gc
    from harness.resources import nested_l1
    cfg = load(config_path, overrides)
    gc.register_state_dir(cfg.state_dir)   # its records (and the shared bridge's) are found by gc there
    if count is None:
        nested_l1.up(cfg.nested_place)
        return
    need = count * cfg.nested.memory_mib
    if need > paths.mem_available_mib() * 0.8:
        raise ConfigError(f"--count {count} x nested.memory_mib={cfg.nested.memory_mib} needs {need} MiB, more than "
                          f"this machine has available ({paths.mem_available_mib()} MiB); lower --count or "
                          "nested.memory_mib")
    path = nested_l1.up_many(cfg.nested_place, count, cfg.results_dir, cfg.fleet.disk_size_mib)
    console.print(str(path), markup=False, soft_wrap=True)


@host_nested.command("down", short_help="Destroy every nested host and its drives.")
@with_config
def host_nested_down(config_path, overrides) -> None:
    """Destroy every nested host and its drives, with everything built inside them."""
    from harness.resources import nested_l1
    for r in nested_l1.down(load(config_path, overrides).state_dir):
        step(f"removed {r}")


class Duration(click.ParamType):
    """A duration: seconds, or with s, m or h ("90", "30m", "2h")."""
    name = "duration"

    def convert(self, value, param, ctx):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value))
        if not m or float(m.group(1)) <= 0:
            self.fail(f"{value!r} is not a duration, e.g. 90s, 30m or 2h", param, ctx)
        return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


class ExperimentCommands(click.Group):
    """`harness run NAME`: one command per experiment in the registry, with the flags it declares;
    experiments are imported only when a run command is asked for."""

    def list_commands(self, ctx) -> list[str]:
        from harness.experiments import registry
        return list(registry())

    def get_command(self, ctx, name: str):
        from harness.experiments import registry
        experiment = registry().get(name)
        return experiment_command(experiment) if experiment else None


def shown_default(info) -> str:
    """A settings field's default as a flag takes it (a list comma-separated); "" for none."""
    default = info.get_default(call_default_factory=True)
    if default is None or default == [] or hasattr(default, "model_dump"):
        return ""
    return ",".join(map(str, default)) if isinstance(default, list) else str(default)


def experiment_command(experiment) -> click.Command:
    """The command of one experiment: --config, --set and its own flags, typed by the fields they set."""
    from harness.engine import settings
    options = []
    for flag in experiment.flags:
        info = settings.field_at(flag.fields[0].split("."))
        help_text = flag.help or (f"{info.description[:1].upper()}{info.description[1:]}." if info else "")
        if flag.switch is None and info is not None and "default" not in help_text and (shown := shown_default(info)):
            help_text = f"{help_text.removesuffix('.')} (default: {shown})."
        if flag.switch is not None:
            options.append(click.Option([flag.option], is_flag=True, default=False, help=help_text))
            continue
        annotation = info.annotation if info else None
        click_type = (click.Choice([str(a) for a in typing.get_args(annotation)])
                      if typing.get_origin(annotation) is typing.Literal else
                      {int: click.INT, float: click.FLOAT}.get(annotation, click.STRING))
        options.append(click.Option([flag.option], type=click_type, default=None, help=help_text,
                                    multiple=flag.repeatable))

    options += [click.Option(["--run-id"], metavar="ID", default=None,
                             help="Name the new run folder (default: <time>-<experiment>-<pid>), e.g. for CI."),
                click.Option(["--resume"], metavar="RUN", default=None,
                             help="Go on with an interrupted, failed or died run, or one with a block that did not come "
                                  "up (its id): its measured points are kept (default: a new run)."),
                click.Option(["--resume-anyway"], is_flag=True, default=False,
                             help="With --resume: go on even though the config, harness, host or accelerator "
                                  "changed (the samples record what changed)."),
                click.Option(["--plan", "plan_only"], is_flag=True, default=False,
                             help="Print the blocks, points, repeats and estimated duration; run nothing."),
                click.Option(["--precision"], type=Share(zero=False), default=None,
                             help="Add shuffled rounds to each point whose VE/PE ratio's 95% CI is wider than "
                                  "± this, e.g. 10% (repeat.precision; up to repeat.max_count; default: none, repeat.count "
                                  "rounds)."),
                click.Option(["--json", "as_json"], is_flag=True, default=False,
                             help="End with one JSON line: the run's id, folder, status and failed samples."),
                click.Option(["--allow-failed-points"], is_flag=True, default=False,
                             help="Exit 0 even when points or blocks failed or were not measured (all recorded)."),
                click.Option(["--budget"], type=Duration(), default=None,
                             help="With --precision: add no round once the run has taken this long, e.g. 30m "
                                  "(repeat.budget_s; default: none, up to repeat.max_count).")]

    def callback(config_path, overrides, run_id, resume, resume_anyway, plan_only, precision, budget,
                 allow_failed_points, as_json, **given) -> None:
        from harness.engine import runner
        typed = [(["repeat", key], value) for key, value in (("precision", precision), ("budget_s", budget))
                 if value is not None]
        for flag in experiment.flags:
            value = given[flag.option.lstrip("-").replace("-", "_")]
            if value is None or value is False or value == ():
                continue
            value = list(value) if isinstance(value, tuple) else value
            for path in flag.fields:
                keys = path.split(".")
                typed.append((keys, flag.switch if flag.switch is not None else
                              settings.typed_value(keys, value) if isinstance(value, str) else value))
        if resume_anyway and not resume:
            raise click.UsageError("--resume-anyway goes with --resume RUN")
        if run_id and resume:
            raise click.UsageError("--run-id names a new run; --resume goes on with one: give one of them")
        cfg = settings.load(config_path, list(overrides), typed)
        if resume:   # the run's own config, with only what this command line states on top
            from harness.measure import resume as resume_mod
            folder = resume_mod.folder_of(cfg.results_dir, resume)
            cfg = settings.load_resumed(resume_mod.recorded_config(folder), folder.parent, list(overrides), typed)
        if plan_only:
            runner.show_plan(cfg, experiment.name, resume=resume, run_id=run_id, resume_anyway=resume_anyway)
            return
        ctx = runner.run(cfg, experiment.name, resume=resume, resume_anyway=resume_anyway, run_id=run_id,
                         last_line=_run_as_json if as_json else None)
        failed = sum(s.status != "ok" for s in ctx.store.samples)
        blocks = ctx.store.manifest.get("blocks_failed") or {}
        if (failed or blocks) and not allow_failed_points:   # on stderr: with --json, stdout ends with the run's line
            what = [f"{failed} sample(s)"] * bool(failed) + [f"{len(blocks)} block(s) ({', '.join(blocks)})"] * bool(blocks)
            click.echo(f"{' and '.join(what)} of {ctx.store.run_id} failed or were not measured: exit status "
                       f"{int(Exit.POINTS_FAILED)} (--allow-failed-points accepts them)", err=True)
            sys.exit(Exit.POINTS_FAILED)

    doc = (sys.modules[type(experiment).__module__].__doc__ or experiment.name).strip()
    summary = " ".join(doc.split("\n\n")[0].split())
    summary = re.sub(rf"^(`harness run {experiment.name}`|{experiment.name}): ", "", summary)
    summary = summary[:1].upper() + summary[1:]
    if any(o.name == "full" for o in options):   # its docstring describes the study's matrix
        summary += (" By default a cut of that matrix, which answers the study's headline question in a default "
                    "run (`--plan` shows it); --full sweeps all of it.")
    return click.Command(experiment.name, callback=callback, params=[*config_params(), *options],
                         help=summary, short_help=experiment.question)


@cli.group(cls=ExperimentCommands, short_help="Run an experiment (`harness run NAME --help`).")
def run() -> None:
    """Run an experiment against the deployed testbed (`harness run NAME --help` lists its flags)."""


def _durations(folders: list[Path], docs_page: Path | None) -> None:
    from harness.report import durations, sections
    if not docs_page:
        click.echo(durations.markdown(folders), nl=False)
        return
    if refused := sections.refusal(docs_page, durations.MARKERS):
        raise click.BadParameter(refused, param_hint="--docs")
    sections.splice(docs_page, durations.markdown(folders, sections.section(docs_page, durations.MARKERS)),
                    durations.MARKERS)


@cli.command()
@with_config
@click.option("--rebuild", is_flag=True, help="Recreate the index from the run folders first.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list instead.")
@click.option("--durations", is_flag=True, help="Print the finished runs' durations as a Markdown table instead.")
@click.option("--docs", "docs_page", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --durations: a page whose `<!-- begin: harness runs --durations -->` section gets the "
                   "table, its rows of commands not run here kept (docs/experiments.md; default: none, printed).")
def runs(config_path, overrides, rebuild, as_json, durations, docs_page) -> None:
    """The runs in the results folder, oldest first."""
    import time as _time

    from rich.table import Table

    from harness.results.store import RunIndex
    if docs_page and not durations:
        raise click.BadParameter("is the page of the durations table; fix: add --durations", param_hint="--docs")
    index = RunIndex(load(config_path, overrides).results_dir)
    if rebuild:
        index.rebuild()
    if durations:
        _durations([Path(r["path"]) for r in index.list() if (Path(r["path"]) / "run.json").exists()], docs_page)
        return
    table = Table(title=f"runs in {index.path.parent}")
    for col in ("run id", "experiment", "status", "started", "accel", "backend"):
        table.add_column(col)
    unfinished, listed = [], []
    for r in index.list():
        started = _time.strftime("%Y-%m-%d %H:%M", _time.localtime(r["started"])) if r["started"] else ""
        status, resumable = _standing(r)
        if resumable:
            unfinished.append(f"harness run {r['experiment']} --resume {r['run_id']}")
        listed.append({**dict(r), "status": status})
        table.add_row(escape(r["run_id"]), escape(r["experiment"] or ""), status, started, r["accel"] or "",
                      escape(r["backend"] or ""))
    if as_json:
        click.echo(json_outputs.dumps("runs", listed))
        return
    console.print(table)
    if unfinished:   # with the config they ran with: --resume refuses another
        console.print("go on with an unfinished run (its measured points are kept):\n  " + "\n  ".join(unfinished),
                      markup=False, soft_wrap=True)


def _standing(r) -> tuple[str, bool]:
    """An indexed run's status as its manifest has it now, and whether `--resume` can go on with it."""
    from harness.measure import resume as resume_mod
    from harness.results.store import status_of
    status = r["status"] or ""
    manifest = Path(r["path"]) / "run.json"
    try:
        recorded = json.loads(manifest.read_text()) if manifest.exists() else {}
    except ValueError:   # not vtb's writing (its writes are atomic): listed as the index has it
        recorded = {}
    if status == "running" and recorded:  # still running, or killed before it could say so
        status = status_of(recorded)
    return status, resume_mod.offered(status, recorded)


@cli.command(short_help="Is RUN_B slower than RUN_A? The gate: exit 1 on a regression, 3 on lost points.")
@with_config
@click.argument("run_a")
@click.argument("run_b", required=False, default="latest")
@click.option("--alpha", type=Probability(), default=0.05, show_default=True,
              help="Significance level of the test, between 0 and 1.")
@click.option("--min-change", type=Share(), default="5%", show_default=True,
              help="Smallest change that counts as a regression: a percentage (5%) or a fraction (0.05).")
@click.option("--allow-failed-points", is_flag=True,
              help="Exit 0 (not 3) when points A measured failed in RUN_B or are not in it; they are still listed.")
@click.option("--junit", type=click.Path(path_type=Path, dir_okay=False),
              help="Also write the comparison as JUnit XML (a test case per point and metric, and a failed one "
                   "per lost point) for CI (default: none).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON instead of a table.")
def compare(config_path, overrides, run_a, run_b, alpha, min_change, allow_failed_points, junit, as_json) -> None:
    """Pair the same points of RUN_A (a run, a baseline's name, or a samples.jsonl) and RUN_B (default: the
    latest run); exit 1 on a regression, 3 when RUN_B lost points that RUN_A measured (it failed them, or
    does not have them), unless --allow-failed-points."""
    from harness.analysis import compare as cmp
    cfg = load(config_path, overrides)
    folder_a, folder_b = resolve_run(cfg, run_a), resolve_run(cfg, run_b)
    rows_a, rows_b = cmp.load_rows(folder_a), cmp.load_rows(folder_b)
    changes, unpaired = cmp.compare(rows_a, rows_b, alpha, min_change)
    lost = cmp.lost(rows_a, rows_b)
    if not changes and (not lost or not cmp.share_a_point(rows_a, rows_b)):
        raise click.ClickException(f"no point is in both runs. Fix: compare two runs of the same experiment and "
                                   f"points ({folder_a} and {folder_b})")
    regressions = [c for c in changes if c.regression]
    if as_json:
        click.echo(json_outputs.dumps("compare", {
            "a": run_a, "b": run_b, "a_folder": str(folder_a), "b_folder": str(folder_b), "alpha": alpha,
            "min_change": min_change, "unpaired": unpaired, "regressions": len(regressions),
            "lost": [gone.as_dict() for gone in lost], "changes": [cmp.as_dict(c) for c in changes]}))
    else:
        console.print(_comparison_table(changes, lost, f"{run_b} against {run_a} (alpha={alpha}, "
                                                       f"min change={min_change:.0%})", min_change))
        if unpaired:
            console.print(f"{unpaired} metric(s) are in only one of the two runs and were not compared")
    if junit:
        from harness.report import junit as junit_xml
        written = junit_xml.write(changes, junit, f'{run_b} against {run_a}', lost)
        if not as_json:
            console.print(f"JUnit XML: {written}", markup=False)
    if not as_json:
        console.print(f"{len(regressions)} regression(s) among {len(changes)} compared metric(s)"
                      + ("" if any(c.p_value is not None for c in changes) else
                         "; single measurements cannot be tested: set repeat.count >= 2")
                      + (f"; {len(lost)} point(s) measured in A were lost in B" if lost else ""))
    if regressions:
        sys.exit(Exit.REGRESSION)
    if lost and not allow_failed_points:
        sys.exit(Exit.POINTS_FAILED)


def _comparison_table(changes, lost, title: str, min_change: float):
    """`harness compare`'s table: one row per compared metric, then one per lost point."""
    from rich.table import Table

    from harness.analysis import compare as cmp
    from harness.analysis.stats import p_text
    table = Table(title=title)
    for col in ("experiment", "point", "env/backend", "metric", "A", "B", "change (95% CI)", "p", "verdict"):
        table.add_column(col, justify="right" if col in ("A", "B", "change (95% CI)", "p") else "left")
    for c in changes:
        verdict = "[red]regression[/red]" if c.regression else "[green]improvement[/green]" if c.improvement else ""
        table.add_row(c.key[0], cmp.point_name(c.key), cmp.place(c.key), c.key[-1],
                      f"{sum(c.a) / len(c.a):,.1f} (n={len(c.a)})", f"{sum(c.b) / len(c.b):,.1f} (n={len(c.b)})",
                      c.diff.percent() if c.diff else f"{c.rel_change:+.1%}",
                      "-" if c.p_value is None else p_text(c.p_value).removeprefix("p="), verdict)
    for gone in lost:
        table.add_row(gone.point[0], cmp.point_name(gone.point), cmp.place(gone.point), "", "measured", "[red]lost[/red]",
                      "", "", f"[red]{escape(gone.why[:120])}[/red]")
    table.caption = (f"change: B over A (geometric means); p: Welch's t-test on log values, Holm-adjusted over the "
                     f"{len(changes)} compared metrics; a regression is significant and at least {min_change:.0%}")
    return table


@cli.command(short_help="One self-contained HTML report of runs (default: latest).")
@with_config
@click.argument("run_ids", nargs=-1)
@click.option("--out", type=click.Path(path_type=Path), help="Where to write (default: report.html in the first run).")
@click.option("--prefer", type=click.Choice(["iops", "latency", "efficiency"]), default="iops", show_default=True,
              help="The priority the recommendation is made under: the headline metric (IOPS, bandwidth, TPS), "
                   "p99 latency, or I/Os per CPU-second.")
def report(config_path, overrides, run_ids, out, prefer) -> None:
    """One self-contained HTML report of one or more runs (default: the latest), the verdict first."""
    from harness.common.files import write_atomic
    from harness.report import html as html_report
    cfg = load(config_path, overrides)
    runs = [resolve_run(cfg, r) for r in run_ids or ("latest",)]
    if bare := [str(r) for r in runs if not (r / "run.json").is_file()]:
        raise click.ClickException(f"{', '.join(bare)}: no run.json (a samples file, or a baseline saved from one): "
                                   "the report needs a run folder. Fix: give the run's folder or id (`harness runs`)")
    path = out or runs[0] / "report.html"
    from harness.experiments import registry
    page = html_report.render(runs, {name: e.headline for name, e in registry().items()}, prefer)
    try:
        write_atomic(path, page)
    except OSError as e:   # a system path, a folder, one not writable
        raise click.ClickException(f"--out {path}: cannot write the report there ({e.strerror or e}). Fix: a file "
                                   "path in a folder you can write, e.g. --out ./report.html") from None
    console.print(f"report: {path}", markup=False)


@cli.command(short_help="Predict METRIC at an unmeasured point from a run's model.")
@with_config
@click.argument("run_id")
@click.option("--metric", required=True, help="The metric to model, e.g. iops, aggregate_iops, lat_mean, aggregate_tps.")
@click.option("--at", "at", multiple=True, metavar="FACTOR=VALUE",
              help="The point to predict, e.g. --at iodepth=64 --at bs=8k --at backend=nvme (default: "
                   "the model's factors only).")
def predict(config_path, overrides, run_id, metric, at) -> None:
    """Fit a model of METRIC over the run's swept factors; predict a point; flag anomalies."""
    from rich.table import Table

    from harness.analysis import compare as cmp
    from harness.analysis import model as mdl
    cfg = load(config_path, overrides)
    rows = cmp.load_rows(resolve_run(cfg, run_id))
    try:
        m = mdl.fit(rows, metric)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    held_out = "n/a (too few points)" if m.loo_mape is None else f"{m.loo_mape:.1%}"
    console.print(f"model of log({metric}) over log({', '.join(m.numeric) or '-'}) and "
                  f"{', '.join(m.levels) or 'no categorical factor'}: R² {m.r2:.3f}, leave-one-out error {held_out}")
    names = ["intercept", *(f"log {n}" for n in m.numeric),
             *(f"{c}={lv}" for c, levels in m.levels.items() for lv in levels[1:])]
    console.print("coefficients: " + ", ".join(f"{n} {c:+.3f}" for n, c in zip(names, m.coef)))
    flagged = mdl.anomalies(m, rows)
    if flagged:
        table = Table(title="anomalies: measured points far from the model")
        for col in ("point", "measured", "predicted"):
            table.add_column(col)
        for o, pred in flagged:
            table.add_row(", ".join(f"{k}={v}" for k, v in o.items() if k != "y"), f"{o['y']:,.1f}", f"{pred:,.1f}")
        console.print(table)
    if at:
        try:
            console.print(f"predicted {metric} at {', '.join(at)}: {m.predict(_point_at(at)):,.1f}")
        except ValueError as e:
            raise click.ClickException(str(e)) from None


def _point_at(at: tuple[str, ...]) -> dict:
    """predict's --at FACTOR=VALUE items as the model's point (a block size in bytes)."""
    point = {}
    for item in at:
        k, _, v = item.partition("=")
        if k == "bs" and not re.fullmatch(r"\d+[kKmM]?", v):
            raise ValueError(f"--at bs={v} is not a block size. Fix: --at bs=4k (bytes, or k or m)")
        point["bs_bytes" if k == "bs" else k] = bs_bytes(v) if k == "bs" else v
    return point

@cli.group()
def config() -> None:
    """The configuration: its reference."""


@config.command("reference", short_help="Every config field, as Markdown.")
@click.option("--sections", "sketch", is_flag=True, help="Only each section's field names, as a TOML sketch.")
def config_reference(sketch) -> None:
    """Every section and field, with type, default, range and description, as Markdown (from the schema)."""
    from harness.cli.config_reference import markdown, sections
    click.echo(sections() if sketch else markdown(), nl=False)


@cli.group()
def results() -> None:
    """The samples' columns and metrics, and their JSON Schema."""


@results.command("reference", short_help="Every sample column, as Markdown.")
def results_reference() -> None:
    """Every sample column with its type, unit and meaning, as Markdown (results/README.md's)."""
    from harness.experiments import catalog
    click.echo(catalog().markdown(), nl=False)


@results.command("metrics", short_help="Every metric, as Markdown.")
def results_metrics() -> None:
    """Every value of the `metric` column with its better direction, unit and meaning, as Markdown."""
    from harness.results.metrics import markdown
    click.echo(markdown(), nl=False)


@results.command("schema", short_help="The JSON Schema of a sample row, or of a command's --json output.")
@click.option("--of", "of", type=click.Choice(["sample", *json_outputs.OUTPUTS]), default="sample", show_default=True,
              help="A sample row (results/sample.schema.json), or a command's --json output (results/json/).")
def results_schema(of) -> None:
    """The JSON Schema one row of samples.jsonl validates against (results/sample.schema.json), or that a
    command's --json output does (results/json/NAME.schema.json)."""
    from harness.experiments import catalog
    click.echo(json.dumps(catalog().json_schema() if of == "sample" else json_outputs.schema(of), indent=1))


@cli.command()
@with_config
@click.option("--install", is_flag=True, help="First install every experiment's and backend's host packages "
                                              "(default: each is installed on its first use).")
def doctor(config_path, overrides, install) -> None:
    """What this host has and lacks for the testbed."""
    from harness.cli import doctor_checks
    cfg = load(config_path, overrides)
    if install:
        from harness.hosts import LocalHost, packages
        packages.ensure(LocalHost(), doctor_checks.plugin_packages(cfg), "`harness doctor --install`")
    ok = doctor_checks.report(cfg)
    sys.exit(Exit.OK if ok else Exit.HOST_FAILED)


@cli.command(short_help="The harness's own costs: bring-up, agents, points.")
@with_config
@click.option("--runtime", type=int, default=3, show_default=True, help="fio seconds per measured point.")
@click.option("--docs", "docs_page", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A page whose `<!-- begin: harness bench -->` section gets the figures' table (make bench: "
                   "docs/benchmarks.md; default: none, the table is printed).")
@click.option("--from", "from_json", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Measure nothing: take the figures of an earlier bench's JSON (results/bench-*.json; "
                   "default: measure).")
@click.option("--nested", is_flag=True, help="Also the nested host's own costs: boots one, then removes it (not "
                                             "while a nested host runs here).")
@click.option("--runs", "runs_only", is_flag=True,
              help="Measure nothing: read the main job's last run here and a fresh machine's log "
                   "(scripts/first-result.sh) into their own table (with --docs: its `harness bench --runs` section; "
                   "a full bench writes that section too).")
def bench(config_path, overrides, runtime, docs_page, from_json, nested, runs_only) -> None:
    """The harness's own cost: bring-up time, agent-ready time, overhead per point, agreement with plain fio."""
    from harness.cli import bench_runs, self_bench
    from harness.report import bench_table, sections
    section = bench_table.RUNS if runs_only else bench_table.FIGURES
    if docs_page and (refused := sections.refusal(docs_page, section)):
        raise click.BadParameter(refused, param_hint="--docs")
    cfg = load(config_path, overrides)
    read = bench_table.runs_markdown({**bench_runs.main_job(cfg.results_dir), **bench_runs.first_result()})
    if runs_only:
        if docs_page:
            sections.splice(docs_page, read, bench_table.RUNS)
        else:
            click.echo(read, nl=False)
        return
    if from_json:
        try:
            figures = json.loads(from_json.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            figures = str(e)
        if not bench_table.is_bench(figures):
            raise click.BadParameter(f"{from_json} is not the figures `harness bench` writes; fix: name a "
                                     "results/bench-*.json", param_hint="--from")
    else:
        figures = self_bench.run(cfg, runtime, nested)
    table = bench_table.markdown(figures)
    if docs_page:
        sections.splice(docs_page, table, bench_table.FIGURES)
        if sections.has_section(docs_page, bench_table.RUNS):
            sections.splice(docs_page, read, bench_table.RUNS)
    elif from_json:
        click.echo(table, nl=False)


def _click_message(e: click.ClickException) -> str:
    """click's own message of a bad flag or argument, with the fix where it names none."""
    said = e.format_message()
    if "Fix" in said:
        return said
    command = getattr(getattr(e, "ctx", None), "command_path", None) or _command_path(sys.argv[1:])
    return f"{said} Fix: `{command} --help` lists what it takes"


def _command_path(argv: list[str]) -> str:
    """The command the arguments name (`harness baseline save`), read as click reads them: an error
    raised inside a command carries no context to say it."""
    command, path = cli, ["harness"]
    for arg in argv:
        if arg.startswith("-") and len(path) == 1:   # the group's own flags (--debug) come first
            continue
        if not isinstance(command, click.Group) or arg not in command.commands:
            break
        command = command.commands[arg]
        path.append(arg)
    return " ".join(path)


def main() -> None:
    from harness.common.cancel import Terminated
    from harness.resources.entry import failure
    # Ctrl-C (SIGINT) stops every command, even one started in a script's background, which ignores it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # What vtb makes is root's alone to change: gc trusts a record only in a folder no one else can write
    os.umask(os.umask(0o022) | 0o022)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort as e:   # click turns Ctrl-C (and the runner's SIGTERM) into Abort
        sys.exit(Exit.TERMINATED if isinstance(e.__cause__, Terminated) else Exit.INTERRUPTED)
    except click.exceptions.Exit as e:    # --help, --version
        sys.exit(e.exit_code)
    except click.exceptions.NoArgsIsHelpError as e:   # `harness` or a group alone: its help, as --help gives it
        click.echo(e.ctx.get_help())
        sys.exit(0)
    except click.ClickException as e:     # a flag, an argument or a run that does not exist
        error(_click_message(e))
        sys.exit(Exit.BAD_INPUT)
    except KeyboardInterrupt:
        sys.exit(Exit.INTERRUPTED)
    except Exception as e:   # bad input or a failed step: one line; a bug: one line that says so
        if known := failure(e):
            if any(DEBUG) and isinstance(e, subprocess.CalledProcessError):
                raise
            error(known[1])
            sys.exit(known[0])
        if any(DEBUG):
            raise
        error(f"unexpected {type(e).__name__}: {e}. This is a vtb bug: run the command again with "
              "`harness --debug ...` for the traceback, and report it")
        sys.exit(Exit.INTERNAL)


from harness.cli import tracking  # noqa: E402,F401  (its commands join `cli`)
