"""The `harness` command. Thin: parses arguments and calls the rest."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from harness import config as config_mod
from harness.console import console, step

common = [
    click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
                 help="TOML config file (default: ./harness.toml if present)."),
    click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                 help="Override any config field, e.g. --set fleet.vms=2 --set vm_scaling.job.iodepth=8."),
]


def with_config(f):
    for opt in reversed(common):
        f = opt(f)
    return f


def load(config_path, overrides) -> config_mod.Config:
    return config_mod.load(config_path, list(overrides))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """QEMU/KVM virtualized-storage testbed: VM disks against bare metal, measured for real."""


@cli.group()
def testbed() -> None:
    """Bring the fleet up or down (`make testbed up` runs `harness testbed up`)."""


@testbed.command("up")
@with_config
def testbed_up(config_path, overrides) -> None:
    """Probe the accelerator, terraform apply the fleet, wait for every guest agent."""
    from harness.testbed import Testbed
    Testbed(load(config_path, overrides)).up()


@testbed.command("down")
@with_config
@click.option("--all", "everything", is_flag=True, help="Also remove every other vtb- resource on this host.")
def testbed_down(config_path, overrides, everything) -> None:
    """terraform destroy, then remove anything left with the fleet's prefix."""
    from harness import gc, paths
    from harness.testbed import Testbed
    removed = Testbed(load(config_path, overrides)).down()
    if everything:
        removed += gc.collect(paths.PREFIX)
    step(f"testbed down: removed {len(removed)} leftover(s)" + "".join(f"\n    {r}" for r in removed))


@cli.command()
@with_config
@click.option("--all", "everything", is_flag=True, help="Every vtb- resource, not only this fleet's.")
def gc(config_path, overrides, everything) -> None:
    """Find and remove leftovers (domains, pools, QEMU processes, loops, mounts) by name prefix."""
    from harness import gc as gc_mod, paths
    cfg = load(config_path, overrides)
    removed = gc_mod.collect(paths.PREFIX if everything else cfg.prefix + "-")
    for r in removed:
        console.print(f"removed {r}")
    console.print(f"gc: {len(removed)} removed")


@cli.group()
def run() -> None:
    """Run an experiment against the deployed testbed."""


@run.command("vm-scaling")
@with_config
@click.option("--vm-counts", help="Comma-separated VM counts, e.g. 1,2,4.")
@click.option("--runtime", type=int, help="Measured seconds per point.")
@click.option("--ramp", type=int, help="Warm-up seconds per point.")
@click.option("--iodepth", type=int, help="fio queue depth.")
@click.option("--bs", help="fio block size, e.g. 4k.")
@click.option("--rw", help="fio pattern: randread, randwrite, read, write, randrw, rw.")
@click.option("--numjobs", type=int, help="fio jobs per VM.")
@click.option("--ioengine", help="libaio, io_uring or psync.")
def run_vm_scaling(config_path, overrides, vm_counts, runtime, ramp, iodepth, bs, rw, numjobs, ioengine) -> None:
    """Same fio job in 1..N VMs on one device, against host fio at the same concurrency."""
    from harness import runner
    flags = {"vm_counts": f"[{vm_counts}]" if vm_counts else None, "job.runtime_s": runtime,
             "job.ramp_s": ramp, "job.iodepth": iodepth, "job.bs": bs, "job.rw": rw,
             "job.numjobs": numjobs, "job.ioengine": ioengine}
    extra = [f"vm_scaling.{k}={v}" for k, v in flags.items() if v is not None]
    runner.run(load(config_path, [*overrides, *extra]), "vm-scaling")


@cli.command()
@with_config
def doctor(config_path, overrides) -> None:
    """What this host has and lacks for the testbed."""
    from harness import doctor as doctor_mod
    ok = doctor_mod.report(load(config_path, overrides))
    sys.exit(0 if ok else 1)


@cli.command()
@with_config
@click.option("--runtime", type=int, default=3, show_default=True, help="fio seconds per measured point.")
def bench(config_path, overrides, runtime) -> None:
    """The harness's own cost: bring-up time, agent-ready time, overhead per point, agreement with plain fio."""
    from harness import bench as bench_mod
    bench_mod.run(load(config_path, overrides), runtime)


def main() -> None:
    from harness.agent import AgentError
    from harness.accel import AccelError
    from harness.testbed import TestbedError
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except (config_mod.ConfigError, TestbedError, AgentError, AccelError) as e:
        console.print(f"[red]error:[/red] {e}", markup=True, highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
