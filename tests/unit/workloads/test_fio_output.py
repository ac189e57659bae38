"""fio's report per job and per direction, on recorded real outputs of fio 2.1.4 and 2.17 (PKB's)
and fio 3.33 (json+, recorded here: tests/fixtures/fio/*.fio beside them say how)."""
import json

import pytest

from harness.results.metrics import PERCENTILES
from harness.workloads import fio_output
from harness.workloads.fio_output import merged_percentiles, read

JSONPLUS = ["fio-3.33-two-stonewalled-jobs.jsonplus.json", "fio-3.33-psync-fsync.jsonplus.json",
            "fio-3.33-numjobs2-group.jsonplus.json", "fio-3.33-randrw-unified.jsonplus.json"]


def test_fio_2_1_4_five_jobs_are_five_jobs_each_in_its_direction(fixture_text):
    """PKB's fio 2.1.4 sample (microseconds, no total_ios): five jobs run one after another. Each
    keeps its own figures, as fio's report gives them; nothing is summed across them."""
    report = read(fixture_text("fio/pkb-fio-2.1.4-sample.json"))
    assert report.version == "fio-2.1.4"
    got = [(j.name, [(f.direction, f.iops, f.bw_kib_s) for f in j.directions]) for j in report.jobs]
    assert got == [("sequential_write", [("write", 133, 68118)]), ("sequential_read", [("read", 253, 129836)]),
                   ("random_write_test", [("write", 1610, 6443)]), ("random_read_test", [("read", 317, 1269)]),
                   ("random_read_test_parallel", [("read", 323, 1292)])]
    means = [f.lat_mean_us for j in report.jobs for f in j.directions]
    assert means == pytest.approx([478737.47, 250770.05, 617.69, 3146.50, 198058.86], rel=1e-6)
    assert [f.ios for j in report.jobs for f in j.directions] == [707, 705, 9056, 9047, 9059]   # iops x runtime
    assert report.jobs[4].directions[0].percentiles_us[99.0] == 209920   # already microseconds


def test_fio_2_17_a_read_job_and_a_write_job_stay_apart(fixture_text):
    raw = fixture_text("fio/pkb-fio-2.17-sample.json")
    doc = json.loads(raw)["jobs"]
    report = read(raw)
    assert report.version == "fio-2.17" and len(report.jobs) == 2
    r, w = report.jobs[0].directions[0], report.jobs[1].directions[0]
    assert (r.direction, r.iops, r.ios) == ("read", doc[0]["read"]["iops"], 80891)
    assert (w.direction, w.iops, w.ios) == ("write", doc[1]["write"]["iops"], 24580)
    assert r.lat_mean_us == pytest.approx(245.531122) and w.lat_mean_us == pytest.approx(810.977136)
    assert r.lat_sd_us == pytest.approx(398.107636)   # already microseconds (device-profile's spread)
    assert report.jobs[0].cpu_s == pytest.approx((1.539846 + 4.039596) / 100 * 10.003)


def test_fio_3_two_stonewalled_jobs_each_direction_as_fio_reports_it(fixture_text):
    """A QD1 random read, then (stonewall) a 70/30 random mix at QD32: the mix's reads and writes
    apart, in microseconds from fio's nanoseconds, with the whole percentile list asked for."""
    raw = fixture_text("fio/fio-3.33-two-stonewalled-jobs.jsonplus.json")
    doc = json.loads(raw)["jobs"]
    qd1, mix = read(raw).jobs
    assert (qd1.name, qd1.group, [f.direction for f in qd1.directions]) == ("qd1-randread", 0, ["read"])
    assert (mix.name, mix.group, [f.direction for f in mix.directions]) == ("oltp-70-30", 1, ["read", "write"])
    for job, src in ((qd1, doc[0]), (mix, doc[1])):
        for f in job.directions:
            d = src[f.direction]
            assert (f.iops, f.bw_kib_s, f.ios) == (d["iops"], d["bw"], d["total_ios"])
            assert f.lat_mean_us == d["lat_ns"]["mean"] / 1000 and f.clat_mean_us == d["clat_ns"]["mean"] / 1000
            assert sorted(f.percentiles_us) == sorted(PERCENTILES)
            assert f.percentiles_us[99.9] == d["clat_ns"]["percentile"]["99.900000"] / 1000
    assert mix.direction("write").percentiles_us[99.999] == doc[1]["write"]["clat_ns"]["percentile"]["99.999000"] / 1000


def test_a_psync_job_with_fsync_has_its_sync_figures(fixture_text):
    raw = fixture_text("fio/fio-3.33-psync-fsync.jsonplus.json")
    (job,) = read(raw).jobs
    sync = json.loads(raw)["jobs"][0]["sync"]
    assert [f.direction for f in job.directions] == ["write", "sync"] and job.engine == "psync"
    s = job.direction("sync")
    assert (s.ios, s.iops, s.bw_kib_s, s.clat_mean_us) == (sync["total_ios"], None, None, None)
    assert s.lat_mean_us == sync["lat_ns"]["mean"] / 1000
    assert s.percentiles_us == {float(k): v / 1000 for k, v in sync["lat_ns"]["percentile"].items()}   # fio's own


def test_group_reporting_and_unified_reporting_are_one_figure_as_fio_made_them(fixture_text):
    (group,) = read(fixture_text("fio/fio-3.33-numjobs2-group.jsonplus.json")).jobs
    assert [f.direction for f in group.directions] == ["read"]
    raw = fixture_text("fio/fio-3.33-randrw-unified.jsonplus.json")
    (mixed,) = read(raw).jobs
    assert [(f.direction, f.iops) for f in mixed.directions] == [("mixed", json.loads(raw)["jobs"][0]["mixed"]["iops"])]


@pytest.mark.parametrize("name", JSONPLUS)
def test_percentiles_from_one_histogram_are_fios_own(fixture_text, name):
    """The merge takes percentiles the way fio does: from one participant's histogram it gives
    exactly fio's own figures, for every job, direction and percentile."""
    for job in read(fixture_text(f"fio/{name}")).jobs:
        for f in job.directions:
            assert f.bins_ns and sum(f.bins_ns.values()) == f.ios
            assert merged_percentiles([f.bins_ns], f.percentiles_us) == f.percentiles_us


def test_merged_percentiles_are_of_all_ios_together_not_a_mean():
    fast = {100_000: 100, 10_000_000: 1}       # 100 I/Os at 100 us, one at 10 ms
    slow = {1_000_000: 99}                    # 99 I/Os at 1 ms
    pct = merged_percentiles([fast, slow], [50, 99, 99.9])
    assert pct == {50.0: 100.0, 99.0: 1000.0, 99.9: 10000.0}   # a mean of the two p99s would be 550
    assert merged_percentiles([], [50]) == {}


@pytest.mark.parametrize("raw, msg", [("", "no JSON"), ("{not json", "not valid JSON"),
                                      ('{"fio version": "fio-1.50", "jobs": [{"read": {"iops": 1}}]}', "fio-1.50")])
def test_bad_output_is_an_error_naming_what(raw, msg):
    with pytest.raises(fio_output.FioOutputError, match=msg):
        read(raw)


def test_a_bare_nan_fio_writes_in_a_steady_state_section_is_read_as_null(fixture_text):
    """fio prints `"slope" : -nan` when a steady-state window holds one sample: not JSON."""
    raw = fixture_text("fio/fio-3.33-preconditioned-two-jobs.json")
    broken = raw.replace('"slope" : ', '"slope" : -nan, "was" : ', 1)
    assert "-nan," in broken
    assert [j.name for j in read(broken).jobs] == [j.name for j in read(raw).jobs]


def test_a_direction_fio_counted_but_did_not_time_has_no_latency_and_the_others_keep_theirs(fixture_text):
    """fio's basic-verify.fio done within its ramp_time: fio reports its reads and writes with N=0
    latency samples, a mean of 0 and no percentiles. Its latency is no figure; the next job's is."""
    verify, timed = read(fixture_text("fio/fio-3.33-verify-within-ramp.jsonplus.json")).jobs
    assert [(f.direction, f.ios > 0, f.iops > 0) for f in verify.directions] == [("read", True, True),
                                                                                 ("write", True, True)]
    assert all(f.lat_mean_us is f.clat_mean_us is None and f.percentiles_us == {} for f in verify.directions)
    (read_,) = timed.directions
    assert read_.lat_mean_us > 0 and sorted(read_.percentiles_us) == sorted(PERCENTILES)


def test_a_reporting_groups_runtime_is_its_wall_time_not_the_sum_over_its_jobs(fixture_text):
    """numjobs=2 under group_reporting for 2 s: fio's job_runtime is 4000 ms, the sum over the two."""
    raw = fixture_text("fio/fio-3.33-numjobs2-group.jsonplus.json")
    doc = json.loads(raw)
    assert doc["jobs"][0]["job_runtime"] == 4000 and doc["global options"]["runtime"] == "2"
    report = read(raw)
    (group,) = report.jobs
    assert group.runtime_s == pytest.approx(2.0, abs=0.01)
    assert report.window == pytest.approx((doc["timestamp_ms"] / 1000 - group.runtime_s, doc["timestamp_ms"] / 1000))
    # fio's CPU shares are of the summed runtime: the group's CPU is over both jobs
    assert group.cpu_s == pytest.approx((doc["jobs"][0]["usr_cpu"] + doc["jobs"][0]["sys_cpu"]) / 100 * 4.0)


def test_the_window_starts_where_fio_says_each_job_began_not_at_its_reports_stamp(fixture_text):
    """fio >= 3.36 says when each job's measured run began (job_start); its report's stamp comes
    after the jobs and their engines' shutdown, so the window from it would end late."""
    raw = fixture_text("fio/fio-3.42-two-stonewalled-jobs.jsonplus.json")
    doc = json.loads(raw)
    first, second = (j["job_start"] / 1000 for j in doc["jobs"])
    report = read(raw)
    assert [j.start_s for j in report.jobs] == [first, second]
    assert report.window == pytest.approx((first, second + report.jobs[1].runtime_s))
    assert report.window[1] < doc["timestamp_ms"] / 1000
    assert report.window_of(report.jobs[:1]) == pytest.approx((first, first + report.jobs[0].runtime_s))
    # a job_start on another clock (job_start_clock_id) is not the wall clock's: the report's stamp is used
    doc["jobs"][0]["job options"]["job_start_clock_id"] = "1"
    assert read(json.dumps(doc)).jobs[0].start_s is None


def test_a_groups_runtime_holds_where_its_directions_put_it(fixture_text):
    """numjobs understating the group (several sections in one group) or a verify after the writes:
    never longer than the directions one after another, never shorter than the longest."""
    doc = json.loads(fixture_text("fio/fio-3.33-numjobs2-group.jsonplus.json"))
    job = doc["jobs"][0]
    job["job options"].pop("numjobs")   # three sections of one job each, side by side: 6000 ms summed
    (group,) = read(json.dumps({**doc, "jobs": [{**job, "job_runtime": 6000}]})).jobs
    assert group.runtime_s == pytest.approx(2.001)
    verify = {**job, "job_runtime": 2 * 241, "job options": {"numjobs": "0x2"},   # fio reads hex; each job 241 ms
              "read": {**job["read"], "runtime": 74}, "write": {**job["write"], "runtime": 169}}
    (group,) = read(json.dumps({**doc, "jobs": [verify]})).jobs
    assert group.runtime_s == pytest.approx(0.241)
    apart = [{**job, "job_runtime": 2000, "job options": {}}] * 2   # numjobs=2 reported apart: each its own
    assert [j.runtime_s for j in read(json.dumps({**doc, "global options": {"numjobs": "2"}, "jobs": apart})).jobs
            ] == [2.0, 2.0]
