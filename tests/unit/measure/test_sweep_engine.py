"""The sweep engine with a fake experiment: its blocks are provisioned in order, each block's points
are shuffled in rounds and paired with their baselines, a resumed run's finished blocks are not
provisioned again, a block whose place this host cannot have is skipped, and every fleet goes.
The blocks' testbeds stand in for Terraform (what the engine asks of one: up, down, rebuilt); the
pipeline, its results folder and libvirt (its test driver) are real."""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Callable

import pytest

from harness.engine import settings
from harness.experiments import RunContext
from harness.fleet.testbed import TestbedError
from harness.hosts import LocalHost
from harness.measure import sweep
from harness.measure.declaration import HOST_ONLY, Declared, DeclaredBlock, plan_of
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Point
from harness.measure.plan import Block, Plan, PlanDisagrees, PlannedPoint
from harness.results.outputs import Output
from harness.results.store import RunStore
from harness.workloads import fio

EVENTS: list[str] = []


class FakeTestbed:
    def __init__(self, label: str):
        self.label = label

    def up(self):
        EVENTS.append(f"up {self.label}")
        return SimpleNamespace(metadata=lambda: {"setup": self.label})

    def down(self, quiet: bool = False) -> list[str]:
        EVENTS.append(f"down {self.label}")
        return []

    def rebuilt(self):
        return self.up()


@dataclass(frozen=True)
class FakeFleet:
    """A block's declared fleet, whose testbed stands in for Terraform."""
    make: Callable[[], FakeTestbed]
    scratch = None   # on its block's place, not on a device the engine makes

    def provision(self, host, where: dict) -> FakeTestbed:
        return self.make()


def point(raw: str, label: str, name: str, env: str, kill_at: int = 0) -> Point:
    """A fake point: its run is logged (the `kill_at`-th run of the test is killed instead)."""
    def run():
        if kill_at and len([e for e in EVENTS if "/" in e]) + 1 == kill_at:
            raise KeyboardInterrupt
        EVENTS.append(f"{label}/{name}/{env}")
        return [Output("slot0", raw)]
    pid = f"{label}/{name}/{env}"
    return Point(pid, env, "host" if env == PHYSICAL else "virtio-blk", (), run=run, parse=fio.parse,
                 headline="iops", meta={"point": name, "setup": label},
                 baseline=f"{label}/{name}/{PHYSICAL}" if env == VIRTUAL else None)


def blocks(raw: str, labels: list[str], unplaceable: str = "", made: int = 4) -> list[sweep.SweepBlock]:
    @contextmanager
    def place(label: str):
        yield None if label == unplaceable else {}
    names = NAMES
    return [sweep.SweepBlock(label,
                             fleet=FakeFleet(partial(FakeTestbed, label)), place=partial(place, label),
                             points=lambda _rec, _tb, label=label: [point(raw, label, n, e) for n in names
                                                                   for e in (PHYSICAL, VIRTUAL)][:made])
            for label in labels]


NAMES = ["seq", "rand"]
# the fake experiment's plan: blocks a, b and c, each point on the host and in the VM, twice
PLAN = Plan("fake", [Block(label, [PlannedPoint(n, e, 1) for n in NAMES for e in (PHYSICAL, VIRTUAL)])
                     for label in "abc"], 2)


def context(tmp_path, store: RunStore | None = None, plan: Plan = PLAN) -> RunContext:
    cfg = settings.load(None, ["repeat.count=2", "repeat.seed=5", "settle.max_wait_s=0.2", "settle.window_s=0.1",
                               f"state_dir={tmp_path / 'state'}"])
    return RunContext(cfg=cfg, testbed=None, store=store or RunStore(tmp_path, "run"), environment={"accel": "tcg"},
                      host=LocalHost(uri="test:///default"), planned=plan)


def test_blocks_in_order_points_paired_and_shuffled_every_fleet_down(tmp_path, fixture_text, monkeypatch):
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))   # a killed run's fleet, removed
    EVENTS.clear()
    ctx = context(tmp_path)
    ctx.store.update_manifest(experiment="fake")
    sweep.run(ctx, ctx.cfg, blocks(fixture_text("fio/host-randread-qd16.json"), ["a", "b"]), "the fake fleet")
    assert EVENTS[:2] == ["down stale", "up a"] and EVENTS[-1] == "down b"
    measured = [e for e in EVENTS if "/" in e]
    assert len(measured) == 16 and measured[:8] != sorted(measured[:8])        # block a first, shuffled
    assert all(m.startswith("a/") for m in measured[:8]) and all(m.startswith("b/") for m in measured[8:])
    ratios = [s.metadata for s in ctx.store.samples if s.metric == "ve_pe_ratio"]
    assert sorted(r["point_id"] for r in ratios) == ["a/rand/virtual", "a/seq/virtual", "b/rand/virtual", "b/seq/virtual"]
    assert all(r["baseline_point"] == r["point_id"].replace("virtual", "physical") for r in ratios)


def test_a_resumed_run_does_not_provision_a_finished_block_and_a_place_not_here_is_skipped(tmp_path, fixture_text,
                                                                                          monkeypatch):
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))
    raw = fixture_text("fio/host-randread-qd16.json")
    first = context(tmp_path / "first")
    first.store.update_manifest(experiment="fake")
    sweep.run(first, first.cfg, blocks(raw, ["a"]), "the fake fleet")
    EVENTS.clear()
    again = context(tmp_path / "again", RunStore.reopened(first.store.dir))
    sweep.run(again, again.cfg, blocks(raw, ["a", "b", "c"], unplaceable="c"), "the fake fleet")
    assert "up a" not in EVENTS and "up b" in EVENTS and "up c" not in EVENTS
    assert not [e for e in EVENTS if e.startswith("a/")] and len([e for e in EVENTS if e.startswith("b/")]) == 8
    rows = [json.loads(line) for line in (first.store.dir / "samples.jsonl").read_text().splitlines()]
    runs = [(r["point_id"], r["repeat"]) for r in rows if r["metric"] == "iops" and r["repeat"] != "all"]
    assert len(runs) == len(set(runs)) == 16


class LostTestbed(FakeTestbed):
    host_not_answering = None

    def up(self):
        EVENTS.append(f"up {self.label}")
        raise TestbedError(f"host of {self.label} lost")


def test_a_block_whose_fleet_does_not_come_up_is_recorded_failed_and_the_run_goes_on(tmp_path, fixture_text,
                                                                                    monkeypatch):
    """Its fleet torn down, the block in the manifest with why; the next block measured. A resume
    provisions it again, and once measured it is no longer failed."""
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))
    monkeypatch.setattr(sweep.nested_l1, "rebuilt_after_loss", lambda *a: None)   # no nested host to rebuild
    raw = fixture_text("fio/host-randread-qd16.json")
    EVENTS.clear()
    ctx = context(tmp_path)
    ctx.store.update_manifest(experiment="fake")
    three = blocks(raw, ["a", "b", "c"])
    three[1].fleet = FakeFleet(lambda: LostTestbed("b"))
    three[1].keep_fleet = False   # its own teardown after the block too: nothing left for it
    sweep.run(ctx, ctx.cfg, three, "the fake fleet")
    assert EVENTS.count("down b") == 1 and len([e for e in EVENTS if e.startswith("c/")]) == 8   # torn down once
    assert not [e for e in EVENTS if e.startswith("b/")]
    assert ctx.store.manifest["blocks_failed"] == {"b": "host of b lost"}
    assert ctx.store.manifest["blocks_done"] == ["a", "c"]
    EVENTS.clear()
    again = context(tmp_path / "again", RunStore.reopened(ctx.store.dir))
    sweep.run(again, again.cfg, blocks(raw, ["a", "b", "c"]), "the fake fleet")
    assert EVENTS.count("up b") == 1 and len([e for e in EVENTS if e.startswith("b/")]) == 8
    assert again.store.manifest["blocks_failed"] == {} and again.store.manifest["blocks_done"] == ["a", "c", "b"]


def test_a_run_with_a_block_that_did_not_come_up_teaches_no_costs(tmp_path, fixture_text, monkeypatch):
    """Its time lacks that block's points: learnt, it would make the next plan too short."""
    from harness.engine import runner
    from harness.measure import plan
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))
    monkeypatch.setattr(sweep.nested_l1, "rebuilt_after_loss", lambda *a: None)
    raw = fixture_text("fio/host-randread-qd16.json")
    two = blocks(raw, ["a", "b"])
    two[1].fleet = FakeFleet(lambda: LostTestbed("b"))
    fake = SimpleNamespace(name="fake", measures=lambda ctx: sweep.Sweep(ctx.cfg, two, "the fake fleet"))
    ctx = context(tmp_path)
    ctx.store.update_manifest(experiment="fake")
    the_plan = plan.Plan("fake", [plan.Block(b, [plan.PlannedPoint("p", "virtual", 1)]) for b in "ab"], repeats=2)
    costs = plan.Costs(tmp_path, "local")
    assert runner.measured(fake, ctx, the_plan, costs, learn_from_s=0.0) == "completed-with-failures"
    assert plan.Costs(tmp_path, "local").setup_s("fake")[1] == "none measured on this host yet"


class NoCluster(FakeTestbed):
    host_not_answering = None

    def __init__(self, label: str, error: Exception):
        super().__init__(label)
        self.error = error

    def up(self):
        raise self.error


def test_a_cluster_not_made_fails_its_block_and_a_refusal_ends_the_run(tmp_path, fixture_text, monkeypatch):
    from harness.resources.ceph.bootstrap import CephError, CephRefusal
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))
    monkeypatch.setattr(sweep.nested_l1, "rebuilt_after_loss", lambda *a: None)
    raw = fixture_text("fio/host-randread-qd16.json")
    ctx = context(tmp_path / "failed")
    ctx.store.update_manifest(experiment="fake")
    two = blocks(raw, ["a", "b"])
    two[0].fleet = FakeFleet(lambda: NoCluster("a", CephError("mon did not form a quorum in 60 s")))
    sweep.run(ctx, ctx.cfg, two, "the fake fleet")
    assert ctx.store.manifest["blocks_failed"] == {"a": "mon did not form a quorum in 60 s"}
    assert ctx.store.manifest["blocks_done"] == ["b"]
    ctx = context(tmp_path / "refused")
    ctx.store.update_manifest(experiment="fake")
    two = blocks(raw, ["a", "b"])
    two[0].fleet = FakeFleet(lambda: NoCluster("a", CephRefusal("ceph.osd_devices /dev/sda refused")))
    with pytest.raises(CephRefusal):
        sweep.run(ctx, ctx.cfg, two, "the fake fleet")
    assert "blocks_failed" not in ctx.store.manifest


class Counted:
    """A progress bar that only counts the point runs it is told of."""

    def __init__(self):
        self.total = 0

    def add(self, runs: int) -> None:
        self.total += runs

    def __getattr__(self, name):
        return lambda *a, **k: None


def test_the_engine_counts_the_plans_points_and_takes_off_those_a_block_did_not_make(tmp_path, fixture_text):
    """The progress bar's runs come from the plan, not from the experiment: a block that makes
    fewer points than planned (a filesystem this host lacks) has the rest taken off."""
    ctx = context(tmp_path)
    ctx.progress = Counted()
    ctx.store.update_manifest(experiment="fake")
    sweep.run(ctx, ctx.cfg, blocks(fixture_text("fio/host-randread-qd16.json"), ["a", "b"], made=2), "the fake fleet")
    assert ctx.progress.total == 2 * 2 * 2   # two points of four in each of two blocks, twice
    assert len(ctx.store.done()) == 8


def test_a_block_or_a_point_that_the_plan_lacks_is_a_bug_found_before_it_runs(tmp_path, fixture_text):
    raw = fixture_text("fio/host-randread-qd16.json")
    one = Plan("fake", [Block("a", [PlannedPoint("seq", PHYSICAL, 1), PlannedPoint("seq", VIRTUAL, 1)])], 2)
    ctx = context(tmp_path, plan=one)
    ctx.store.update_manifest(experiment="fake")
    EVENTS.clear()
    with pytest.raises(PlanDisagrees, match=r"makes \{'physical': 1, 'virtual': 1\} more point\(s\) in a than its plan"):
        sweep.run(ctx, ctx.cfg, blocks(raw, ["a"]), "the fake fleet")
    assert not [e for e in EVENTS if "/" in e] and EVENTS[-1] == "down a"   # nothing measured, the fleet down
    with pytest.raises(PlanDisagrees, match="a block 'z' that its plan does not have"):
        sweep.run(context(tmp_path / "z", plan=one), ctx.cfg, blocks(raw, ["z"]), "the fake fleet")


class Declaring:
    """A fake experiment as one declaration: two blocks, each a point on the host and in the VM and
    a point on the host only; the engine derives the plan and the points run from it."""
    name = "fake"

    def __init__(self, raw: str, kill_at: int = 0):
        self.raw, self.kill_at = raw, kill_at

    def declared(self) -> list[DeclaredBlock[str]]:
        return [DeclaredBlock(label, (Declared("seq", "seq", 1), Declared("rand", "rand", 1, envs=HOST_ONLY)))
                for label in "ab"]

    def plan(self, cfg) -> Plan:
        return plan_of(self.name, self.declared(), cfg.repeat.count)

    def measures(self, ctx: RunContext) -> sweep.Sweep:
        return sweep.Sweep(ctx.cfg, [sweep.SweepBlock(
            b.label, fleet=FakeFleet(partial(FakeTestbed, b.label)),
            points=lambda _rec, _tb, b=b: b.made(lambda d, env: point(self.raw, b.label, d.what, env, self.kill_at)))
            for b in self.declared()], "the fake fleet")


def test_a_declared_experiment_runs_its_plans_points_through_a_kill_and_a_resume(tmp_path, fixture_text, monkeypatch):
    """Planned, run, killed in its second block, resumed: every point the plan has is measured in
    each repeat, once, and nothing the plan lacks."""
    monkeypatch.setattr(sweep, "Testbed", lambda *a, **k: FakeTestbed("stale"))
    raw = fixture_text("fio/host-randread-qd16.json")
    cfg = context(tmp_path).cfg
    planned = Declaring(raw).plan(cfg)
    assert [(b.label, p.label, p.env) for b in planned.blocks for p in b.points] == [
        (b, name, env) for b in "ab" for name, env in (("seq", PHYSICAL), ("seq", VIRTUAL), ("rand", PHYSICAL))]
    EVENTS.clear()
    first = context(tmp_path / "first", plan=planned)
    first.store.update_manifest(experiment="fake")
    with pytest.raises(KeyboardInterrupt):
        sweep.run_declared(first, Declaring(raw, kill_at=9).measures(first))
    assert EVENTS[-1] == "down b" and len([e for e in EVENTS if "/" in e]) == 8
    again = context(tmp_path / "again", RunStore.reopened(first.store.dir), plan=planned)
    sweep.run_declared(again, Declaring(raw).measures(again))
    rows = [json.loads(line) for line in (first.store.dir / "samples.jsonl").read_text().splitlines()]
    runs = [(r["setup"], r["point"], r["env"], r["repeat"]) for r in rows
            if r["metric"] == "iops" and r["repeat"] != "all" and r["status"] == "ok"]
    assert len(runs) == len(set(runs)) == planned.point_runs
    assert sorted(set((s, p, e) for s, p, e, _ in runs)) == sorted(
        (b.label, p.label, p.env) for b in planned.blocks for p in b.points)


def test_a_scratch_device_is_made_for_its_block_and_removed_after_or_skipped_on_another_host(tmp_path, capsys):
    """A block declares its device (`Scratch`); the engine makes it, one fleet disk long, and removes it."""
    import os
    from types import SimpleNamespace

    from harness.config.core import Config
    from harness.hosts import LocalHost
    from harness.measure.sweep import Scratch
    cfg = Config.model_validate({"state_dir": str(tmp_path), "fleet": {"name": "sw-x", "disk_size_mib": 16}})
    loop = Scratch("loop", "passthrough", said="a loop device", elsewhere="name a device there")
    with loop.made(SimpleNamespace(host=LocalHost()), cfg, "backend passthrough-block") as where:
        dev = where["device"]
        assert dev.startswith("/dev/loop") and os.path.getsize(tmp_path / "vtb-sw-x-passthrough.scratch.raw") == 16 << 20
    assert not (tmp_path / "vtb-sw-x-passthrough.scratch.raw").exists()
    assert f"a loop device: {dev}" in capsys.readouterr().out

    class Elsewhere:
        is_this_machine, name = False, "h1"
    with loop.made(SimpleNamespace(host=Elsewhere()), cfg, "backend passthrough-block") as where:
        assert where is None
    said = " ".join(capsys.readouterr().out.split())
    assert ("backend passthrough-block skipped: it is made on this machine (loop), and the fleet is on the h1 host. "
            "Fix: name a device there") in said
