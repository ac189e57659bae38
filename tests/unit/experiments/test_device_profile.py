"""device-profile: its settings refuse a span that is not whole zones, every zone is read and
written and the random runs ask fio for a fixed request count, IOPS per request with the run's
own CI from a recorded fio output (a TCG guest, 500 requests), and the summary and plots."""
from __future__ import annotations

import math

import pytest

from harness.engine import settings
from harness.experiments import device_profile as dp
from harness.workloads import fio


def test_the_span_must_be_whole_zones_and_devices_are_named_from_the_list():
    cfg = settings.model()
    with pytest.raises(Exception, match="whole number of zones"):
        cfg.model_validate({"device_profile": {"size_mib": 100, "zone_mib": 64}})
    with pytest.raises(Exception, match="every device must be one of default, tmpfs, brd"):
        cfg.model_validate({"device_profile": {"devices": ["optane"]}})


def test_every_zone_both_ways_then_two_random_runs_of_fixed_request_counts():
    c = dp.Settings(size_mib=256, zone_mib=64, random_ios=1000)
    jobs = dp.DeviceProfile().jobs(c)
    zones = [(m["zone"], m["direction"]) for _, m, _ in jobs if m["profile"] == "zone"]
    assert zones == [(k, rw) for k in range(4) for rw in ("read", "write")]
    random = [j for _, m, j in jobs if m["profile"] == "random"]
    assert [j.rw for j in random] == ["randread", "randwrite"] and all(j.iodepth == 1 and j.ios == 1000 for j in random)
    env = fio.job_env(random[0], offset=0, size=256 << 20)
    assert env["FIO_TIME_BASED"] == "0" and env["FIO_IO_SIZE"] == str(1000 * 4096)
    assert fio.job_env(jobs[0][2], offset=0, size=64 << 20)["FIO_TIME_BASED"] == "1"


def test_iops_per_request_and_the_runs_own_ci(fixture_text):
    r = dp.parse_requests(fixture_text("fio/guest-randread-qd1-500ios.json"))
    m = r.metrics()
    assert m["requests"][0] == 500 and r.lat_mean_us == pytest.approx(304.691, rel=1e-4)
    assert m["iops_req"][0] == pytest.approx(1e6 / 304.691112, rel=1e-6)
    half = 1.959964 * 270.689814 / math.sqrt(500)
    assert m["iops_req_ci_lo"][0] == pytest.approx(1e6 / (304.691112 + half), rel=1e-6)
    assert m["iops_req_ci_lo"][0] < m["iops_req"][0] < m["iops_req_ci_hi"][0]
    assert m["iops"][0] == pytest.approx(3030.3, rel=1e-4)   # fio's own: 500 requests over 165 ms


def rows() -> list[dict]:
    out = []
    for dev, speed in (("default", 1.0), ("tmpfs", 4.0)):
        for env, f in (("physical", 1.0), ("virtual", 0.5)):
            for rep in range(3):
                base = {"profiled_device": dev, "env": env, "repeat": rep, "status": "ok", "scope": "slot"}
                for k in range(2):
                    for direction, d in (("read", 1.2), ("write", 1.0)):
                        out.append({**base, "profile": "zone", "zone": k, "zone_offset_mib": 64 * k, "direction": direction,
                                    "metric": "bw", "value": 100_000 * speed * f * d * (1 - 0.1 * k) * (1 + 0.01 * rep)})
                for direction, d in (("read", 2.0), ("write", 1.0)):
                    out.append({**base, "profile": "random", "direction": direction, "metric": "iops_req",
                                "value": 1000 * speed * f * d * (1 + 0.01 * rep)})
    return out


def test_the_summary_shows_ci_the_zones_and_the_asymmetry(tmp_path):
    zones, randoms = dp.zone_rows(rows()), dp.random_rows(rows())
    assert len(zones) == 2 * 2 * 2 * 2 and len(randoms) == 2 * 2 * 2
    asym = {(a["device"], a["env"]): a for a in dp.asymmetry(zones, randoms)}
    assert asym[("tmpfs", "physical")]["random"] == pytest.approx(2.0)
    assert asym[("default", "virtual")]["seq"] == pytest.approx(1.2)
    text = dp.print_summary(zones, randoms, dp.asymmetry(zones, randoms), "tcg", dp.Settings())
    assert "±" in text and "read/write asymmetry" in text and "2.00x" in text and "@64 MiB" in text
    for png in (dp.zones_plot(zones, tmp_path / "z.png"), dp.random_plot(randoms, tmp_path / "r.png")):
        assert png.read_bytes()[:4] == b"\x89PNG"
