"""The measurement pipeline on real fio outputs (recorded), this machine's /proc, a real results
folder and libvirt's test driver (a real libvirt connection with one running domain, "test")."""
from __future__ import annotations

import json
import random
from functools import partial

import pytest

import harness.measure.pipeline as pipeline_mod
from harness.config.core import Config
from harness.hosts import LocalHost
from harness.measure.pipeline import PHYSICAL, VIRTUAL, Pipeline, Point, block_rng, schedule
from harness.results.outputs import Output
from harness.results.store import RunStore
from harness.workloads import fio

URI = "test:///default"


def pipeline(tmp_path, **repeat) -> Pipeline:
    cfg = Config.model_validate({"repeat": {"count": 3, "seed": 7, **repeat},
                                 "settle": {"max_wait_s": 0.2, "window_s": 0.1}})
    return Pipeline(store=RunStore(tmp_path, "run"), repeat=cfg.repeat, settle=cfg.settle, seed=7, host=LocalHost(),
                    uri=URI, quiet_prefixes=("test",), base_meta={"run_id": "run", "experiment": "unit", "accel": "tcg"})


def fio_point(pid: str, env: str, raw: str, log: list, vms=(), baseline=None, scale=1.0) -> Point:
    def run():
        log.append(pid)
        doc = json.loads(raw)
        for job in doc["jobs"]:
            job["read"]["iops"] *= scale
        return [Output("slot0", json.dumps(doc))]
    return Point(pid, env, "host" if env == PHYSICAL else "virtio-blk", tuple(vms), run=run, parse=fio.parse,
                 headline="iops", meta={"point": pid}, baseline=baseline)


def test_schedule_is_seeded_shuffled_and_never_repeats_the_last_point():
    ids = ["a", "b", "c", "d"]
    assert schedule(ids, random.Random(1), None) == schedule(ids, random.Random(1), None)
    for seed in range(50):
        order = schedule(ids, random.Random(seed), "a")
        assert sorted(order) == ids and order[0] != "a"


def test_rounds_interleave_points_and_every_sample_carries_conditions(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path)
    points = [fio_point("phys", PHYSICAL, raw, log), fio_point("virt", VIRTUAL, raw, log, baseline="phys", scale=0.5)]
    p.measure(points)
    assert sorted(log) == ["phys"] * 3 + ["virt"] * 3
    assert all(a != b for a, b in zip(log, log[1:]))  # never the same point twice in a row
    rows = [s.metadata for s in p.store.samples if s.metadata.get("repeat") != "all"]
    for m in rows:
        for key in ("host_busy_pct", "host_steal_pct", "qemu_cpu_s", "daemon_cpu_s", "harness_cpu_s",
                    "settle_wait_s", "settle_timed_out", "host_quiet", "seed", "round_order", "accel", "raw"):
            assert key in m, key
        assert m["seed"] == 7
    assert sorted({m["repeat"] for m in rows}) == [0, 1, 2]
    (ratio,) = [s for s in p.store.samples if s.metric == "ve_pe_ratio"]
    assert ratio.value == pytest.approx(0.5, rel=1e-6) and ratio.metadata["n_virtual"] == 3
    assert {(m["headline"], m["better"]) for m in rows} == {("iops", "higher")}  # what reports read
    assert (p.store.dir / "consoles" / "test.log").exists()  # every fleet guest's console stays with the run
    raws = sorted(x.relative_to(p.store.dir).as_posix() for x in (p.store.dir / "raw").rglob("*.json"))
    assert raws[:3] == ["raw/phys/slot0.json", "raw/phys/slot0.r1.json", "raw/phys/slot0.r2.json"]


def test_a_failed_point_is_recorded_not_repeated_and_others_go_on(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []

    def broken():
        log.append("broken")
        return [Output("slot0", "fio: no JSON here")]
    p = pipeline(tmp_path)
    bad = Point("bad", PHYSICAL, "host", (), run=broken, parse=fio.parse, headline="iops", meta={})
    p.measure([bad, fio_point("good", PHYSICAL, raw, log)])
    assert log.count("broken") == 1 and log.count("good") == 3
    (failed,) = [s for s in p.store.samples if s.status == "failed"]
    assert "no JSON" in failed.error and failed.metadata["raw"] == "raw/bad/slot0.json"  # the bad output is kept


def test_idle_fleet_vms_are_suspended_during_a_point(tmp_path, fixture_text, monkeypatch):
    from harness.libvirt import pausing
    monkeypatch.setattr(pausing, "_ours", lambda dom: True)   # the test driver's domain has no owner record
    raw = fixture_text("fio/host-randread-qd16.json")
    p = pipeline(tmp_path, count=1)
    p.measure([Point("phys", PHYSICAL, "host", (), run=lambda: [Output("slot0", raw)], parse=fio.parse,
                     headline="iops", meta={})])
    (s,) = [x for x in p.store.samples if x.metric == "iops"]
    assert s.metadata["suspended_vms"] == 1  # the test driver's running domain "test" takes no part


def test_adaptive_adds_rounds_only_for_points_not_yet_tight(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path, count=2, adaptive=True, max_count=4, target_rel_ci=0.5)
    p.measure([fio_point("steady", PHYSICAL, raw, log)])
    assert log.count("steady") == 2  # identical values: the CI is zero after the minimum


def test_a_point_whose_guest_was_lost_and_restarted_is_measured_again_once(tmp_path, fixture_text, monkeypatch):
    from harness.libvirt.agent import AgentError
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path, count=1)
    monkeypatch.setattr(p, "_check_guests", lambda conn, vms: ("", False))
    monkeypatch.setattr(p, "_recover", lambda conn, vms, force=False: ("\ntest restarted", True))
    losses = {"flaky": 1, "lost": 2}

    def run(pid):
        log.append(pid)
        if losses[pid]:
            losses[pid] -= 1
            raise AgentError("test: guest agent guest-exec-status failed: not responding")
        return [Output("test", raw)]
    for pid in losses:
        p.measure([Point(pid, VIRTUAL, "virtio-blk", ("test",), run=lambda pid=pid: run(pid), parse=fio.parse,
                         headline="iops", meta={})])
    assert log == ["flaky", "flaky", "lost", "lost"]  # one more attempt each, never a third
    flaky = [s for s in p.store.samples if s.metadata["point_id"] == "flaky"]
    assert flaky and all(s.status == "ok" and "not responding" in s.metadata["retried_after"] for s in flaky)
    (lost,) = [s for s in p.store.samples if s.metadata["point_id"] == "lost"]
    assert lost.status == "failed" and lost.metadata["retried_after"] and "test restarted" in lost.error


def test_a_point_that_timed_out_on_a_stuck_guest_is_measured_again_after_its_restart(tmp_path, fixture_text,
                                                                                      monkeypatch):
    """fio past its runtime in a guest whose agent still answers: the check before every point
    (a direct read on each disk) runs at once, restarts the stuck guest, and the point runs again."""
    raw, log, checks = fixture_text("fio/host-randread-qd16.json"), [], []
    p = pipeline(tmp_path, count=1)
    stuck = {"test": False}

    def check(conn, vms):
        checks.append(vms)
        if stuck["test"]:
            stuck["test"] = False
            return "test: a disk did not complete a read\ntest restarted", True
        return "", False
    monkeypatch.setattr(p, "_check_guests", check)

    def run():
        log.append("run")
        if len(log) == 1:
            stuck["test"] = True
            raise fio.FioTimeout("fio on test did not finish within 62 s; killed it")
        return [Output("test", raw)]
    p.measure([Point("stuck", VIRTUAL, "virtio-blk", ("test",), run=run, parse=fio.parse, headline="iops", meta={})])
    assert log == ["run", "run"] and len(checks) == 3   # before, after the timeout, before the retry
    (s,) = [x for x in p.store.samples if x.metric == "iops"]
    assert s.status == "ok" and "did not finish" in s.metadata["retried_after"] and "restarted" in s.metadata["retried_after"]


def test_an_observer_is_given_fios_measured_window_on_this_machines_clock(tmp_path, fixture_text):
    import contextlib
    raw, seen = fixture_text("fio/host-randread-qd16.json"), []
    window = fio.parse(raw).window

    @contextlib.contextmanager
    def observe():
        yield lambda w: seen.append(w) or {"observed_for": "this point"}
    p = pipeline(tmp_path, count=1)
    p.measure([Point("phys", PHYSICAL, "host", (), run=lambda: [Output("slot0", raw, clock_offset_s=2.0)],
                     parse=fio.parse, headline="iops", meta={}, observe=observe)])
    assert seen == [(window[0] - 2.0, window[1] - 2.0)]
    assert all(s.metadata["observed_for"] == "this point" for s in p.store.samples if s.metadata.get("repeat") == 0)


def test_samples_name_the_engine_fio_ran_not_the_one_the_job_asked_for(tmp_path, fixture_text):
    raw = fixture_text("fio/host-rbd-randread-qd16.json")
    p = pipeline(tmp_path, count=1)
    point = Point("phys", PHYSICAL, "host", (), run=lambda: [Output("slot0", raw)], parse=fio.parse,
                  headline="iops", meta={"point": "phys", "ioengine": "libaio"})
    p.measure([point])
    assert {s.metadata["ioengine"] for s in p.store.samples if s.metric == "iops"} == {"rbd"}


def losing_guest(p: Pipeline, monkeypatch, raw: str, losses: int, log: list) -> Point:
    """A VM point whose guest stops answering its first `losses` times and cannot be restarted."""
    from harness.libvirt.agent import AgentError
    left = [losses]

    def lose(conns, vms, force=False):
        p.broken, p.guest_lost = "test stopped answering and could not be restarted (gone)", True
        return "\ntest: could not be restarted", False
    monkeypatch.setattr(p, "_check_guests", lambda conn, vms: ("", False))
    monkeypatch.setattr(p, "_recover", lose)

    def run():
        log.append("vm")
        if left[0]:
            left[0] -= 1
            raise AgentError("test: guest agent guest-exec-status failed: not responding")
        return [Output("test", raw)]
    return Point("vm", VIRTUAL, "virtio-blk", ("test",), run=run, parse=fio.parse, headline="iops", meta={})


def test_a_guest_that_cannot_be_restarted_gets_a_new_fleet_once_and_the_block_goes_on(tmp_path, fixture_text,
                                                                                       monkeypatch):
    """The block's fleet is built anew (once), the point that lost its guest is measured again at
    once on it and the rest of the block after it, each sample saying why; a second loss in the
    same block fails the rest, as without a rebuild."""
    raw, log, rebuilds = fixture_text("fio/host-randread-qd16.json"), [], []
    p = pipeline(tmp_path, count=3)
    points = [losing_guest(p, monkeypatch, raw, 1, log), fio_point("host", PHYSICAL, raw, log)]
    p.measure(points, {"fleet": "old"}, rebuild=lambda: rebuilds.append(1) or {"fleet": "new"})
    assert rebuilds == [1]
    vm = {(s.metadata["repeat"], s.status) for s in p.store.samples if s.metadata["point_id"] == "vm"}
    assert vm == {(0, "ok"), (1, "ok"), (2, "ok")}   # the lost repeat measured again at once, on the new fleet
    again = [s for s in p.store.samples if s.metadata["point_id"] == "vm" and s.metadata["repeat"] == 0]
    assert again and all("could not be restarted" in s.metadata["retried_after"] for s in again)
    after = [s for s in p.store.samples if s.metadata.get("fleet") == "new"]
    assert after and all("could not be restarted" in s.metadata["fleet_rebuilt_after"] for s in after)


@pytest.mark.parametrize("losses, expected", [(1, {("vm", "ok"), ("host", "ok")}),
                                               (2, {("vm", "failed"), ("host", "failed")})])
def test_in_a_run_of_one_repeat_the_lost_point_is_measured_on_the_new_fleet_and_a_second_loss_fails_the_block(
        losses, expected, tmp_path, fixture_text, monkeypatch):
    """With one repeat there is no later round: the point whose guest was lost is measured again at
    once on the rebuilt fleet (its samples say why). When it loses its guest there too, no second
    rebuild: the point and the rest of the block are failed with the reason."""
    raw, rebuilds = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path, count=1)
    vm = losing_guest(p, monkeypatch, raw, losses, [])
    monkeypatch.setattr(pipeline_mod, "schedule", lambda todo, rng, last: ["vm", "host"])
    p.measure([vm, fio_point("host", PHYSICAL, raw, [])], {"fleet": "old"},
              rebuild=lambda: rebuilds.append(1) or {"fleet": "new"})
    assert rebuilds == [1]
    got = {(s.metadata["point_id"], s.status) for s in p.store.samples if s.metric == "iops"}
    assert got == expected, got


def job_file_point(raw: str, log: list, pid: str, env: str, baseline=None) -> Point:
    """A point whose run is a recorded job file's report (a point per job and direction)."""
    def run():
        log.append(pid)
        return [Output("vm0", raw)]
    return Point(pid, env, "host" if env == PHYSICAL else "virtio-blk", (), run=run,
                 parse=fio.parse_jobs, headline="iops", meta={"group": "fio-job", "point": "two"}, baseline=baseline)


def test_a_job_file_run_is_a_point_per_job_and_direction_with_a_ratio_each(tmp_path, fixture_text):
    """A job file of two stonewalled jobs (QD1 random read; a 70/30 mix): one run per repeat, three
    facets (qd1/read, mix/read, mix/write), each with its own samples, its own VE/PE ratio and its
    latency distribution; nothing summed across them."""
    raw, log = fixture_text("fio/fio-3.33-two-stonewalled-jobs.jsonplus.json"), []
    doc = json.loads(raw)
    point = partial(job_file_point, raw, log)
    p = pipeline(tmp_path, count=2)
    p.measure([point("pe", PHYSICAL), point("ve", VIRTUAL, baseline="pe")])
    assert sorted(log) == ["pe", "pe", "ve", "ve"]   # one run per repeat, not one per facet
    iops = {(s.metadata["point_id"], s.metadata["direction"]): s.value for s in p.store.samples
            if s.metric == "iops" and s.metadata["repeat"] == 0}
    assert iops == {("pe#qd1-randread/read", "read"): doc["jobs"][0]["read"]["iops"],
                    ("pe#oltp-70-30/read", "read"): doc["jobs"][1]["read"]["iops"],
                    ("pe#oltp-70-30/write", "write"): doc["jobs"][1]["write"]["iops"],
                    ("ve#qd1-randread/read", "read"): doc["jobs"][0]["read"]["iops"],
                    ("ve#oltp-70-30/read", "read"): doc["jobs"][1]["read"]["iops"],
                    ("ve#oltp-70-30/write", "write"): doc["jobs"][1]["write"]["iops"]}
    ratios = {s.metadata["point"]: (s.value, s.metadata["baseline_point"]) for s in p.store.samples
              if s.metric == "ve_pe_ratio"}
    assert ratios == {"qd1-randread/read": (1.0, "pe#qd1-randread/read"), "oltp-70-30/read": (1.0, "pe#oltp-70-30/read"),
                      "oltp-70-30/write": (1.0, "pe#oltp-70-30/write")}
    p99 = next(s for s in p.store.samples if s.metric == "lat_p99" and s.metadata["point"] == "oltp-70-30/write")
    assert p99.metadata["job"] == "oltp-70-30" and p99.metadata["percentiles_us"]["99.999"] == \
        doc["jobs"][1]["write"]["clat_ns"]["percentile"]["99.999000"] / 1000

    from harness.report import percentile_plot
    curves = percentile_plot.curves(p.store.samples, "fio-job")
    assert set(curves) == {"qd1-randread/read", "oltp-70-30/read", "oltp-70-30/write"}
    assert set(curves["oltp-70-30/write"]) == {"host", "virtio-blk"} and len(curves["oltp-70-30/write"]["host"]) == 18
    png = percentile_plot.plot(p.store.samples, tmp_path / "pct.png", group="fio-job", title="fio-job")
    assert png.stat().st_size > 10_000


def test_seed_0_shuffles_the_physical_point_first():
    """test_nested_raid's killed run relies on it: its host points come at once."""
    ids = ["physical-n2", "virtual-n2"]
    assert schedule(ids, block_rng(0, ids), None)[0] == "physical-n2"


def test_a_points_key_is_what_decides_its_result_not_what_one_run_adds(tmp_path, fixture_text):
    """The same point on the same setup has one key in every run; another setup, accelerator or
    workload setting gives another."""
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    point = fio_point("phys", PHYSICAL, raw, log)
    one, two = pipeline(tmp_path / "a"), pipeline(tmp_path / "b")
    two.base_meta = {**two.base_meta, "run_id": "another run"}
    one.testbed_meta, two.testbed_meta = {"fleet_vms": 2, "vm_start": "restored"}, {"fleet_vms": 2, "vm_start": "booted"}
    assert one.point_key(point) == two.point_key(point)
    two.base_meta = {**two.base_meta, "accel": "kvm"}
    assert one.point_key(point) != two.point_key(point)
    other = fio_point("phys", PHYSICAL, raw, log)
    assert one.point_key(point) != one.point_key(Point(**{**other.__dict__, "meta": {"point": "phys", "bs": 8192}}))
    one.measure([point])
    assert {s.metadata["point_key"] for s in one.store.samples} == {one.point_key(point)}


# --- a resumed run ---------------------------------------------------------------------
def points(raw: str, log: list, stop_at: int | None = None):
    """Two pairs of points; with `stop_at`, the run is interrupted (Ctrl-C) as that point run starts."""
    made = [fio_point("a-host", PHYSICAL, raw, log), fio_point("a-vm", VIRTUAL, raw, log, baseline="a-host", scale=0.5),
            fio_point("b-host", PHYSICAL, raw, log), fio_point("b-vm", VIRTUAL, raw, log, baseline="b-host", scale=0.8)]
    if stop_at is None:
        return made

    def interrupting(p):
        def run():
            if len(log) == stop_at:
                log.append(p.id)
                raise KeyboardInterrupt
            return p.run()
        return type(p)(**{**p.__dict__, "run": run})
    return [interrupting(p) for p in made]


def test_a_resumed_run_measures_what_is_left_in_the_original_order_and_nothing_twice(tmp_path, fixture_text):
    raw = fixture_text("fio/host-randread-qd16.json")
    whole: list = []
    pipeline(tmp_path / "whole").measure(points(raw, whole))

    cut: list = []
    first = pipeline(tmp_path / "cut")
    first.store.update_manifest(seed=7)
    with pytest.raises(KeyboardInterrupt):
        first.measure(points(raw, cut, stop_at=5))
    assert len(first.store.done()) == 5          # the interrupted point run left no sample
    folder = first.store.dir
    rest: list = []
    again = pipeline(tmp_path / "unused")
    again.store = RunStore.reopened(folder)
    again.measure(points(raw, rest))
    assert cut[:-1] + rest == whole               # the same rounds, in the same order, each run once
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    measured = [(r["point_id"], r["repeat"]) for r in rows if r["metric"] == "iops" and r["repeat"] != "all"]
    assert len(measured) == len(set(measured)) == 12
    ratios = [r for r in rows if r["metric"] == "ve_pe_ratio"]
    assert sorted(r["point_id"] for r in ratios) == ["a-vm", "b-vm"] and {r["n_virtual"] for r in ratios} == {3}


def test_a_reopened_store_leaves_out_failed_samples_and_a_new_ratio_replaces_the_old(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path)
    p.store.update_manifest(seed=7)
    p.measure(points(raw, log)[:2])
    rows = [json.loads(line) for line in (p.store.dir / "samples.jsonl").read_text().splitlines()]
    rows[0] = {**rows[0], "status": "failed", "value": None}
    (p.store.dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = RunStore.reopened(p.store.dir)
    assert len(store.samples) == len(rows) - 1
    (ratio,) = [s for s in store.samples if s.metric == "ve_pe_ratio"]
    store.add([ratio])
    assert [s.metric for s in store.samples].count("ve_pe_ratio") == 1


def noisy_point(pid: str, env: str, raw: str, log: list, factors: list[float], baseline=None) -> Point:
    """A point whose repeats give the recorded IOPS times each factor in turn."""
    def run():
        doc = json.loads(raw)
        doc["jobs"][0]["read"]["iops"] *= factors[log.count(pid) % len(factors)]
        log.append(pid)
        return [Output("slot0", json.dumps(doc))]
    return Point(pid, env, "host" if env == PHYSICAL else "virtio-blk", (), run=run, parse=fio.parse,
                 headline="iops", meta={"point": pid}, baseline=baseline)


def test_precision_adds_rounds_until_the_ratio_interval_is_narrow_enough(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path, count=3, max_count=10, precision=0.10)
    p.measure([noisy_point("phys", PHYSICAL, raw, log, [1.0, 1.1, 0.9]),
               noisy_point("virt", VIRTUAL, raw, log, [0.5, 0.6, 0.45, 0.55], baseline="phys")])
    (ratio,) = [s for s in p.store.samples if s.metric == "ve_pe_ratio"]
    m = ratio.metadata
    assert 3 < m["n_virtual"] < 10 and m["n_virtual"] == m["n_physical"]      # rounds added to both sides
    assert m["precision_met"] and m["ratio_ci_rel"] <= 0.10 and not m["budget_ended_first"]
    assert p.ratio_widths(Point(**{**noisy_point("virt", VIRTUAL, raw, [], [1]).__dict__, "baseline": "phys"}))["virt"] \
        == pytest.approx(m["ratio_ci_rel"], abs=1e-4)


def test_a_spent_budget_adds_no_round_and_the_ratio_says_it_ended_first(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []
    p = pipeline(tmp_path, count=3, max_count=10, precision=0.01, budget_s=0.001)
    p.measure([noisy_point("phys", PHYSICAL, raw, log, [1.0, 1.1, 0.9]),
               noisy_point("virt", VIRTUAL, raw, log, [0.5, 0.6, 0.45], baseline="phys")])
    (ratio,) = [s for s in p.store.samples if s.metric == "ve_pe_ratio"]
    assert ratio.metadata["n_virtual"] == 3 and not ratio.metadata["precision_met"]
    assert ratio.metadata["budget_ended_first"] and len(log) == 6


def test_a_resumed_job_file_run_takes_each_facets_ratio_from_the_samples_kept(tmp_path, fixture_text):
    """Every repeat measured before the stop: the resumed run measures nothing and still gives each
    facet (job and direction) its ratio, named as the first run would have."""
    raw, log = fixture_text("fio/fio-3.33-two-stonewalled-jobs.jsonplus.json"), []
    point = partial(job_file_point, raw, log)
    first = pipeline(tmp_path / "first", count=2)
    first.store.update_manifest(seed=7)
    first.measure([point("pe", PHYSICAL), point("ve", VIRTUAL, baseline="pe")])
    again = pipeline(tmp_path / "again", count=2)
    again.store = RunStore.reopened(first.store.dir)
    log.clear()
    again.measure([point("pe", PHYSICAL), point("ve", VIRTUAL, baseline="pe")])
    assert log == []
    ratios = {s.metadata["point"]: s.metadata["baseline_point"] for s in again.store.samples if s.metric == "ve_pe_ratio"}
    assert ratios == {"qd1-randread/read": "pe#qd1-randread/read", "oltp-70-30/read": "pe#oltp-70-30/read",
                      "oltp-70-30/write": "pe#oltp-70-30/write"}


def test_with_a_precision_a_pair_whose_baseline_failed_gets_no_added_rounds(tmp_path, fixture_text):
    raw, log = fixture_text("fio/host-randread-qd16.json"), []

    def broken():
        log.append("phys")
        return [Output("slot0", "fio: no JSON here")]
    p = pipeline(tmp_path, count=3, max_count=10, precision=0.01)
    p.measure([Point("phys", PHYSICAL, "host", (), run=broken, parse=fio.parse, headline="iops", meta={}),
               noisy_point("virt", VIRTUAL, raw, log, [0.5, 0.6, 0.45], baseline="phys")])
    assert log.count("phys") == 1 and log.count("virt") == 3
