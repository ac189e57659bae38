"""ioping as a workload tool: its arguments from the job, its runner's real output (ioping 1.3 on
a loop device, recorded) parsed into each measured request's latency, and its QD1 points in
`harness run latency`."""
from pathlib import Path

import pytest

from harness.engine import settings
from harness.experiments import registry
from harness.workloads import ioping, qd1_tools

RAW = (Path(__file__).parents[2] / "fixtures" / "ioping" / "ioping-1.3-randread-runner.txt").read_text()


def test_the_recorded_run_gives_each_measured_requests_latency():
    r = ioping.parse(RAW)
    assert r.version == "ioping 1.3" and r.cpu_s == pytest.approx(0.02)
    assert len(r.latencies_us) == 198   # 200 requests, the first 2 warm-ups left out
    m = r.metrics()
    assert m["requests"] == (198.0, "requests")
    assert m["lat_mean"][1] == "us" and 590 < m["lat_mean"][0] < 610   # ioping's own avg: 600.019 us
    assert m["lat_p50"][0] <= m["lat_p95"][0] <= m["lat_p99"][0] <= m["lat_p999"][0] <= 1204.281   # its max


@pytest.mark.parametrize("raw,said", [("ioping 1.3\nvtb-runner-cpu-s: 0.0\n", "no JSON report"),
                                      ("ioping 1.3\n[{\"io\": {\"time\": 5, \"ignored\": true}}]\n", "no measured request"),
                                      ("[{\"io\": ", "no JSON report"), ("[{]", "does not parse")])
def test_an_output_without_measured_requests_is_an_error(raw, said):
    with pytest.raises(ValueError, match=said):
        ioping.parse(raw)


def test_arguments_follow_the_job_and_stay_in_the_slot():
    job = ioping.IopingJob(rw="write", bs="4k", runtime_s=5, interval_ms=0, work_mib=128)
    args = ioping.argv(job, size=64 << 20, offset=1 << 30)
    assert args[args.index("-S") + 1] == str(64 << 20) and args[args.index("-o") + 1] == str(1 << 30)
    assert {"-L", "-WWW", "-D", "-C", "-J"} <= set(args) and args[args.index("-i") + 1] == "0ms"
    assert args[args.index("-c") + 1] == str(ioping.MAX_REQUESTS + ioping.WARMUP)   # within a guest agent's output
    rand = ioping.argv(ioping.IopingJob(rw="randread"), size=1 << 30, offset=0)
    assert "-L" not in rand and "-WWW" not in rand and rand[rand.index("-S") + 1] == str(128 << 20)
    with pytest.raises(ioping.IopingError, match="smaller than one request"):
        ioping.argv(ioping.IopingJob(bs="1m"), size=4096, offset=0)


def test_an_rbd_image_is_refused_with_the_fix():
    with pytest.raises(ioping.IopingError, match="not an RBD image.*fio"):
        ioping.run(None, ioping.IopingJob(), locator="rbd:pool/image@/etc/ceph/x.conf", size=1 << 30)


def test_latency_measures_each_pattern_with_each_tool_named():
    assert "ioping" in qd1_tools()
    cfg = settings.load(None, ['latency.tools=["fio", "ioping"]', 'latency.patterns=["randread", "write"]'])
    points = registry()["latency"].points(cfg)
    assert [p.label for p in points] == ["randread-qd1", "write-qd1", "randread-qd1-ioping", "write-qd1-ioping"]
    probe = points[2]
    assert probe.tool is ioping.TOOL and probe.parse is ioping.parse and probe.job.rw == "randread"
    assert probe.job.runtime_s == cfg.latency.runtime_s + cfg.latency.ramp_s
    assert ioping.TOOL.tool_seconds(probe.job) == pytest.approx(probe.job.runtime_s + 0.02)


def test_its_job_is_recorded_in_declared_columns():
    from harness.experiments import catalog
    assert all(catalog().declared(k) for k in ioping.job_meta(ioping.IopingJob()))
