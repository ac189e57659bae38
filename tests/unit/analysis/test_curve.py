import pytest

from harness.analysis.curve import facts


def test_knee_and_the_95_percent_point():
    # (achieved IOPS, mean latency): flat, then climbing near the bound of 10k
    f = facts([(1000, 100), (2500, 101), (5000, 105), (7500, 130), (9000, 200), (10000, 400)], threshold_pct=20)
    assert f.base_lat == 100 and f.bound_iops == 10000 and f.knee_iops == 7500
    assert f.iops_at_95 == 9500
    assert f.lat_at_95 == pytest.approx(300)  # halfway between 9000 (200 us) and 10000 (400 us)
    assert f.increase_at_95 == pytest.approx(2.0)


def test_no_knee_when_latency_stays_flat():
    assert facts([(100, 50), (200, 51), (300, 52)], threshold_pct=20).knee_iops is None


def test_a_curve_needs_two_points():
    with pytest.raises(ValueError):
        facts([(1, 1)], 20)
