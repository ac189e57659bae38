"""PNG plots (matplotlib, headless)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.store import write_atomic  # noqa: E402


def _save(fig, path: Path) -> Path:
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return path


STATS, NOISY = "#stats", "#noisy"  # the keys harness.report.tables puts beside a mean


def _ci(row: dict, key: str) -> float:
    st = row.get(key + STATS)
    return st.ci95 if st is not None and st.ci95 is not None else 0.0


def _mark_noisy(ax, xs, ys, noisy) -> None:
    """Noisy points get a red ring and a label: their CI or conditions make them untrustworthy."""
    for x, y, n in zip(xs, ys, noisy):
        if n:
            ax.plot([x], [y], "o", ms=13, mfc="none", mec="red", mew=1.5)
            ax.annotate("noisy", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=7, color="red")


def vm_scaling(rows: list[dict], path: Path, title: str) -> Path:
    """Aggregate and per-VM IOPS against VM count (mean ± 95% CI), with the physical baseline."""
    fig, ax = plt.subplots(figsize=(7, 4.5))

    def series(key: str, fmt: str, label: str):
        pts = [r for r in rows if r.get(key) is not None]
        xs, ys = [r["vm_count"] for r in pts], [r[key] for r in pts]
        ax.errorbar(xs, ys, yerr=[_ci(r, key) for r in pts], fmt=fmt, capsize=4, label=label)
        _mark_noisy(ax, xs, ys, [bool(r.get(key + NOISY)) for r in pts])

    series("virtual_aggregate_iops", "o-", "virtual: aggregate IOPS")
    series("virtual_iops_per_vm", "s--", "virtual: mean IOPS per VM")
    series("physical_aggregate_iops", "k^-", "physical: host fio, same concurrency")
    for r in rows:
        if r.get("virtual_ve_pe_ratio") is not None:
            ax.annotate(f"{r['virtual_ve_pe_ratio']:.2f}x", (r["vm_count"], r["virtual_aggregate_iops"]),
                        textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlabel("VM count (host slots for physical)")
    ax.set_ylabel("IOPS")
    ax.set_xticks(sorted({r["vm_count"] for r in rows}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def backends_bars(rows: list[dict], path: Path, metric: str, title: str) -> Path:
    """Grouped bars: one group per point, one bar per environment (host first, then backends)."""
    envs = ["host"] + sorted({b for r in rows for b in r["results"] if b != "host"})
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(rows) * max(1, len(envs)) / 3), 4.5))
    width = 0.8 / len(envs)
    for i, env in enumerate(envs):
        xs, ys, errs, noisy = [], [], [], []
        for x, r in enumerate(rows):
            res = r["results"].get(env, {})
            if res.get(metric) is not None:
                xs.append(x + (i - (len(envs) - 1) / 2) * width)
                ys.append(res[metric])
                errs.append(_ci(res, metric))
                noisy.append(bool(res.get(metric + NOISY)))
        ax.bar(xs, ys, width, yerr=errs, capsize=3, label=env, color="black" if env == "host" else None,
               ecolor="gray")
        _mark_noisy(ax, xs, ys, noisy)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["label"] for r in rows], fontsize=8)
    ax.set_ylabel({"lat_mean": "mean latency (us)", "iops": "IOPS", "bw": "bandwidth (KiB/s)"}.get(metric, metric))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def mysql_axis(rows: list[dict], axis: str, path: Path, title: str) -> Path:
    """Aggregate TPS along one swept axis (the base point included), physical and virtual."""
    series = [r for r in rows if r["axis"] in (axis, "base")]
    labels = [str(r[axis]) for r in series]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = range(len(series))
    width = 0.38
    for i, (env, color) in enumerate((("physical", "black"), ("virtual", None))):
        ys = [r.get(f"{env}_aggregate_tps") or 0 for r in series]
        ax.bar([x + (i - 0.5) * width for x in xs], ys, width, label=env, color=color)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel(axis)
    ax.set_ylabel("aggregate TPS")
    values = [r.get(f"{e}_aggregate_tps") for r in series for e in ("physical", "virtual")]
    values = [v for v in values if v]
    if values and max(values) > 20 * min(values):
        ax.set_yscale("log")  # PE and VE can be orders apart (TCG): keep both readable
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def latency_curves(curves: dict[str, list[tuple[float, float]]], found: dict, path: Path, title: str) -> Path:
    """Mean latency against achieved IOPS per environment, with each curve's knee marked."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for env, pts in sorted(curves.items(), key=lambda kv: kv[0] != "host"):
        xs, ys = zip(*pts)
        line, = ax.plot(xs, ys, "o-", label=env, color="black" if env == "host" else None)
        f = found.get(env)
        if f and f.knee_iops is not None:
            ax.axvline(f.knee_iops, ls=":", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("achieved IOPS")
    ax.set_ylabel("mean latency (us)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="dotted: latency +threshold", title_fontsize=7)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def stacked_layers(per_backend: dict[str, dict[str, float]], path: Path, title: str) -> Path:
    """One stacked bar per backend, a segment per layer (negative differences drawn as zero)."""
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(per_backend) + 3), 4.5))
    names = list(per_backend)
    bottom = [0.0] * len(names)
    for layer in next(iter(per_backend.values())):
        heights = [max(0.0, per_backend[b][layer]) for b in names]
        ax.bar(names, heights, bottom=bottom, label=layer)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylabel("mean latency (us)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def raid_bars(rows: list[dict], path: Path, title: str) -> Path:
    """Per point, measured/expected for each array, PE and VE side by side (1.0 = the RAID model)."""
    points = list(dict.fromkeys(r["point"] for r in rows))
    setups = list(dict.fromkeys(r["setup"] for r in rows if r["setup"] != "single"))
    fig, axes = plt.subplots(1, max(1, len(points)), figsize=(max(6, 3.2 * len(points)), 4.2), squeeze=False,
                             sharey=True)
    for ax, point in zip(axes[0], points):
        by_setup = {r["setup"]: r for r in rows if r["point"] == point}
        xs = range(len(setups))
        for i, (env, color) in enumerate((("physical", "black"), ("virtual", "tab:blue"))):
            ys = [by_setup.get(s, {}).get(f"{env}_measured_expected") or 0 for s in setups]
            ax.bar([x + (i - 0.5) * 0.4 for x in xs], ys, 0.4, color=color, label="PE" if i == 0 else "VE")
        ax.axhline(1.0, color="gray", ls="--", lw=1)
        ax.set_xticks(list(xs), setups, rotation=35, ha="right", fontsize=7)
        ax.set_title(point, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("measured / expected (RAID model)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    return _save(fig, path)
