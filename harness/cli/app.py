"""The `harness` group and what its commands share: the config options, loading the config, and
naming a run."""
from __future__ import annotations

from pathlib import Path

import click

from harness.common import exits

CONFIG_OPTIONS = (
    (("--config", "config_path"), dict(type=click.Path(path_type=Path), default=None,
                                       help="TOML config file (default: ./harness.toml if present).")),
    (("--set", "overrides"), dict(multiple=True, metavar="KEY=VALUE",
                                  help="Override any config field, e.g. --set fleet.vms=2 "
                                       "--set vm_scaling.job.iodepth=8 --set raid.allow=/dev/a,/dev/b.")),
)


def with_config(f):
    for decls, kwargs in reversed(CONFIG_OPTIONS):
        f = click.option(*decls, **kwargs)(f)
    return f


class Share(click.ParamType):
    """A share from 0 to 100%, given as `5%` or as a fraction (`0.05`); a bare number above 1 is
    refused as ambiguous (5 would be 500%, not 5%). `zero=False`: above 0% (a precision)."""
    name = "share"

    def __init__(self, zero: bool = True) -> None:
        self.zero = zero

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        text = str(value).strip()
        number = text.removesuffix("%")
        try:
            share = float(number) / (100 if text.endswith("%") else 1)
        except ValueError:
            self.fail(f"{value!r} is not a share. Fix: a percentage (5%) or a fraction (0.05)", param, ctx)
        if not text.endswith("%") and share > 1:
            self.fail(f"{value!r} is ambiguous: as a fraction it is {share:.0%}. Fix: {number}% for {number} percent, "
                      "or a fraction from 0 to 1", param, ctx)
        if not (0 <= share if self.zero else 0 < share) or not share <= 1:   # NaN too
            self.fail(f"{value!r} is not {'from 0%' if self.zero else 'above 0%'} up to 100%. Fix: e.g. 5% (or 0.05)",
                      param, ctx)
        return share


class Probability(click.ParamType):
    """A significance level: strictly between 0 and 1 (0 or 1 would make every test pass or fail)."""
    name = "probability"

    def convert(self, value, param, ctx):
        try:
            p = float(value)
        except (TypeError, ValueError):
            p = float("nan")
        if not 0 < p < 1:   # NaN too
            self.fail(f"{value!r} is not a level between 0 and 1 (both left out). Fix: e.g. 0.05", param, ctx)
        return p


def config_params() -> list[click.Parameter]:
    """--config and --set, for commands built at run time."""
    return [click.Option(list(decls), **kwargs) for decls, kwargs in CONFIG_OPTIONS]


def load(config_path, overrides):
    from harness.engine import settings
    return settings.load(config_path, list(overrides))


DEBUG: list[bool] = []   # set by --debug: an unexpected error shows its traceback


@click.group(context_settings={"help_option_names": ["-h", "--help"]},
             epilog="\b\nExit status:\n" + exits.table())
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error (a vtb bug).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda ctx, _, given: _version(ctx, given),
              help="Show the version and the git revision samples record, and exit.")
def cli(debug: bool) -> None:
    """QEMU/KVM virtualized-storage testbed: VM disks against bare metal, measured for real."""
    DEBUG[:] = [debug]


def _version(ctx: click.Context, given: bool) -> None:
    if not given or ctx.resilient_parsing:
        return
    from importlib.metadata import version

    from harness.hosts.environment import harness_rev
    click.echo(f"harness, version {version('vtb-harness')} (git {harness_rev()})")
    ctx.exit()


def resolve_run(cfg, arg: str) -> Path:
    """A run folder, a samples.jsonl file, a run id in the results folder, `latest`, or a baseline's name;
    `baseline:NAME` names only a baseline, and a path with a / only a path. A bare name that means
    two of these is refused: a folder in the working directory must not stand in for a baseline."""
    from harness.results import baselines
    from harness.results.store import RunIndex
    if arg == "latest":   # the run that started last
        listed = RunIndex(cfg.results_dir).list()
        if not listed:
            raise click.ClickException(f"latest: no run in {cfg.results_dir} yet. Fix: `harness run NAME` first, or "
                                       "set results_dir")
        return Path(listed[-1]["path"])
    if arg.startswith("baseline:"):
        if (found := baselines.find(cfg.results_dir, arg.removeprefix("baseline:"))) is None:
            raise click.ClickException(f"{arg}: no baseline of that name in {cfg.results_dir} (see `harness baseline list`)")
        return found
    path = Path(arg)
    meant = [path if path.exists() else cfg.results_dir / arg] if "/" in arg else [
        path, cfg.results_dir / arg, RunIndex(cfg.results_dir).find(arg), baselines.find(cfg.results_dir, arg)]
    found = list(dict.fromkeys(p.resolve() for p in meant if p is not None and p.exists()))
    if not found:
        raise click.ClickException(f"{arg}: not a run folder, a samples.jsonl file, a run id in "
                                   f"{cfg.results_dir} or a baseline's name (see `harness runs`, "
                                   "`harness baseline list`)")
    if len(found) > 1:
        raise click.ClickException(f"{arg} names {' and '.join(map(str, found))}. Fix: ./{arg} (a path) for the "
                                   f"one here, baseline:{arg} for the baseline, or the run's whole path")
    return found[0]
