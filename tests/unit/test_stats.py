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


def test_repeat_fixed_adaptive_and_failure():
    from harness.config import RepeatConfig
    from harness.experiments.repeats import repeat
    calls = []

    def measure(values):
        def m(i):
            calls.append(i)
            return values[i]
        return m
    assert repeat(RepeatConfig(count=3), measure([1.0, 2.0, 3.0, 4.0])) == [1.0, 2.0, 3.0]
    tight = [100.0, 100.1, 99.9, 100.0, 100.2]
    assert repeat(RepeatConfig(count=2, adaptive=True, target_rel_ci=0.01, max_count=5), measure(tight)) == tight[:2]
    noisy = [100.0, 150.0, 60.0, 120.0, 80.0]
    assert len(repeat(RepeatConfig(adaptive=True, target_rel_ci=0.01, max_count=4), measure(noisy))) == 4  # capped
    assert repeat(RepeatConfig(count=3), measure([1.0, None, 3.0])) == [1.0]  # a failed repeat ends the point
    dropped = []
    repeat(RepeatConfig(count=2, drop_caches=True), measure([1.0, 1.0]), before=lambda: dropped.append(1))
    assert dropped == [1, 1]
