import numpy as np
import pytest
from scipy import stats as sp

from harness.analysis.stats import change_p_value, enough, summarize


def test_ci_matches_scipy():
    x = [101.0, 98.5, 103.2, 99.9, 100.4]
    s = summarize(x)
    lo, hi = sp.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=sp.sem(x))
    assert s.mean == pytest.approx(np.mean(x))
    assert s.ci95 == pytest.approx((hi - lo) / 2)
    assert s.cv == pytest.approx(np.std(x, ddof=1) / np.mean(x))


def test_single_value_has_no_interval():
    s = summarize([5.0])
    assert (s.n, s.mean, s.ci95, s.cv) == (1, 5.0, None, None)
    assert str(s) == "5.0"


def test_adaptive_stop_rule():
    assert not enough([100.0], 0.05)
    assert enough([100.0, 100.5, 99.8], 0.05)
    assert not enough([100.0, 150.0, 60.0], 0.05)


def test_permutation_test_detects_a_planted_20_percent_shift():
    rng = np.random.default_rng(1)
    a = list(rng.normal(1000, 30, 8))
    assert change_p_value(a, [v * 0.8 for v in rng.normal(1000, 30, 8)]) < 0.01


def test_permutation_test_does_not_flag_no_shift():
    rng = np.random.default_rng(2)
    assert change_p_value(list(rng.normal(1000, 30, 8)), list(rng.normal(1000, 30, 8))) > 0.05


def test_no_test_on_single_values():
    assert change_p_value([1.0], [2.0, 3.0]) is None


def _row(a: list[float], b: list[float], metric: str = "iops") -> dict:
    from harness.report.tables import VALUES
    return {"results": {"host": {metric: 100.0}, "nvme": {metric: sum(a) / len(a), metric + VALUES: a},
                        "virtio-blk": {metric: sum(b) / len(b), metric + VALUES: b}}}


def test_best_backend_is_named_only_when_significant():
    from harness.experiments.matrix_summary import best_backend
    close = _row([100, 112, 95, 108, 101, 110], [98, 104, 92, 103, 97, 106])  # means 5% apart, 10% noise
    assert best_backend(close, "iops").startswith("no significant difference")
    apart = _row([200, 205, 198, 202], [100, 104, 97, 101])
    assert best_backend(apart, "iops").startswith("nvme")
    apart_latency = _row([200, 205, 198, 202], [100, 104, 97, 101], metric="lat_mean")
    assert best_backend(apart_latency, "lat_mean").startswith("virtio-blk")   # the metric's direction decides
    three = _row([200, 205, 198], [100, 104, 97])  # 3 and 3 repeats: no p below 0.10 exists
    assert best_backend(three, "iops").startswith("no test possible")


def test_smallest_p_value_of_the_exact_permutation_test():
    from harness.analysis.stats import smallest_p_value
    assert smallest_p_value(3, 3) == pytest.approx(0.1) and smallest_p_value(4, 4) < 0.05
