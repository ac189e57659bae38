"""The sweep engine: what every experiment that brings up fleets of its own (backends, RAID setups,
devices, Ceph node counts) shares. It names the sweep fleet, records the plan in the run's manifest
and the progress bar, removes a fleet of the same name that a killed run left, and brings each
block's fleet up, rebuilding a nested host that stopped answering as it came up. The experiment
keeps only what is its own: which blocks, and which points in each."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from harness.common.console import warn
from harness.config.core import Config
from harness.fleet.agent import AgentError
from harness.fleet.testbed import Testbed, TestbedError, TestbedRecord, torn_down_after
from harness.measure.pipeline import Pipeline, Site
from harness.resources import nested_l1

if TYPE_CHECKING:
    from harness.experiments import RunContext


def fleet_config(cfg: Config, tag: str, **fleet) -> Config:
    """The config of an experiment's own fleet: named `<tag>-<the user's fleet name>` (cut to the 20
    characters fleet.name allows), with these fleet fields set."""
    return cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"name": f"{tag}-{cfg.fleet.name}"[:20], **fleet})})


class SweepFleet:
    """The fleet a sweep has now: each block's testbed in turn, the one its teardown takes down."""

    def __init__(self, testbed: Testbed):
        self.testbed = testbed

    def up(self, ctx: RunContext, pipeline: Pipeline, make: Callable[[], Testbed]) -> TestbedRecord:
        """A block's fleet (`make()` gives its testbed), up. When its nested host stopped answering
        as it came up (an L1 under TCG hangs now and then as an L2 starts; a hung L1 shows as a
        Terraform or an agent failure), the host is rebuilt, the run goes on there, and the block
        is tried once more. Any other failure stands."""
        self.testbed = make()
        try:
            return self.testbed.up()
        except (TestbedError, AgentError):
            if not rebuilt_lost_host(ctx, pipeline, self.testbed):
                raise
        self.testbed = make()
        return self.testbed.up()

    @contextmanager
    def torn_down_after(self, what: str = "") -> Iterator[None]:
        """Runs the body, then tears down the fleet the sweep has then, even after a failure."""
        with torn_down_after(lambda: self.testbed, what):
            yield


def record_plan(ctx: RunContext, planned: dict, skipped: dict[str, str] | None = None) -> None:
    """The plan in the run's manifest, and what is skipped there too, each said once with why."""
    for what, why in (skipped or {}).items():
        warn(f"{what} skipped: {why}")
    ctx.store.update_manifest(planned=planned, **({"skipped": skipped} if skipped is not None else {}))


def begin(ctx: RunContext, sweep_cfg: Config, runs: int, planned: dict | None = None,
          skipped: dict[str, str] | None = None) -> SweepFleet:
    """Records the plan (record_plan; None: recorded already), counts the point runs for the
    progress bar, and removes a fleet of the sweep's name that a killed run left."""
    if planned is not None:
        record_plan(ctx, planned, skipped)
    ctx.plan(runs)
    tb = Testbed(sweep_cfg, ctx.host, run_scoped=True)
    tb.down(quiet=True)
    return SweepFleet(tb)


def rebuilt_lost_host(ctx: RunContext, pipeline: Pipeline, tb: Testbed) -> bool:
    """After a failed bring-up: a nested host that stopped answering is rebuilt, and the run's host
    and the pipeline's site are the new one (True). Any other failure stands (False)."""
    rebuilt = nested_l1.rebuilt_after_loss(ctx.cfg, ctx.host, tb.host_not_answering)
    if rebuilt is None:
        return False
    ctx.host = rebuilt
    pipeline.host, pipeline.uri = rebuilt, rebuilt.uri
    pipeline.sites = [Site(rebuilt, rebuilt.uri)]
    return True
