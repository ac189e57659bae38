"""The sweep engine: what every experiment that brings up fleets of its own (backends, RAID setups,
devices, Ceph node counts) shares. It names the sweep fleet, records the plan in the run's manifest
and the progress bar, removes a fleet of the same name that a killed run left, and runs the blocks
(`run`): each block not already measured (a resumed run's) is provisioned, its fleet brought up
(rebuilding a nested host that stopped answering as it came up; a fleet that still does not come
up fails its block, and the run goes on), its points handed to the pipeline, and the last fleet
torn down, even after a failure. The experiment keeps only what is
its own: which blocks, what each sits on, and which points in each."""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Callable, ContextManager, Iterator

from harness.common.cancel import CANCEL, interrupt_in, lowered
from harness.common.console import step, warn
from harness.common.exits import StepFailed
from harness.common.schema import ConfigError, Refusal
from harness.config.core import Config
from harness.fleet.multi_host import MultiHostFleet, SpanningRecord, SweptOverHosts
from harness.fleet.testbed import BRING_UP_FAILURES, Testbed, TestbedRecord, torn_down_after
from harness.hosts import Host
from harness.measure.context import RunContext
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Pipeline, Point, Site
from harness.resources import nested_l1, scratch
from harness.resources.raid import RaidPlan

# What a block's bring-up fails with when its host, its guests or its cluster let it down: that
# block fails, not the run. A refusal (bad input) stands for every block, so it ends the run.


def fleet_config(cfg: Config, tag: str, **fleet) -> Config:
    """The config of an experiment's own fleet: named `<tag>-<the user's fleet name>` (cut to the 20
    characters fleet.name allows), with these fleet fields set."""
    return cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"name": f"{tag}-{cfg.fleet.name}"[:20], **fleet})})


@dataclass(frozen=True)
class Scratch:
    """A device of this machine's that the engine makes for a block, one fleet disk long, and
    removes after it (its fleet first; such a fleet is not rebuilt, its teardown would take the
    device with it). A block on another host cannot have one: it is skipped, with `elsewhere`."""
    kind: str                        # "loop": a loop device over a prefilled file in the state dir; "tmpfs":
                                     # the same in RAM (/dev/shm); "brd": the kernel's RAM disk, loaded for it
    name: str                        # its name's suffix after the sweep's prefix
    said: str = ""                   # why the block is on it, said as it is made
    elsewhere: str = ""              # the fix said when the fleet is on another host

    @contextmanager
    def made(self, ctx: RunContext, sweep_cfg: Config, label: str) -> Iterator[dict | None]:
        """Testbed arguments for the block ({"device": ...}), or None when it cannot be had here (said)."""
        if not ctx.host.is_this_machine:
            warn(f"{label} skipped: it is made on this machine ({self.kind}), and the fleet is on the "
                 f"{ctx.host.name} host{f'. Fix: {self.elsewhere}' if self.elsewhere else ''}")
            yield None
            return
        name, size = f"{sweep_cfg.prefix}-{self.name}", sweep_cfg.fleet.disk_size_mib << 20
        made = (scratch.ram_disk(sweep_cfg.state_dir, name, size) if self.kind == "brd" else
                scratch.loop_over_scratch_file(scratch.RAM if self.kind == "tmpfs" else sweep_cfg.state_dir, name, size))
        with made as dev:
            if dev is not None and self.said:
                step(f"{label}: {self.said}: {dev}")
            yield None if dev is None else {"device": dev}


@dataclass(frozen=True)
class Fleet:
    """A block's fleet as an experiment declares it: the engine provisions it (`provision`) on the
    run's host as it is then (a lost nested host is rebuilt), on what the block's place gives."""
    cfg: Config                      # the sweep's config: its fleet, disk and cluster
    backend: str | None = None       # served by this backend instead of the config's
    device: str | None = None        # on this host block device, used as is
    raid: RaidPlan | None = None     # on this array, built under the fleet (on the run's host)
    over: tuple[Host, ...] = ()      # spanning these hosts ([[hosts]]), a part on each
    scratch: Scratch | None = None   # on a device the engine makes for the block

    def provision(self, host: Host, where: dict) -> Testbed | SweptOverHosts:
        """Its testbed: `where` is the block's place ({} or a device or an array of its own)."""
        if self.over:
            return SweptOverHosts(MultiHostFleet(self.cfg, list(self.over), run_scoped=True))
        raid = replace(self.raid, host=host.descriptor()) if self.raid else where.get("raid")
        tb = Testbed(self.cfg, host, run_scoped=True, raid=raid, device=where.get("device", self.device))
        return tb.for_backend(self.backend) if self.backend else tb


def verdicts(host: Host, sweep_cfg: Config, names: list[str]) -> dict[str, str | None]:
    """Each backend's reason it cannot serve the sweep's fleet on the host, or None; what a
    backend needs on the host is installed or built first (its first use), where the host lets vtb."""
    fleet = Testbed(sweep_cfg, host, run_scoped=True)
    return {name: backend_verdict(fleet, name) for name in names}


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
        except BRING_UP_FAILURES as e:
            if isinstance(e, Refusal) or not rebuilt_lost_host(ctx, pipeline, self.testbed):
                raise
        self.testbed = make()
        return self.testbed.up()

    @contextmanager
    def torn_down_after(self, what: str = "") -> Iterator[None]:
        """Runs the body, then tears down the fleet the sweep has then, even after a failure."""
        with torn_down_after(lambda: self.testbed, what):
            yield


Guest = tuple[str, tuple[str, ...], Callable]   # a point's backend, the VMs it runs in, and what runs it there


def point_in(env: str, label: str, host: Callable, guest: Guest, ids: tuple[str, str] | None = None,
             **common) -> Point:
    """The point `label` in one environment: on the host (`host` runs it), or in the VMs (`guest`)
    with the host's point as its baseline. Its id is `<label>/<env>`, or `ids` (physical, virtual)."""
    physical_id, virtual_id = ids or (f"{label}/{PHYSICAL}", f"{label}/{VIRTUAL}")
    if env == PHYSICAL:
        return Point(physical_id, PHYSICAL, "host", (), run=host, **common)
    backend, vms, run = guest
    return Point(virtual_id, VIRTUAL, backend, vms, run=run, baseline=physical_id, **common)


def backend_verdict(fleet: Testbed, backend: str) -> str | None:
    """Why the fleet cannot be served by the backend on its host (its options, the host's side), or
    None, once what it needs there is installed or built (its first use)."""
    try:
        served = fleet.for_backend(backend)
        served.first_use()
        return served.backend_verdict()
    except (ConfigError, StepFailed) as e:
        return str(e)


def record_plan(ctx: RunContext, planned: dict | list, skipped: dict[str, str] | None = None) -> None:
    """The plan in the run's manifest, and what is skipped there too, each said once with why."""
    for what, why in (skipped or {}).items():
        warn(f"{what} skipped: {why}")
    ctx.store.update_manifest(planned=planned, **({"skipped": skipped} if skipped is not None else {}))


def begin(ctx: RunContext, sweep_cfg: Config, runs: int, planned: dict | None = None,
          skipped: dict[str, str] | None = None, standing: Fleet | None = None) -> SweepFleet:
    """Records the plan (record_plan; None: recorded already), counts the point runs for the
    progress bar (the plan's, of the blocks that run), and removes a fleet of the sweep's name
    that a killed run left (`standing`, by default the sweep config's on the run's host)."""
    if planned is not None:
        record_plan(ctx, planned, skipped)
    ctx.plan(runs)
    tb = (standing or Fleet(sweep_cfg)).provision(ctx.host, {})
    tb.down(quiet=True)
    return SweepFleet(tb)


def rebuilt_lost_host(ctx: RunContext, pipeline: Pipeline, tb: Testbed) -> bool:
    """After a failed bring-up: a nested host that stopped answering is rebuilt, and the run's host
    and the pipeline's site are the new one (True). Any other failure stands (False)."""
    rebuilt = nested_l1.rebuilt_after_loss(ctx.cfg.nested_place, ctx.host, tb.host_not_answering)
    if rebuilt is None:
        return False
    ctx.host = rebuilt
    pipeline.host, pipeline.uri = rebuilt, rebuilt.uri
    pipeline.sites = [Site(rebuilt, rebuilt.uri)]
    return True


@dataclass
class SweepBlock:
    """One block of a sweep: a setup the engine provisions, then the points measured on it."""
    label: str                                       # its block's in the plan, e.g. "backend nbd", "raid5-n4-c64k"
    fleet: Fleet                                     # what the engine provisions for it
    points: Callable[[TestbedRecord, Testbed], list[Point]]
    # what the block sits on for its duration, as Testbed arguments ({}: the sweep fleet's own device), or
    # None when this host cannot have it (the block is skipped; the context said why)
    place: Callable[[], ContextManager[dict | None]] = lambda: nullcontext({})
    rebuildable: bool = True                         # a fleet that lost its guest may be built anew
    keep_fleet: bool = True                          # its fleet stays up for the next block to re-provision
    ready: Callable[[Testbed], None] = lambda tb: None   # set on its fleet once up, and again once rebuilt
    later: Callable[[Pipeline, TestbedRecord], list[Point]] | None = None   # points that follow from the
                                                                            # first ones' figures (a rate curve's steps)
    after: Callable[[Pipeline, list[Point]], None] | None = None   # derived values over the block's points


@dataclass(frozen=True)
class Sweep:
    """What an experiment measures on fleets of its own, as it declares it for a run: the sweep's
    config, its blocks, what its fleet is called in messages, the plan recorded in the manifest and
    what is skipped with why, and a fleet a killed run may have left (`standing`)."""
    cfg: Config
    blocks: list[SweepBlock]
    what: str
    planned: dict | None = None
    skipped: dict[str, str] | None = None
    standing: Fleet | None = None


@dataclass(frozen=True)
class OnFleet:
    """What an experiment measures on the user's fleet, which the run brought up: its points, the
    plan recorded, what is skipped, and the sites and metadata of a fleet that spans hosts."""
    points: list[Point]
    planned: dict | list
    skipped: dict[str, str] | None = None
    sites: list[Site] | None = None
    meta: dict | None = None


def run_declared(ctx: RunContext, declared: Sweep | OnFleet | None) -> None:
    """Runs what an experiment declared (None: nothing this host can measure, its plan recorded)."""
    if isinstance(declared, Sweep):
        run(ctx, declared.cfg, declared.blocks, declared.what, declared.planned, declared.skipped, declared.standing)
    elif isinstance(declared, OnFleet):
        run_on_fleet(ctx, declared.points, declared.planned, declared.skipped, declared.sites, declared.meta)


def run(ctx: RunContext, sweep_cfg: Config, blocks: list[SweepBlock], what: str, planned: dict | None = None,
        skipped: dict[str, str] | None = None, standing: Fleet | None = None) -> None:
    """Runs the blocks in order on one pipeline (see the module). A block on a place of its own (a
    loop device, a RAM disk), or that keeps no fleet, has its fleet torn down when it is done
    (before the place goes). A fleet over hosts has its points measured on every host it spans."""
    fleet = begin(ctx, sweep_cfg, ctx.planned_runs([b.label for b in blocks]), planned, skipped, standing)
    pipeline = ctx.pipeline(ctx.host.uri, (sweep_cfg.prefix + "-",))
    with fleet.torn_down_after(what):
        for i, b in enumerate(blocks):
            said, block = f"[{i + 1}/{len(blocks)}] {b.label}", ctx.planned.block(b.label)
            runs = ctx.planned.runs_in([block])
            pipeline.budget_share = (i + 1) / len(blocks)   # a precision's added rounds: each block its share
            if b.label in ctx.store.manifest.get("blocks_done", []):
                step(f"{said}: measured before, its ratios and derived values too: kept")
                ctx.plan(-runs)
                continue
            with b.fleet.scratch.made(ctx, sweep_cfg, b.label) if b.fleet.scratch else b.place() as where:
                if where is None:
                    ctx.plan(-runs)
                    continue
                step(f"{said}: provisioning")
                with fleet.torn_down_after() if where or not b.keep_fleet else nullcontext():
                    if (record := _up_or_failed(ctx, fleet, pipeline, b, where, said, runs)) is None:
                        continue
                    tb = fleet.testbed
                    if isinstance(record, SpanningRecord):
                        pipeline.sites = [Site(h, part.uri) for h, part in zip(record.hosts, record.parts)]
                    b.ready(tb)
                    rebuild = (lambda b=b, tb=tb: _rebuilt(b, tb)) if b.rebuildable and not b.fleet.scratch else None
                    points = b.points(record, tb)
                    made = ctx.made_as_planned([block], points)
                    pipeline.measure(points, record.metadata(), rebuild=rebuild)
                    if b.later:
                        later = b.later(pipeline, record)
                        made = ctx.made_as_planned([block], later, made)
                        pipeline.measure(later, record.metadata(), rebuild=rebuild)
                    ctx.unmade_forgotten([block], made)
                    if b.after:
                        b.after(pipeline, points)
            # done only now: a block stopped before its derived values is provisioned again on a resume
            # (its measured points are kept), and a precision run's added rounds go on there
            failed = ctx.store.manifest.get("blocks_failed", {})   # a resumed run's, measured now
            ctx.store.update_manifest(blocks_done=[*ctx.store.manifest.get("blocks_done", []), b.label],
                                      **({"blocks_failed": {k: v for k, v in failed.items() if k != b.label}}
                                         if b.label in failed else {}))


def _up_or_failed(ctx: RunContext, fleet: SweepFleet, pipeline: Pipeline, b: SweepBlock, where: dict,
                  said: str, runs: int) -> TestbedRecord | SpanningRecord | None:
    """The block's fleet up; or, when it cannot come up (a lost nested host rebuilt did not help),
    None: what it made is torn down, the block is recorded failed with why (the run's status and
    exit say so, and a resume provisions it again), and the run goes on with the next block. A
    Ctrl-C behind the failure stops the run."""
    try:
        return fleet.up(ctx, pipeline, lambda: b.fleet.provision(ctx.host, where))
    except BRING_UP_FAILURES as e:
        if isinstance(e, Refusal) or interrupt_in(e) or CANCEL.is_set():
            raise
        warn(f"{said}: its fleet did not come up, so its {runs} point runs are not measured "
             f"(the run goes on): {e}")
        try:
            with lowered():
                fleet.testbed.down(quiet=True)
        except Exception as down_error:   # noqa: BLE001 - said; `harness gc` collects what is left
            if interrupt_in(down_error):
                raise
            warn(f"{said}: tearing down what it made failed too: {down_error}. Fix: harness gc")
        fleet.testbed = _TornDown()   # the block's and the sweep's teardowns have nothing left to do
        ctx.store.update_manifest(blocks_failed={**ctx.store.manifest.get("blocks_failed", {}), b.label: str(e)})
        ctx.plan(-runs)
        return None


class _TornDown:
    """The fleet of a block that did not come up, once torn down: nothing to tear down again."""

    def down(self, quiet: bool = False) -> list[str]:
        return []


def _rebuilt(block: SweepBlock, tb: Testbed) -> dict:
    """The block's fleet built anew, made ready again; its metadata."""
    record = tb.rebuilt()
    block.ready(tb)
    return record.metadata()


def run_on_fleet(ctx: RunContext, points: list[Point], planned: dict | list, skipped: dict[str, str] | None = None,
                 sites: list[Site] | None = None, meta: dict | None = None) -> None:
    """One block, the user's fleet: the run brought it up and leaves it up. Its points are measured
    on it (on every site of a fleet that spans hosts); a lost guest gets the fleet built anew, on
    one host (a fleet over [[hosts]] is several testbeds, not rebuilt as one)."""
    record_plan(ctx, planned, skipped)
    ctx.plan(ctx.planned_runs())
    made = ctx.made_as_planned(ctx.planned.blocks, points)
    pipeline = ctx.pipeline(ctx.testbed.uri, (ctx.testbed.prefix + "-",), sites=sites)
    pipeline.measure(points, meta or ctx.testbed.metadata(), rebuild=None if ctx.cfg.hosts else ctx.rebuilt_fleet)
    ctx.unmade_forgotten(ctx.planned.blocks, made)
