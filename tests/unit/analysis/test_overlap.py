"""The overlap check: run windows from fio's own timestamps, put on one time line by clock offsets."""
import json

import pytest

from harness.analysis import overlap
from harness.report import tables
from harness.workloads import fio


def test_fully_concurrent_windows_share_everything():
    assert overlap.common_fraction([(10.0, 20.0), (10.0, 20.0)]) == 1.0
    assert overlap.common_fraction([(10.0, 20.0)]) == 1.0


def test_the_shared_time_is_a_fraction_of_the_shortest_window():
    assert overlap.common_fraction([(10.0, 20.0), (11.0, 21.0)]) == pytest.approx(0.9)
    assert overlap.common_fraction([(10.0, 20.0), (12.0, 17.0)]) == 1.0   # one inside the other
    assert overlap.common_fraction([(10.0, 20.0), (20.5, 30.0)]) == 0.0   # one after the other


def test_clock_offsets_put_windows_on_one_time_line():
    # The second node's clock runs 5 s ahead: its window, read on its clock, is the same run.
    meta = overlap.metadata([(100.0, 110.0), (105.0, 115.0)], [0.0, 5.0])
    assert meta["windows_overlap"] == 1.0 and meta["windows_overlap_ok"] and meta["window_start_spread_s"] == 0.0
    assert overlap.reason(meta) is None


def test_a_point_whose_participants_ran_apart_is_flagged():
    meta = overlap.metadata([(100.0, 110.0), (103.0, 113.0)], [0.0, 0.0])
    assert meta["windows_overlap"] == 0.7 and not meta["windows_overlap_ok"]
    assert tables.unquiet_reasons(meta) == ["its participants ran together for only 70% of the shortest run "
                                            "(starts 3.00 s apart)"]
    assert tables.unquiet_reasons({**meta, "host_quiet": False, "quiet_reason": "busy"})[0] == "busy"


def test_fio_reports_its_measured_window(fixture_text):
    r = fio.parse(fixture_text("fio/guest-randread-qd16.json"))
    start, end = r.window
    assert end == 1795324872.315 and end - start == pytest.approx(r.runtime_s)


def test_participants_of_a_reporting_group_are_judged_on_its_wall_time(fixture_text):
    """Two participants of the recorded numjobs=2 group_reporting run (2 s), the second 0.3 s late:
    they ran together for 85% of the run. Taken as fio's job_runtime (4000 ms, the sum over the two
    jobs), each window was 4 s long and began 2 s early, and the pair passed at 92.5%."""
    raw = fixture_text("fio/fio-3.33-numjobs2-group.jsonplus.json")
    doc = json.loads(raw)
    late = json.dumps({**doc, "timestamp_ms": doc["timestamp_ms"] + 300})
    windows = [fio.parse(raw).window, fio.parse(late).window]
    assert windows[0][1] - windows[0][0] == pytest.approx(2.0, abs=0.01)
    meta = overlap.metadata(windows, [0.0, 0.0])
    assert meta["windows_overlap"] == pytest.approx(0.85, abs=0.01) and not meta["windows_overlap_ok"]


def test_participants_get_one_start_on_their_own_clocks_with_a_bounded_wait():
    envs, start = fio.SharedStart().envs([0.0, -60.0], ["GuestAgent"] * 2, {"X": "1"})
    starts = [float(e["FIO_START_AT"]) for e in envs]
    assert starts[0] - starts[1] == pytest.approx(60.0, abs=0.002) and envs[0]["X"] == "1"
    assert starts[0] == pytest.approx(start, abs=0.002)
    assert float(envs[0]["FIO_START_MAX_WAIT"]) == 2 * fio.START_MARGIN_S
    assert fio.SharedStart().envs([0.0], ["LocalHost"], None) == ([{}], None)   # one participant: no shared start


def test_the_wait_for_a_shared_start_comes_on_top_of_the_jobs_bound(monkeypatch):
    bounds = []
    monkeypatch.setattr(fio, "run_runner", lambda *a, timeout, **kw: bounds.append(timeout) or "{}")
    job = fio.FioJob(rw="read", runtime_s=10, ramp_s=0)
    for extra in (None, {"FIO_START_AT": "1.0", "FIO_START_MAX_WAIT": "60"}):
        fio.run(object(), job, locator="path:/dev/null", size=1 << 20, extra_env=extra)
    assert bounds == [fio.timeout_s(job), fio.timeout_s(job) + 60]


def test_a_shared_start_that_participants_missed_allows_more_time_then_less_as_they_meet_it():
    shared = fio.SharedStart()
    guests = ["GuestAgent"] * 4
    shared.learn(100.0, [(100.1, 102.1), (103.9, 105.9), None, (100.5, 102.5)], [0.0, 0.0, 0.0, 0.0], guests)
    assert shared.lag_per_participant_s == {"GuestAgent": pytest.approx(3.9 / 4)}   # 3.9 s late over 4 participants
    assert shared.margin_s(guests) == pytest.approx(fio.START_MARGIN_S + 1.5 * 3.9)
    assert shared.margin_s(guests[:2]) < shared.margin_s(guests) <= fio.MAX_START_MARGIN_S
    shared.learn(200.0, [(200.2, 202.2), (200.1, 202.1)], [0.0, 0.0], guests[:2])   # on time: half is kept
    assert shared.lag_per_participant_s == {"GuestAgent": pytest.approx(fio.LAG_DECAY * 3.9 / 4)}
    shared.learn(300.0, [(300.2, 302.2), (302.5, 304.5)], [0.0, 0.0], guests[:2])   # late again: learnt again
    assert shared.lag_per_participant_s == {"GuestAgent": pytest.approx(2.5 / 2)}
    late_clock = fio.SharedStart()
    late_clock.learn(100.0, [(160.1, 162.1), (100.1, 102.1)], [60.0, 0.0], guests[:2])  # a guest clock 60 s ahead: on time
    assert late_clock.lag_per_participant_s == {"GuestAgent": 0.0}


def test_the_hosts_own_fio_does_not_wait_for_the_lag_of_guests():
    """Seen: after 2 TCG guests began 2.8 s late, 4 host slots waited 10 s for a start they met at once."""
    shared = fio.SharedStart()
    shared.learn(100.0, [(102.8, 104.8), (100.2, 102.2)], [0.0, 0.0], ["GuestAgent"] * 2)
    assert shared.margin_s(["LocalHost"] * 4) == fio.START_MARGIN_S
    assert shared.margin_s(["GuestAgent"] * 4) == pytest.approx(fio.START_MARGIN_S + 1.5 * 4 * 1.4)
    shared.learn(200.0, [(203.1, 205.1), (200.2, 202.2)], [0.0, 0.0], ["SshHost", "GuestAgent"])   # by kind
    # the guest there met its start: half its lag is kept
    assert shared.lag_per_participant_s == {"GuestAgent": pytest.approx(0.7), "SshHost": pytest.approx(3.1)}
    # a mixed point: each kind's own count times its own lag, the largest of them
    assert shared.margin_s(["SshHost", "GuestAgent", "GuestAgent"]) == pytest.approx(fio.START_MARGIN_S + 1.5 * 3.1)


def test_this_machines_processes_start_sooner_than_guests_and_learn_their_own_lag():
    """A node says its lead: this machine's fio processes start at once, a guest pages fio in over its agent."""
    from harness.hosts import LocalHost
    from harness.libvirt.agent import GuestAgent
    shared = fio.SharedStart()
    assert LocalHost.start_lead_s < GuestAgent.start_lead_s == fio.START_MARGIN_S
    envs, start = shared.envs([0.0, 0.0], ["LocalHost"] * 2, None, LocalHost.start_lead_s)
    assert float(envs[0]["FIO_START_MAX_WAIT"]) == 2 * LocalHost.start_lead_s
    shared.learn(100.0, [(100.3, 110.0), (100.0, 110.0)], [0.0, 0.0], ["LocalHost"] * 2, LocalHost.start_lead_s)
    assert shared.margin_s(["LocalHost"] * 2, LocalHost.start_lead_s) == pytest.approx(0.5 + 1.5 * 0.3)
