"""What every experiment's plot shares: headless matplotlib, atomic PNG writes, CI error bars
and the noisy mark."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.common.files import write_atomic  # noqa: E402


def save(fig, path: Path) -> Path:
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return path


def title(ax, text: str, width: int = 80) -> None:
    """A plot's title, wrapped so that it fits (a long accelerator label and caveat no longer run off
    the right edge)."""
    import textwrap
    ax.set_title(textwrap.fill(text, width), fontsize=9)


def log_if_spread(ax, values: list[float]) -> bool:
    """A log value axis where the plotted magnitudes differ by more than 10x (a VM under TCG at
    0.02x of its host would be a sliver on a linear one); True when it is log."""
    shown = [v for v in values if v and v > 0]
    if not shown or max(shown) <= 10 * min(shown):
        return False
    ax.set_yscale("log")
    ax.set_ylabel(f"{ax.get_ylabel()} (log scale)")
    return True


STATS, NOISY = "#stats", "#noisy"  # the keys harness.report.tables puts beside a mean


def ci(row: dict, key: str) -> float:
    st = row.get(key + STATS)
    return st.ci95 if st is not None and st.ci95 is not None else 0.0


def mark_noisy(ax, xs, ys, noisy) -> None:
    """Noisy points get a red ring and a label: their CI or conditions make them untrustworthy."""
    for x, y, n in zip(xs, ys, noisy):
        if n:
            ax.plot([x], [y], "o", ms=13, mfc="none", mec="red", mew=1.5)
            ax.annotate("noisy", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=7, color="red")


