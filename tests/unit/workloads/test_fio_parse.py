import json

import pytest

from harness.workloads import fio


def test_guest_randread(fixture_text):
    raw = fixture_text("fio/guest-randread-qd16.json")
    r = fio.parse(raw)
    doc = json.loads(raw)["jobs"][0]["read"]
    assert r.iops == pytest.approx(doc["iops"])
    assert r.lat_mean_us == pytest.approx(doc["lat_ns"]["mean"] / 1000)
    assert r.lat_p99_us == pytest.approx(doc["clat_ns"]["percentile"]["99.000000"] / 1000)
    assert r.lat_p50_us <= r.lat_p99_us
    assert r.version.startswith("fio-3")


def test_host_randread(fixture_text):
    r = fio.parse(fixture_text("fio/host-randread-qd16.json"))
    assert r.iops > 0 and r.bw_kib_s > 0 and r.runtime_s > 0


def test_mixed_read_write_sums_both_directions(fixture_text):
    raw = fixture_text("fio/host-randrw-qd4.json")
    job = json.loads(raw)["jobs"][0]
    r = fio.parse(raw)
    assert r.iops == pytest.approx(job["read"]["iops"] + job["write"]["iops"])
    w = job["read"]["total_ios"], job["write"]["total_ios"]
    mean = (job["read"]["lat_ns"]["mean"] * w[0] + job["write"]["lat_ns"]["mean"] * w[1]) / sum(w) / 1000
    assert r.lat_mean_us == pytest.approx(mean)


def test_leading_warnings_are_tolerated(fixture_text):
    raw = "fio: some warning\n" + fixture_text("fio/host-randread-qd16.json")
    assert fio.parse(raw).iops > 0


@pytest.mark.parametrize("raw, msg", [("", "no JSON"), ("{not json", "not valid JSON")])
def test_garbage_is_an_error_not_a_number(raw, msg):
    with pytest.raises(fio.FioError, match=msg):
        fio.parse(raw)


def test_job_error_and_no_io_are_errors(fixture_text):
    doc = json.loads(fixture_text("fio/host-randread-qd16.json"))
    doc["jobs"][0]["error"] = 5
    with pytest.raises(fio.FioError, match="error 5"):
        fio.parse(json.dumps(doc))
    doc["jobs"][0]["error"] = 0
    doc["jobs"][0]["read"]["total_ios"] = 0
    with pytest.raises(fio.FioError, match="no I/O"):
        fio.parse(json.dumps(doc))


def test_fio_2_1_4_layout_is_read_in_microseconds(fixture_text):
    """PKB's recorded fio 2.1.4 output: usec units, no clat_ns, lat_ns or total_ios (I/O counts are
    iops x runtime). Five jobs, one direction each."""
    r = fio.parse(fixture_text("fio/pkb-fio-2.1.4-sample.json"))
    assert r.version == "fio-2.1.4"
    assert r.iops == 133 + 253 + 1610 + 317 + 323 and r.bw_kib_s == 68118 + 129836 + 6443 + 1269 + 1292
    ios_lat = [(707, 478737.47), (705, 250770.05), (9056, 617.69), (9047, 3146.50), (9059, 198058.86)]
    assert r.lat_mean_us == pytest.approx(sum(n * l for n, l in ios_lat) / sum(n for n, _ in ios_lat), rel=1e-3)
    assert r.lat_p99_us == 209920  # percentiles of the direction with the most I/O, already in us


def test_fio_2_17_layout_uses_its_total_ios(fixture_text):
    r = fio.parse(fixture_text("fio/pkb-fio-2.17-sample.json"))
    assert r.version == "fio-2.17"
    assert r.iops == pytest.approx(8086.673998 + 2457.017193)
    assert r.lat_mean_us == pytest.approx((80891 * 245.531122 + 24580 * 810.977136) / (80891 + 24580))
    assert r.lat_p99_us == 1352
    assert r.cpu_s == pytest.approx((1.539846 + 4.039596) / 100 * 10.003 + (0.739889 + 1.879718) / 100 * 10.004)


def test_an_unknown_layout_names_the_fio_version():
    doc = {"fio version": "fio-1.50", "jobs": [{"jobname": "x", "error": 0, "read": {"iops": 1}, "write": {}}]}
    with pytest.raises(fio.FioError, match="fio-1.50"):
        fio.parse(json.dumps(doc))


def test_the_engine_fio_ran_is_read_from_its_output(fixture_text):
    """On an rbd image the runner gives the job librbd's engine over the job's libaio: the samples
    say which ran (recorded from a host slot of a hosts-mode Ceph run)."""
    r = fio.parse(fixture_text("fio/host-rbd-randread-qd16.json"))
    assert json.loads(fixture_text("fio/host-rbd-randread-qd16.json"))["global options"]["ioengine"] == "libaio"
    assert r.as_run() == {"ioengine": "rbd"}
    assert fio.parse(fixture_text("fio/host-randread-qd16.json")).as_run() == {"ioengine": "libaio"}
