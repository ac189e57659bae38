"""Aggregation across the VMs (or host slots) of one point. Kept apart from I/O so it is unit-tested."""
from __future__ import annotations

from harness.workloads.fio import FioResult, percentiles_meta
from harness.workloads.fio_output import merged_percentiles


def aggregate(results: list[FioResult]) -> dict[str, tuple]:
    """Totals and means over concurrent fio processes.

    The latency mean is weighted by IOPS (it is the mean over all I/Os). The percentiles are those
    of every participant's I/Os together, from their merged histograms (fio's json+), never a mean
    of their percentiles; without a histogram from each, none is reported. The worst
    participant's p99 is reported too, as its tail. A latency some participant has no figure of
    (fio timed none of its I/Os) is not reported for the point: it would be of the others alone.
    """
    if not results:
        raise ValueError("no results to aggregate")
    total = sum(r.iops for r in results)
    n = len(results)
    out: dict[str, tuple] = {
        "aggregate_iops": (total, "IOPS"),
        "iops_per_vm": (total / n, "IOPS"),
        "aggregate_bw": (sum(r.bw_kib_s for r in results), "KiB/s"),
    }
    if all(r.lat_mean_us is not None for r in results):
        out["lat_mean"] = (sum(r.lat_mean_us * r.iops for r in results) / total, "us")
    if all(r.lat_p99_us is not None for r in results):
        out["lat_p99_max"] = (max(r.lat_p99_us for r in results), "us")
    if all(r.bins_ns for r in results):
        pct = merged_percentiles(r.bins_ns for r in results)
        kept = {"percentiles_us": percentiles_meta(pct), "percentiles_from": f"the merged histograms of {n}"}
        out.update({m: (pct[p], "us", kept) for m, p in (("lat_p50", 50.0), ("lat_p99", 99.0), ("lat_p999", 99.9))})
    return out


def ratio(virtual: float, physical: float) -> float:
    """Virtual over physical (1.0 = bare-metal parity)."""
    if physical <= 0:
        raise ValueError("physical baseline must be positive")
    return virtual / physical
