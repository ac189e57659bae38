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


def test_a_mixed_pattern_is_fios_own_unified_figure(fixture_text):
    """vtb's job reports a mixed pattern as one figure (unified_rw_reporting): fio's, not a sum."""
    raw = fixture_text("fio/fio-3.33-randrw-unified.jsonplus.json")
    mixed = json.loads(raw)["jobs"][0]["mixed"]
    r = fio.parse(raw)
    assert (r.direction, r.iops, r.bw_kib_s) == ("mixed", mixed["iops"], mixed["bw"])
    assert r.lat_mean_us == pytest.approx(mixed["lat_ns"]["mean"] / 1000)
    assert r.as_run() == {"ioengine": "libaio", "direction": "mixed"}


def test_reads_and_writes_reported_apart_are_never_summed(fixture_text):
    """An output with reads and writes apart (recorded before vtb asked for unified reporting) is
    refused with both named, rather than returned as one sum."""
    with pytest.raises(fio.FioError, match=r"2 figures \(job read, job write\).*never summed"):
        fio.parse(fixture_text("fio/host-randrw-qd4.json"))


def test_every_percentile_is_kept_beside_the_latency_samples(fixture_text):
    r = fio.parse(fixture_text("fio/fio-3.33-randrw-unified.jsonplus.json"))
    kept = r.detail("lat_p99")["percentiles_us"]
    assert list(kept)[:3] == ["1", "5", "10"] and kept["99.999"] == r.percentiles_us[99.999]
    assert r.detail("iops") == {} and sum(r.bins_ns.values()) > 0


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


@pytest.mark.parametrize("name, figures", [("pkb-fio-2.1.4-sample.json", 5), ("pkb-fio-2.17-sample.json", 2),
                                           ("fio-3.33-two-stonewalled-jobs.jsonplus.json", 3)])
def test_several_jobs_are_never_summed_into_one_figure(fixture_text, name, figures):
    """PKB's fio 2.1.4 sample (five jobs one after another) once gave 2,636 "IOPS", their sum:
    vtb's one-job parser refuses it, naming the jobs; test_fio_output reads each apart."""
    with pytest.raises(fio.FioError, match=rf"fio reported {figures} figures .*never summed"):
        fio.parse(fixture_text(f"fio/{name}"))


def test_an_unknown_layout_names_the_fio_version():
    doc = {"fio version": "fio-1.50", "jobs": [{"jobname": "x", "error": 0, "read": {"iops": 1}, "write": {}}]}
    with pytest.raises(fio.FioError, match="fio-1.50"):
        fio.parse(json.dumps(doc))


def test_the_engine_fio_ran_is_read_from_its_output(fixture_text):
    """On an rbd image the runner gives the job librbd's engine over the job's libaio: the samples
    say which ran (recorded from a host slot of a hosts-mode Ceph run)."""
    r = fio.parse(fixture_text("fio/host-rbd-randread-qd16.json"))
    assert json.loads(fixture_text("fio/host-rbd-randread-qd16.json"))["global options"]["ioengine"] == "libaio"
    assert r.as_run() == {"ioengine": "rbd", "direction": "read"}
    assert fio.parse(fixture_text("fio/host-randread-qd16.json")).as_run() == {"ioengine": "libaio", "direction": "read"}


def test_a_preconditioned_run_measures_only_the_jobs_and_says_whether_each_was_steady(fixture_text):
    """The fill and the steady-state runs (vtb-fill, vtb-ss.<job>) are never points; each measured
    job says whether fio found it steady, after how long and by what criterion."""
    raw = fixture_text("fio/fio-3.33-preconditioned-two-jobs.json")
    doc = json.loads(raw[raw.find("{"):])
    assert [j["jobname"] for j in doc["jobs"]] == ["vtb-fill", "vtb-ss.qd1", "vtb-ss.mix", "qd1", "mix"]
    report = fio.parse_jobs(raw)
    assert [key for key, _, _ in report.facets()] == ["qd1/read", "mix/read", "mix/write"]
    meta = dict((key, m) for key, m, _ in report.facets())
    ss = {j["jobname"]: j for j in doc["jobs"]}
    assert meta["qd1/read"]["steady_state_reached"] is bool(ss["vtb-ss.qd1"]["steadystate"]["attained"])
    assert meta["mix/write"]["steady_state_after_s"] == ss["vtb-ss.mix"]["job_runtime"] / 1000
    assert meta["qd1/read"]["precondition_fill_mib"] == 16   # the whole 16 MiB slice, 1 MiB at a time
    assert report.window[1] - report.window[0] == pytest.approx(2.0, abs=0.1)   # the measured jobs only


def test_a_job_that_never_got_steady_is_flagged_in_the_tables():
    from harness.report.tables import unquiet_reasons
    meta = {"host_quiet": True, "steady_state_reached": False, "steady_state_criterion": "iops_slope:10%",
            "steady_state_after_s": 600.0}
    assert unquiet_reasons(meta) == ["measured before steady state (iops_slope:10% not met within 600 s)"]
    assert unquiet_reasons({**meta, "steady_state_reached": True}) == []


def test_a_job_file_direction_without_latency_keeps_its_other_figures_and_fails_no_other(fixture_text):
    """fio's basic-verify.fio, done within its ramp_time, has its reads and writes counted but not
    timed: they are points with their IOPS and bandwidth, and the next job's figures are whole."""
    report = fio.parse_jobs(fixture_text("fio/fio-3.33-verify-within-ramp.jsonplus.json"))
    figures = {key: set(r.metrics()) for key, _, r in report.facets()}
    assert figures == {"write-and-verify/read": {"iops", "bw"}, "write-and-verify/write": {"iops", "bw"},
                       "randread/read": {"iops", "bw", "lat_mean", "lat_p50", "lat_p99", "lat_p999"}}


def test_vtbs_own_job_without_latency_is_an_error_naming_why(fixture_text):
    doc = json.loads(fixture_text("fio/fio-3.33-verify-within-ramp.jsonplus.json"))
    untimed = {**doc["jobs"][0], "write": {**doc["jobs"][0]["write"], "total_ios": 0}}
    with pytest.raises(fio.FioError, match=r"no 50th, 99th, 99.9th percentile.*percentile_list is \[\].*ramp_time"):
        fio.parse(json.dumps({**doc, "jobs": [untimed]}))
