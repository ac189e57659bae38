"""A run's plan: its estimate from what this host has cost before, the costs a finished run
teaches, and the difference its repeats can resolve on this host's noise."""
from __future__ import annotations

import json

import pytest

from harness.engine import settings
from harness.experiments import registry
from harness.measure import plan
from harness.measure.plan import Block, Costs, Plan, PlannedPoint


def two_blocks() -> Plan:
    points = [PlannedPoint("p", "physical", 12), PlannedPoint("p", "virtual", 12)]
    return Plan("demo", [Block("one", points), Block("two", points)], repeats=3)


def test_without_costs_the_estimate_counts_tool_time_and_says_what_it_lacks(tmp_path):
    est = plan.estimate(two_blocks(), Costs(tmp_path, "local"))
    assert est.seconds == 2 * 2 * 3 * 12
    assert any("none measured" in n for n in est.notes) and any("overhead" in n for n in est.notes)
    text = plan.describe(two_blocks(), Costs(tmp_path, "local"))
    assert "2 block(s), 12 point runs" in text and "noise on this host: none measured yet" in text
    assert "each point), on host local\n" in text


def test_a_fresh_host_starts_from_the_development_machines_costs_says_so_and_its_own_replace_them(tmp_path):
    shipped = tmp_path / "development-costs.json"
    shipped.write_text(json.dumps({"local": {"setup_s": {"demo": [30.0]}, "overhead_s": {"physical/1": [2.0],
                                                                                        "virtual/1": [4.0]},
                                             "noise_cv": {"headline": [0.05]}}}))
    fresh = Costs(tmp_path / "results", "local", shipped)
    est = plan.estimate(two_blocks(), fresh)
    assert est.seconds == pytest.approx(2 * 30 + 2 * 3 * (12 + 2 + 12 + 4))
    assert est.notes[0] == ("the development machine's costs, shipped with vtb (2 cores, guests under TCG): this "
                            "host's own replace them as it runs")
    assert "noise on the development machine: repeats vary by a CV of 5%" in plan.describe(two_blocks(), fresh)
    assert not Costs(tmp_path / "results", "an-ssh-host", shipped).shipped   # no kind of it shipped
    fresh.learn("demo", 10.0, {"physical/1": [1.0]}, None)
    own = json.loads((tmp_path / "results" / "costs.json").read_text())["local"]
    assert own == {"setup_s": {"demo": [10.0]}, "overhead_s": {"demo:physical/1": [1.0], "physical/1": [1.0]}}
    again = Costs(tmp_path / "results", "local", shipped)
    assert not again.shipped and again.setup_s("demo") == (10.0, "measured")
    assert again.noise_cv() == 0.05 and again.noise_from() == "the development machine"   # none of its own yet


def test_an_experiment_not_run_here_starts_from_the_development_machines_figure_scaled_to_this_host(tmp_path):
    """A database's per-point set-up is its own: a fio experiment's figures here would hide it; the
    development machine's, scaled by how this host compares on the experiments both have run, do not."""
    shipped = tmp_path / "development-costs.json"
    shipped.write_text(json.dumps({"local": {
        "setup_s": {"iops": [20.0], "mysql": [60.0]},
        "overhead_s": {"iops:virtual/1": [4.0], "mysql:virtual/1": [40.0], "virtual/1": [4.0, 40.0]}}}))
    costs = Costs(tmp_path / "results", "local", shipped)
    costs.learn("iops", 1.0, {"virtual/1": [2.0]}, None)   # this host: twice as fast; its fleet was up already
    here = Costs(tmp_path / "results", "local", shipped)
    assert here.overhead_from("virtual", 1, "mysql") == (20.0, "the development machine's, scaled to this host's")
    assert here.setup_s("mysql") == (30.0, "the development machine's, scaled to this host's")
    assert here.overhead_from("virtual", 1, "iops") == (2.0, "measured")
    assert here.overhead_from("virtual", 1, "latency") == (2.0, "other experiments' on this host")
    est = plan.estimate(Plan("mysql", [Block("one", [PlannedPoint("p", "virtual", 10)])], repeats=2), here)
    assert est.seconds == pytest.approx(30 + 2 * (10 + 20))
    assert est.notes == ["block setup: the development machine's, scaled to this host's",
                         "per-point overhead of mysql: the development machine's, scaled to this host's (this "
                         "host's own replace it after its first run of it)"]


def test_a_plan_over_several_hosts_names_them_all_and_whose_costs_it_takes(tmp_path):
    text = plan.describe(two_blocks(), Costs(tmp_path, "nested0,nested1"))
    assert "on hosts nested0,nested1 (costs as measured on nested0)" in text


def test_a_finished_run_teaches_setup_overhead_and_noise_kept_per_host(tmp_path):
    rows = [{"point_id": f"p/{env}", "repeat": r, "status": "ok", "env": env, "metric": "iops", "headline": "iops",
             "scope": "slot", "value": 100 + 10 * r, "point_wall_s": 20.0} for env in ("physical", "virtual") for r in range(3)]
    setup, overheads, noise = plan.learnt_from(two_blocks(), rows, wall_s=300.0, blocks_run=2)
    assert setup == pytest.approx((300 - 6 * 20) / 2)
    assert overheads["physical/1"] == [pytest.approx(8.0)] and overheads["virtual"] == [pytest.approx(8.0)]
    assert noise == pytest.approx(10 / 110)
    costs = Costs(tmp_path, "nested,other")
    costs.learn("demo", setup, overheads, noise)
    again = Costs(tmp_path, "nested")
    assert again.setup_s("demo") == (pytest.approx(90.0), "measured")
    assert again.setup_s("other")[1].startswith("other experiments'")
    est = plan.estimate(two_blocks(), again)
    assert est.seconds == pytest.approx(2 * 90 + 12 * 20) and not est.notes
    assert Costs(tmp_path, "local").noise_cv() is None      # another host has none of these
    assert set(json.loads((tmp_path / "costs.json").read_text())) == {"nested"}


def test_a_run_that_waited_for_a_guest_teaches_no_setup(tmp_path):
    """A point measured again after its guest stopped answering waited some 90 s outside the
    points: as setup, the next plan of the experiment would be that much too long."""
    rows = [{"point_id": f"p/{env}", "repeat": r, "status": "ok", "env": env, "point_wall_s": 20.0,
             "retried_after": "fio on vm0 did not finish within 72 s" if (env, r) == ("virtual", 0) else ""}
            for env in ("physical", "virtual") for r in range(3)]
    setup, overheads, _ = plan.learnt_from(two_blocks(), rows, wall_s=400.0, blocks_run=2)
    assert setup is None and overheads["virtual/1"] == [pytest.approx(8.0)]


def test_the_difference_repeats_resolve_shrinks_with_repeats():
    assert plan.resolvable(0.1, 1) == float("inf")
    assert plan.resolvable(0.1, 3) > plan.resolvable(0.1, 10) > 0
    n = plan.repeats_for(0.1, 0.10)
    assert plan.resolvable(0.1, n) <= 0.10 < plan.resolvable(0.1, n - 1)
    assert plan.repeats_for(5.0, 0.01, cap=50) is None


def test_every_experiment_declares_a_plan_without_touching_the_host():
    cfg = settings.load(None, [])
    for name, experiment in registry().items():
        if name in ("fio-job", "replay"):   # they need a job file or a trace named
            continue
        p = experiment.plan(cfg)
        assert p.experiment == name and p.blocks and all(b.points for b in p.blocks), name
        assert p.point_runs == cfg.repeat.count * sum(len(b.points) for b in p.blocks)


def test_an_experiments_own_overhead_is_taken_over_another_experiments(tmp_path):
    """A database point's set-up is its own overhead: it does not stretch a fio experiment's estimate."""
    costs = Costs(tmp_path, "nested")
    costs.learn("mysql-raid", 60.0, {"virtual/1": [70.0], "virtual": [70.0]}, None)
    assert Costs(tmp_path, "nested").overhead_s("virtual", 1, "mysql-raid") == 70.0
    assert Costs(tmp_path, "nested").overhead_s("virtual", 1, "raid-levels") == 70.0   # none of its own: any
    costs = Costs(tmp_path, "nested")
    costs.learn("raid-levels", 60.0, {"virtual/1": [5.0], "virtual": [5.0]}, None)
    assert Costs(tmp_path, "nested").overhead_s("virtual", 1, "raid-levels") == 5.0
    assert Costs(tmp_path, "nested").overhead_s("virtual", 1, "mysql-raid") == 70.0


def test_points_that_end_by_request_count_are_timed_by_a_run_not_by_their_bound(tmp_path):
    from harness.workloads import fio
    bounded = fio.FioJob(rw="randread", bs="4k", iodepth=1, numjobs=1, direct=True, runtime_s=120, ramp_s=0, ios=2000)
    assert fio.tool_seconds(bounded) == 0 and fio.tool_seconds(bounded.model_copy(update={"ios": 0})) == 120
    counted = Plan("counted", [Block("one", [PlannedPoint("random", "physical", 0), PlannedPoint("zone", "physical", 2)])], 3)
    costs = Costs(tmp_path, "local")
    assert any("1 point(s) end when their requests are done" in n for n in plan.estimate(counted, costs).notes)
    rows = [{"point_id": f"{label}/physical", "repeat": r, "status": "ok", "env": "physical", "point_wall_s": wall}
            for label, wall in (("random", 9.0), ("zone", 5.0)) for r in range(3)]
    costs.learn("counted", *plan.learnt_from(counted, rows, wall_s=50.0, blocks_run=1), shared=not counted.untimed)
    est = plan.estimate(counted, Costs(tmp_path, "local"))
    assert est.seconds == pytest.approx(50.0) and not est.notes   # the run's own time, learnt
    assert Costs(tmp_path, "local").overhead_s("physical", 1) is None   # not every experiment's overhead
    fresh = Costs(tmp_path / "fresh", "local", tmp_path / "costs.json")   # a host that starts from these figures
    assert plan.estimate(counted, fresh).seconds == pytest.approx(50.0)
    assert not any("end when their requests are done" in n for n in plan.estimate(counted, fresh).notes)


def test_an_experiment_not_run_here_yet_takes_a_typical_experiments_overhead_and_says_so(tmp_path):
    """A database experiment's points carry its set-up: a mean with it would double a fio
    experiment's estimate, so the shared figure is a median."""
    costs = Costs(tmp_path, "nested")
    for experiment, overhead in (("raid-levels", 4.0), ("filesystems", 5.0), ("mysql-raid", 60.0)):
        costs.learn(experiment, 70.0, {"virtual/1": [overhead], "virtual": [overhead]}, None)
    assert costs.overhead_s("virtual", 1, "stripe-size") == pytest.approx(5.0)
    assert costs.overhead_s("virtual", 1, "mysql-raid") == pytest.approx(60.0)   # its own, once measured
    one = Plan("stripe-size", [Block("b", [PlannedPoint("p", "virtual", 10)])], repeats=1)
    assert any("per-point overhead: other experiments'" in n for n in plan.estimate(one, costs).notes)
