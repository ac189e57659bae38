import numpy as np
import pytest
from scipy import stats as sp

from harness.analysis.stats import Difference, difference, enough, holm, ranked_tests, summarize, wins


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


def test_welch_on_logs_detects_a_planted_20_percent_shift_with_its_ci():
    rng = np.random.default_rng(1)
    a = list(rng.normal(1000, 30, 8))
    d = difference(a, [v * 0.8 for v in rng.normal(1000, 30, 8)])
    assert d.p_value < 0.01 and d.low < d.ratio < d.high and d.high < 0.85 and d.low > 0.75
    assert d.percent().startswith("-2") and "95% CI" in d.percent()


def test_welch_on_logs_does_not_flag_no_shift_and_bounds_it():
    rng = np.random.default_rng(2)
    d = difference(list(rng.normal(1000, 30, 8)), list(rng.normal(1000, 30, 8)))
    assert d.p_value > 0.05 and d.low < 1 < d.high and d.bound < 0.06   # no difference larger than ~5%


def test_the_ci_of_the_ratio_is_welchs_interval_on_the_logs():
    a, b = [100.0, 104.0, 97.0], [200.0, 205.0, 198.0]
    d = difference(a, b)
    res = sp.ttest_ind(np.log(b), np.log(a), equal_var=False)
    ci = res.confidence_interval(0.95)
    assert d.p_value == pytest.approx(res.pvalue) and d.p_value < 0.001   # three repeats a side decide this
    assert (d.low, d.high) == pytest.approx((np.exp(ci.low), np.exp(ci.high)))


def test_no_test_on_single_values_or_without_any_spread():
    assert difference([1.0], [2.0, 3.0]) is None
    assert difference([2.0, 2.0], [3.0, 3.0]) is None   # quantized alike: the noise cannot be known


def test_a_collapse_to_zero_and_a_rise_from_zero_are_tested_on_the_values():
    gone = difference([1000.0, 1010.0, 990.0], [0.0, 0.0, 0.0])
    assert gone.ratio == 0 and gone.p_value < 0.001 and gone.high < 0.05
    errors = difference([0.0, 0.0, 0.0], [50.0, 52.0, 51.0])
    assert errors.ratio == float("inf") and errors.p_value < 0.001


def test_holm_adjusts_a_family_step_down():
    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert holm([]) == [] and holm([None]) == [None]


def test_a_nan_p_stays_untested_and_outside_the_family():
    got = holm([0.01, float("nan"), 0.04, 0.03])
    assert np.isnan(got[1]) and [got[0], got[2], got[3]] == pytest.approx([0.03, 0.06, 0.06])


def test_a_family_is_ranked_by_the_geometric_mean_its_test_compares():
    x, y = [1.0] * 10 + [100.0] * 10, [36 + 8 * i / 19 for i in range(20)]   # means 50.5 and 40, geometric 10 and 40
    ((ranked, diff, p),) = ranked_tests([[("X", x), ("Y", y)]], [False])
    assert ranked == ["Y", "X"] and diff.low > 1 and p < 0.05
    ((ranked, _, _),) = ranked_tests([[("X", x), ("Y", y)]], [True])   # lower is better: X
    assert ranked == ["X", "Y"]
    ((ranked, diff, _),) = ranked_tests([[("X", x), ("Y", y), ("Z", [0.0, 1.0])]], [False])   # a 0: on the values
    assert ranked == ["X", "Y", "Z"] and diff.ratio == pytest.approx(50.5 / 40)


def test_a_winner_needs_its_adjusted_p_and_the_whole_ci_on_the_better_side():
    ahead, across = Difference(1.5, 1.2, 1.9, 0.01), Difference(1.2, 0.95, 1.5, 0.08)
    assert wins(ahead, 0.01, lower=False) and not wins(ahead, 0.01, lower=True)   # a p says nothing of the side
    assert not wins(ahead, 0.06, lower=False) and not wins(ahead, None, lower=False) and not wins(None, 0.01, False)
    assert not wins(across, 0.08, lower=False, alpha=0.1)   # p under a wider alpha, the CI still holds no change
    assert not wins(ahead, float("nan"), lower=False)


def _row(a: list[float], b: list[float], metric: str = "iops") -> dict:
    from harness.report.tables import VALUES
    return {"results": {"host": {metric: 100.0}, "nvme": {metric: sum(a) / len(a), metric + VALUES: a},
                        "virtio-blk": {metric: sum(b) / len(b), metric + VALUES: b}}}


def test_best_backend_is_named_only_when_significant():
    from harness.experiments.matrix_summary import best_backend, best_backends
    close = _row([100, 112, 95, 108, 101, 110], [98, 104, 92, 103, 97, 106])  # means 5% apart, 10% noise
    assert best_backend(close, "iops").startswith("tie: nvme and virtio-blk differ by no more than")
    apart = _row([200, 205, 198, 202], [100, 104, 97, 101])
    assert best_backend(apart, "iops").startswith("nvme: iops +")
    apart_latency = _row([200, 205, 198, 202], [100, 104, 97, 101], metric="lat_mean")
    assert best_backend(apart_latency, "lat_mean").startswith("virtio-blk: lat_mean -")   # the metric's direction decides
    three = _row([200, 205, 198], [100, 104, 97])  # the default 3 repeats decide a large difference
    assert best_backend(three, "iops").startswith("nvme: iops +") and "against virtio-blk" in best_backend(three, "iops")
    one = _row([200], [100])
    assert best_backend(one, "iops").startswith("no test: one repeat")
    # over many rows, Holm: a p that stands alone may not stand among ten
    edge = _row([100, 104, 98, 103], [95, 99, 93, 97])
    alone = best_backend(edge, "iops")
    among = best_backends([edge] + [close] * 9, "iops")[0]
    assert alone.startswith("nvme") and among.startswith("tie"), (alone, among)
