"""Summary statistics for repeated measurements, and the one test every verdict takes: Welch's
t-test on log values, with the ratio's CI, Holm-adjusted over a family of comparisons."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    ci95: float | None      # half-width of the 95% Student-t interval; None for one value
    cv: float | None        # coefficient of variation (sample std / mean)

    @property
    def rel_ci95(self) -> float | None:
        return None if self.ci95 is None or self.mean == 0 else self.ci95 / abs(self.mean)

    def format(self, digits: int = 1) -> str:
        """The mean, and over repeats ± the 95% CI half-width and the CV: how every table shows it."""
        if self.ci95 is None:
            return f"{self.mean:,.{digits}f}"
        cv = f" (CV {self.cv:.0%})" if self.cv is not None else ""
        return f"{self.mean:,.{digits}f} ±{self.ci95:,.{digits}f}{cv}"

    def __str__(self) -> str:
        return self.format()


def summarize(values: list[float]) -> Summary:
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values")
    mean = float(x.mean())
    if x.size < 2:
        return Summary(1, mean, None, None)
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, x.size - 1) * sd / math.sqrt(x.size))
    return Summary(int(x.size), mean, half, sd / mean if mean else None)


def enough(values: list[float], target_rel_ci: float, minimum: int = 2) -> bool:
    """Adaptive repeats stop when the 95% CI half-width is within target_rel_ci of the mean."""
    if len(values) < max(2, minimum):
        return False
    rel = summarize(values).rel_ci95
    return rel is not None and rel <= target_rel_ci


@dataclass(frozen=True)
class Difference:
    """B against A: the ratio of their geometric means, its 95% CI, and the two-sided p of Welch's
    t-test on the log values (a ratio is what a change of storage path makes; the log makes it a
    difference, and Welch does not assume the two sides are equally noisy)."""
    ratio: float
    low: float
    high: float
    p_value: float

    @property
    def change(self) -> float:
        return self.ratio - 1

    @property
    def bound(self) -> float:
        """The largest change the CI allows, either way: "no difference larger than this"."""
        return max(abs(self.low - 1), abs(self.high - 1))

    def percent(self) -> str:
        """e.g. "+12% (95% CI +5% to +19%)"."""
        return f"{self.change:+.0%} (95% CI {self.low - 1:+.0%} to {self.high - 1:+.0%})"


def on_logs(*sides: list[float]) -> bool:
    """Whether values are compared on their logs: where every one is positive (a 0 has no log)."""
    return all(min(side) > 0 for side in sides if len(side))


def center(values: list[float], logs: bool) -> float:
    """What a test compares, and so what a ranking sorts by: the geometric mean (the mean of the
    logs) on logs, else the mean. An arithmetic mean can order two sides against their test: ten
    1s and ten 100s have the larger mean (50.5) but the smaller geometric mean (10) than 36..44."""
    return float(np.exp(np.mean(np.log(values)))) if logs else float(np.mean(values))


def difference(a: list[float], b: list[float], logs: bool | None = None) -> Difference | None:
    """B against A, or None when no test can be made: a side with one value, or neither side with
    any spread (figures quantized alike, e.g. histogram percentiles). Three repeats a side decide a
    difference that is large against the noise. Where a value is 0 (a collapsed throughput, no
    errors), the test is Welch's on the values themselves and the ratio's CI that of the difference
    of means over A's mean; `logs=False` asks for that scale too (a ranking whose family has a 0)."""
    if len(a) < 2 or len(b) < 2:
        return None
    x, y = np.asarray(a, float), np.asarray(b, float)
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return None
    logs = logs is not False and on_logs(a, b)
    if logs:
        x, y = np.log(x), np.log(y)
    with warnings.catch_warnings():   # one side without spread: its variance is 0, which scipy warns of
        warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
        res = stats.ttest_ind(y, x, equal_var=False)
    ci = res.confidence_interval(0.95)
    if logs:
        shift = float(y.mean() - x.mean())
        return Difference(math.exp(shift), math.exp(float(ci.low)), math.exp(float(ci.high)), float(res.pvalue))
    ma, mb = float(x.mean()), float(y.mean())
    if ma <= 0:   # from nothing: any rise is infinite as a ratio
        inf = math.inf if mb > ma else 1.0
        return Difference(inf, inf, inf, float(res.pvalue))
    return Difference(mb / ma, 1 + float(ci.low) / ma, 1 + float(ci.high) / ma, float(res.pvalue))


def ranked_tests(families: list[list[tuple[str, list[float]]]], lower: list[bool]
                 ) -> list[tuple[list[str], Difference | None, float | None]]:
    """For each family of candidates (name, values): the names best first by the statistic the test
    compares (`center`, on one scale for the whole family; `lower` says which way is better), the
    best against the runner-up, and its p Holm-adjusted over the families. `wins` says whether the
    best is named."""
    ranked, diffs = [], []
    for cands, low in zip(families, lower):
        cands = [c for c in cands if c[1]]
        logs = on_logs(*(values for _, values in cands))
        order = sorted(cands, key=lambda c: center(c[1], logs), reverse=not low)
        ranked.append([name for name, _ in order])
        diffs.append(difference(order[1][1], order[0][1], logs) if len(order) > 1 else None)
    return list(zip(ranked, diffs, holm([d.p_value if d else None for d in diffs])))


def wins(diff: Difference | None, p: float | None, lower: bool, alpha: float = 0.05) -> bool:
    """Whether a ranking's best is named over its runner-up (`diff`: best over runner-up, `p`: its
    adjusted p): p below alpha and the ratio's whole 95% CI on the better side. A p alone also
    passes a difference the other way, or one whose CI still holds no change (alpha above 0.05)."""
    if diff is None or p is None or not p < alpha:
        return False
    return diff.high < 1 if lower else diff.low > 1


def p_text(p: float) -> str:
    return f"p={p:.3f}" if p >= 0.001 else "p<0.001"


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values, so that the chance of any false call
    over the family stays at alpha. None or NaN: not tested, kept as given and outside the family
    (a NaN would otherwise sort anywhere and, multiplied, set every p after it to 1). scipy has only
    Benjamini-Hochberg (which controls a rate, not the chance), and statsmodels would be a
    dependency for these lines."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p))
    out = list(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        out[i] = running
    return out


def noisy_reason(values: list[float], cv_threshold: float, unquiet: list[str] = ()) -> str:
    """Why a point's repeats should not be trusted ("" when they can): a CV over the threshold, or
    a repeat measured in unclean conditions: a busy host, participants apart (the recorded reasons)."""
    reasons = []
    st = summarize(values) if values else None
    if st is not None and st.cv is not None and st.cv > cv_threshold:
        reasons.append(f"CV {st.cv:.0%} > {cv_threshold:.0%}")
    if unquiet:
        reasons.append(f"conditions not clean in {len(unquiet)} repeat(s): {unquiet[0]}")
    return "; ".join(reasons)
