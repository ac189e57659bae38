"""Did a point's participants (VMs, host slots) really run at the same time? Each tool's own
timestamps give its run window on its node's clock; the node's clock offset puts them on this
machine's time line, and the common window must cover most of the shortest run."""
from __future__ import annotations

MIN_FRACTION = 0.9   # below this, the point measured its participants partly one after another


def common_fraction(windows: list[tuple[float, float]]) -> float:
    """The time all windows share, as a fraction of the shortest window (1.0: fully concurrent,
    0.0: some two did not overlap at all)."""
    if len(windows) < 2:
        return 1.0
    shortest = min(end - start for start, end in windows)
    shared = min(end for _, end in windows) - max(start for start, _ in windows)
    return max(0.0, min(1.0, shared / shortest)) if shortest > 0 else 0.0


def metadata(windows: list[tuple[float, float]], offsets: list[float]) -> dict:
    """The point's overlap, for its aggregate samples: windows as given (node clocks), the common
    fraction on this machine's time line, and whether it is enough."""
    aligned = [(start - off, end - off) for (start, end), off in zip(windows, offsets)]
    fraction = common_fraction(aligned)
    return {"windows_overlap": round(fraction, 3), "windows_overlap_ok": fraction >= MIN_FRACTION,
            "window_start_spread_s": round(max(s for s, _ in aligned) - min(s for s, _ in aligned), 3),
            "clock_offsets_s": [round(o, 3) for o in offsets]}


def reason(meta: dict) -> str | None:
    """Why a sample's point does not count as concurrent, or None."""
    if meta.get("windows_overlap_ok") is not False:   # None: not measured (one participant), or a row's null
        return None
    return (f"its participants ran together for only {meta['windows_overlap']:.0%} of the shortest run "
            f"(starts {meta['window_start_spread_s']:.2f} s apart)")
