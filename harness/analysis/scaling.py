"""What a scaling curve answers, from each VM count's aggregate repeats: the scaling efficiency
(the aggregate at N VMs against N times the 1-VM figure), the share of bare metal at the same
concurrency, where the curve stops rising, and which backend scales best at each count. Each is
a ratio with its 95% CI from the one test every verdict takes (stats.difference); a rise or a
winner is called only where that test allows, Holm-adjusted over its family."""
from __future__ import annotations

from dataclasses import dataclass

from harness.analysis.stats import Difference, difference, holm, ranked_tests, wins


@dataclass(frozen=True)
class Step:
    """One VM count of one curve."""
    vm_count: int
    efficiency: Difference | None   # aggregate at N over N x the 1-VM aggregate (None: no 1-VM point, or too few repeats)
    share: Difference | None        # the VMs' aggregate over the host's at the same concurrency
    gain: Difference | None         # over the previous count's aggregate
    gain_p: float | None            # its p, Holm-adjusted over the curve's steps
    rose: bool | None               # a significant rise over the previous count (None: the first count)
    fell: bool | None = None        # a significant drop from the previous count (None: the first count)

    def gain_text(self) -> str:
        """The gain over the previous count with its CI, and what the test says of it."""
        if self.gain is None:
            return "-"
        verdict = "" if self.rose else " (a significant drop)" if self.fell else " (not significant)"
        return f"{self.gain.percent()}{verdict}"


def curve(virtual: dict[int, list[float]], physical: dict[int, list[float]] | None = None,
          alpha: float = 0.05) -> list[Step]:
    """The steps of one curve: `virtual` (and the host's `physical`) aggregate repeats by VM count."""
    counts = sorted(n for n, v in virtual.items() if v)
    one = virtual.get(1) or []
    gains = [difference(virtual[a], virtual[b]) for a, b in zip(counts, counts[1:])]
    adjusted = holm([g.p_value if g else None for g in gains])
    steps = []
    for i, n in enumerate(counts):
        efficiency = difference([n * v for v in one], virtual[n]) if one and n > 1 else None
        share = difference(physical[n], virtual[n]) if physical and physical.get(n) else None
        gain, p = (gains[i - 1], adjusted[i - 1]) if i else (None, None)
        steps.append(Step(n, efficiency, share, gain, p, wins(gain, p, lower=False, alpha=alpha) if i else None,
                          wins(gain, p, lower=True, alpha=alpha) if i else None))
    return steps


def knee(steps: list[Step]) -> int | None:
    """The first count whose gain over the previous one was tested and is not significant (the
    curve stops rising there), or None when every tested step rose (a step too few repeats leave
    untested, gain None, is no evidence either way)."""
    return next((s.vm_count for s in steps if s.gain is not None and s.rose is False), None)


def knee_text(steps: list[Step]) -> str:
    if len(steps) < 2:
        return "one VM count: no curve"
    at = knee(steps)
    if at is None:
        return f"kept rising to {steps[-1].vm_count} VMs"
    i = [s.vm_count for s in steps].index(at)
    before = steps[i - 1].vm_count
    if steps[i].fell:
        return f"the aggregate fell from {before} to {at} VMs ({steps[i].gain.percent()}): it stops rising there"
    return f"no significant gain from {before} to {at} VMs: it stops rising there, or rises less than the noise shows"


@dataclass(frozen=True)
class Best:
    """Which backend scales best at one VM count."""
    vm_count: int
    ranked: list[str]                # best first, by the statistic the test compares
    over_runner_up: Difference | None
    p: float | None                  # Holm-adjusted over the counts
    called: bool                     # the best is named: significant, its whole CI on the better side

    def text(self) -> str:
        if len(self.ranked) < 2:
            return f"{self.vm_count} VM(s): only {self.ranked[0] if self.ranked else 'no backend'} measured"
        if self.called and self.over_runner_up is not None:
            return (f"{self.vm_count} VM(s): {self.ranked[0]} scales best, {self.over_runner_up.percent()} over "
                    f"{self.ranked[1]}")
        bound = f" (they differ by no more than {self.over_runner_up.bound:.0%})" if self.over_runner_up else ""
        return f"{self.vm_count} VM(s): no significant difference between {' and '.join(self.ranked)}{bound}"


def best_by_count(by_backend: dict[str, dict[int, list[float]]], alpha: float = 0.05) -> list[Best]:
    """At each VM count every backend measured, the backends ranked by aggregate (higher is better),
    the best called over the runner-up only where the test allows."""
    counts = sorted({n for curve_ in by_backend.values() for n, v in curve_.items() if v})
    families = [[(b, curve_.get(n, [])) for b, curve_ in by_backend.items()] for n in counts]
    tested = ranked_tests(families, [False] * len(counts))
    return [Best(n, ranked, diff, p, wins(diff, p, lower=False, alpha=alpha))
            for n, (ranked, diff, p) in zip(counts, tested)]
