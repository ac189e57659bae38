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


def vm_scaling(rows: list[dict], path: Path, title: str) -> Path:
    """Aggregate and per-VM IOPS against VM count, with the physical baseline drawn."""
    fig, ax = plt.subplots(figsize=(7, 4.5))

    def series(key: str):
        pts = [(r["vm_count"], r[key]) for r in rows if r.get(key) is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    ax.plot(*series("virtual_aggregate_iops"), "o-", label="virtual: aggregate IOPS")
    ax.plot(*series("virtual_iops_per_vm"), "s--", label="virtual: mean IOPS per VM")
    ax.plot(*series("physical_aggregate_iops"), "k^-", label="physical: host fio, same concurrency")
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
