import pytest

from harness.measure.aggregate import aggregate, ratio
from harness.workloads.fio import FioResult


def res(iops, mean, p50, p99):
    return FioResult(iops=iops, bw_kib_s=iops * 4, lat_mean_us=mean, lat_p50_us=p50, lat_p99_us=p99, lat_p999_us=p99,
                     runtime_s=1, version="fio-3.33")


def test_sums_and_means():
    agg = aggregate([res(1000, 100, 90, 300), res(3000, 50, 40, 100)])
    assert agg["aggregate_iops"][0] == 4000
    assert agg["iops_per_vm"][0] == 2000
    assert agg["aggregate_bw"][0] == 16000
    assert agg["lat_mean"][0] == pytest.approx((1000 * 100 + 3000 * 50) / 4000)  # per-I/O mean
    assert agg["lat_p50"][0] == 65 and agg["lat_p99"][0] == 200 and agg["lat_p99_max"][0] == 300


def test_single_result_is_itself():
    agg = aggregate([res(500, 10, 9, 20)])
    assert agg["aggregate_iops"][0] == agg["iops_per_vm"][0] == 500 and agg["lat_mean"][0] == 10


def test_empty_and_ratio():
    with pytest.raises(ValueError):
        aggregate([])
    assert ratio(50, 200) == 0.25
    with pytest.raises(ValueError):
        ratio(1, 0)
