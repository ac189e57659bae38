"""Latency against percentile (the tail on a log scale of nines), the host against each backend,
one panel per point (a job file's job and direction): where backends differ most is the tail."""
from __future__ import annotations

import math
from pathlib import Path

from harness.report import plots
from harness.report.plots import plt
from harness.results.samples import Sample


def curves(samples: list[Sample], group: str) -> dict[str, dict[str, dict[float, float]]]:
    """point -> backend ("host" for PE) -> percentile -> latency in us, the mean over repeats of the
    point's distribution (its merged one where the point has several participants)."""
    seen: dict[tuple[str, str], list[dict[str, float]]] = {}
    rows = [s for s in samples if s.status == "ok" and s.metric == "lat_p99" and s.metadata.get("group") == group
            and "percentiles_us" in s.metadata]
    aggregated = {(s.metadata["point"], s.metadata["backend"]) for s in rows if s.metadata.get("scope") == "aggregate"}
    for s in rows:
        m = s.metadata
        key = (m["point"], m["backend"])
        if key in aggregated and m.get("scope") != "aggregate":
            continue   # several participants: their merged distribution, not each one's
        seen.setdefault(key, []).append(m["percentiles_us"])
    out: dict[str, dict[str, dict[float, float]]] = {}
    for (point, backend), dists in seen.items():
        common = set.intersection(*(set(d) for d in dists))
        out.setdefault(point, {})[backend] = {float(p): sum(d[p] for d in dists) / len(dists) for p in common}
    return out


def _nines(p: float) -> float:
    """A percentile's place on the axis: 90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1 - p / 100)


def plot(samples: list[Sample], path: Path, *, group: str, title: str) -> Path | None:
    """The plot at `path`, or None when no sample of the group has a distribution."""
    data = curves(samples, group)
    if not data:
        return None
    n = len(data)
    cols = min(n, 2)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(6.5 * cols, 4.2 * ((n + cols - 1) // cols)),
                             squeeze=False, layout="constrained")
    ticks = (50, 90, 99, 99.9, 99.99, 99.999)
    for ax, (point, by_backend) in zip(axes.flat, data.items()):   # in the job file's order
        for backend, dist in sorted(by_backend.items(), key=lambda kv: (kv[0] != "host", kv[0])):
            ps = sorted(p for p in dist if p < 100)
            ax.plot([_nines(p) for p in ps], [dist[p] for p in ps], marker="o", markersize=3,
                    color="black" if backend == "host" else None, label="host (PE)" if backend == "host" else backend)
        ax.set_yscale("log")
        ax.set_xticks([_nines(p) for p in ticks], [f"p{p:g}" for p in ticks], fontsize=8)
        ax.set_xlabel("percentile (log scale of nines)")
        ax.set_ylabel("completion latency (us, log)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        plots.title(ax, point, 60)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    return plots.save(fig, path)
