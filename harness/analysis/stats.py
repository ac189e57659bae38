"""Summary statistics for repeated measurements, and the test behind `harness compare`."""
from __future__ import annotations

import math
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


def change_p_value(a: list[float], b: list[float], seed: int = 0) -> float | None:
    """Two-sided permutation test of the difference of means (exact for small samples);
    None when either side has a single value (no test is possible)."""
    if len(a) < 2 or len(b) < 2:
        return None
    res = stats.permutation_test((np.asarray(a, float), np.asarray(b, float)),
                                 lambda x, y: np.mean(y) - np.mean(x), vectorized=False,
                                 n_resamples=9999, alternative="two-sided", random_state=seed)
    return float(res.pvalue)


def smallest_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the exact permutation test can give with n_a and n_b values: below
    alpha only with enough repeats (3 and 3: 0.10; 4 and 4: 0.029)."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


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
