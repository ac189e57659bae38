"""queue-depth without a testbed: its declaration (a point per depth, on the host and in the VM), and
its summary from samples as the pipeline stores them: a curve that stops gaining, one that keeps
gaining, the share of the host at each depth, the plot."""
import pytest

from harness.common.schema import ConfigError
from harness.engine import settings
from harness.experiments import queue_depth as qd
from harness.results.samples import Sample


def test_a_point_per_depth_on_the_host_and_in_the_vm_of_each_backend():
    cfg = settings.load(None, ["queue_depth.iodepths=[16,1,4,4]", 'queue_depth.backends=["virtio-blk","nvme"]'])
    plan = qd.EXPERIMENT.plan(cfg)
    assert [b.label for b in plan.blocks] == ["backend virtio-blk", "backend nvme"]
    assert [(p.label, p.env) for p in plan.blocks[0].points] == [
        (f"randread-qd{d}", env) for d in (1, 4, 16) for env in ("physical", "virtual")]   # sorted, once each
    assert [p.job.iodepth for p in qd.EXPERIMENT.points(cfg)] == [1, 4, 16]
    assert plan.point_runs == 2 * 6 * cfg.repeat.count


def test_one_depth_is_no_curve_and_is_refused_with_the_field():
    with pytest.raises(ConfigError, match="queue_depth.iodepths"):
        settings.load(None, ["queue_depth.iodepths=[8]"])


def samples(curves: dict[str, dict[int, float]], block: str = "virtio-blk", repeats: int = 3) -> list[Sample]:
    out = []
    for backend, by_depth in curves.items():
        for depth, base in by_depth.items():
            for rep, jitter in enumerate((0.0, 0.01, -0.01)[:repeats]):
                meta = {"group": qd.GROUP, "point": f"randread-qd{depth}", "backend": backend, "repeat": rep,
                        "block": block, "env": "physical" if backend == "host" else "virtual", "host_quiet": True}
                out += [Sample("iops", base * (1 + jitter), "IOPS", meta),
                        Sample("lat_mean", 1e6 * depth / base * (1 - jitter), "us", meta)]
    return out


def test_each_curve_says_where_it_stops_gaining_and_its_share_of_the_host(tmp_path):
    by_env, host_of = qd.curves(samples({"host": {1: 1000, 4: 3000, 16: 6000}, "virtio-blk": {1: 500, 4: 1000, 16: 1000}}))
    assert sorted(by_env) == ["host", "virtio-blk"] and sorted(by_env["host"]) == [1, 4, 16]
    text = " ".join(qd.print_curves(by_env, host_of, accel="tcg").split())
    assert "host: kept gaining to QD16" in text
    assert "virtio-blk: no significant gain from QD4 to QD16" in text   # 1,000 -> 1,000
    assert "+100%" in text and "-50%" in text                      # QD4 over QD1; QD1 against the host
    png = qd.depth_curves(by_env, host_of, tmp_path / "queue-depth.png", title="t")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_curve_that_gains_again_deeper_says_so():
    by_env, _ = qd.curves(samples({"virtio-blk": {1: 500, 4: 1000, 16: 1000, 64: 2000}}))
    said = qd.stops_gaining(qd.steps_of(by_env, "virtio-blk"))
    assert said.startswith("no significant gain from QD4 to QD16") and "it gained again at QD64 (+100%" in said


def test_one_repeat_is_untested_not_a_knee_and_nothing_crashes(tmp_path):
    by_env, host_of = qd.curves(samples({"host": {1: 1000, 4: 3000}, "virtio-blk": {1: 500, 4: 400}}, repeats=1))
    said = " ".join(qd.print_curves(by_env, host_of, accel="tcg").split())
    assert "virtio-blk: kept gaining to QD4; untested at QD4 (fewer than two repeats that vary)" in said
    assert qd.depth_curves(by_env, host_of, tmp_path / "q.png", title="t").read_bytes()[:4] == b"\x89PNG"


def test_each_backend_is_against_the_host_of_its_own_block():
    two = samples({"host": {1: 1000, 4: 2000}, "virtio-blk": {1: 500, 4: 1000}}, block="virtio-blk") + samples(
        {"host": {1: 4000, 4: 8000}, "nvme": {1: 1000, 4: 2000}}, block="nvme")
    by_env, host_of = qd.curves(two)
    assert host_of == {"nvme": "host (nvme's block)", "virtio-blk": "host (virtio-blk's block)"}
    assert qd.steps_of(by_env, "nvme", host_of["nvme"])[0].share.percent().startswith("-75%")
    assert qd.steps_of(by_env, "virtio-blk", host_of["virtio-blk"])[0].share.percent().startswith("-50%")


def test_a_synchronous_engine_is_refused_with_the_field():
    with pytest.raises(ConfigError, match="queue_depth.ioengine"):
        settings.load(None, ["queue_depth.ioengine=psync"])
