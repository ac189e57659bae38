"""The verdict's picture: each backend's share of bare metal per workload, with its 95% CI, on one
axis (logarithmic where the shares differ by more than 10x), bare metal marked at 1."""
from __future__ import annotations

import io

from harness.report import plots
from harness.report.plots import plt
from harness.report.verdict import Workload


def png(found: list[Workload]) -> bytes | None:
    """The plot as PNG bytes, or None when no backend has a share (no host baseline)."""
    shown = [(w.name, e) for w in found for e in w.entries if e.of_host or e.ratio is not None]
    if not shown:
        return None
    backends = sorted({e.backend for _, e in shown})
    names = list(dict.fromkeys(n for n, _ in shown))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * len(shown)), layout="constrained")
    step = 0.8 / len(backends)
    for i, backend in enumerate(backends):
        ys, xs, lo, hi = [], [], [], []
        for n, e in shown:
            if e.backend != backend:
                continue
            ratio = e.of_host.ratio if e.of_host else e.ratio
            ys.append(names.index(n) + (i - (len(backends) - 1) / 2) * step)
            xs.append(ratio)
            lo.append(ratio - e.of_host.low if e.of_host else 0)
            hi.append(e.of_host.high - ratio if e.of_host else 0)
        ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", capsize=3, label=backend)
    ax.axvline(1.0, color="black", lw=1, ls="--", label="bare metal")
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("share of bare metal (virtual / physical headline)")
    values = [e.of_host.ratio if e.of_host else e.ratio for _, e in shown] + [1.0]
    if max(values) > 10 * min(values):
        ax.set_xscale("log")
        ax.set_xlabel(f"{ax.get_xlabel()} (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    plots.title(ax, f"Each {found[0].noun} against bare metal, mean and 95% CI (Welch on log values)", 90)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
