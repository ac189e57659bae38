"""The plot of `harness trend`: a metric over runs, one line per point."""
from __future__ import annotations

from pathlib import Path

from harness.analysis.trend import Seen
from harness.report import plots
from harness.report.plots import plt


def plot(seen: list[Seen], path: Path, metric: str) -> Path:
    """One line per point over the runs, mean ± 95% CI."""
    runs = list(dict.fromkeys(s.run_id for s in seen))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(runs) + 3), 4.5), layout="constrained")
    for name in dict.fromkeys(s.point for s in seen):
        mine = [s for s in seen if s.point == name]
        ax.errorbar([runs.index(s.run_id) for s in mine], [s.summary.mean for s in mine],
                    yerr=[s.summary.ci95 or 0 for s in mine], fmt="o-", capsize=4, label=name)
    ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    plots.title(ax, f"{metric} over runs: mean ± 95% CI over each run's repeats")
    return plots.save(fig, path)
