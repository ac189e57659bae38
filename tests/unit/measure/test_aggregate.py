import pytest

from harness.measure.aggregate import aggregate, ratio
from harness.workloads.fio import FioResult


def res(iops, mean, p50, p99, bins=None):
    return FioResult(iops=iops, bw_kib_s=iops * 4, lat_mean_us=mean, lat_p50_us=p50, lat_p99_us=p99, lat_p999_us=p99,
                     runtime_s=1, version="fio-3.33", bins_ns=bins or {})


def test_sums_and_means():
    agg = aggregate([res(1000, 100, 90, 300), res(3000, 50, 40, 100)])
    assert agg["aggregate_iops"][0] == 4000
    assert agg["iops_per_vm"][0] == 2000
    assert agg["aggregate_bw"][0] == 16000
    assert agg["lat_mean"][0] == pytest.approx((1000 * 100 + 3000 * 50) / 4000)  # per-I/O mean
    assert agg["lat_p99_max"][0] == 300
    assert "lat_p50" not in agg and "lat_p99" not in agg   # without histograms: no mean of percentiles


def test_percentiles_of_a_point_are_of_its_merged_histograms():
    """Two VMs: the point's p99 is that of all their I/Os together (fio's json+ bins, in ns)."""
    a = res(1000, 100, 100, 100, bins={100_000: 100, 10_000_000: 1})
    b = res(1000, 1000, 1000, 1000, bins={1_000_000: 99})
    agg = aggregate([a, b])
    assert agg["lat_p50"][:2] == (100.0, "us") and agg["lat_p99"][0] == 1000.0 and agg["lat_p999"][0] == 10000.0
    kept = agg["lat_p99"][2]
    assert kept["percentiles_us"]["99.9"] == 10000.0 and kept["percentiles_from"] == "the merged histograms of 2"


def test_single_result_is_itself():
    agg = aggregate([res(500, 10, 9, 20)])
    assert agg["aggregate_iops"][0] == agg["iops_per_vm"][0] == 500 and agg["lat_mean"][0] == 10


def test_empty_and_ratio():
    with pytest.raises(ValueError):
        aggregate([])
    assert ratio(50, 200) == 0.25
    with pytest.raises(ValueError):
        ratio(1, 0)


def test_a_latency_some_participant_has_no_figure_of_is_not_the_points():
    """fio timed none of one participant's I/Os (done within ramp_time): the point's throughput
    stands, its latency would be the other's alone."""
    untimed = FioResult(iops=1000, bw_kib_s=4000, lat_mean_us=None, lat_p50_us=None, lat_p99_us=None, lat_p999_us=None,
                        runtime_s=1, version="fio-3.33")
    agg = aggregate([res(1000, 100, 90, 300), untimed])
    assert agg["aggregate_iops"][0] == 2000 and "lat_mean" not in agg and "lat_p99_max" not in agg
