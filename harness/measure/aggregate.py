"""Aggregation across the VMs (or host slots) of one point. Kept apart from I/O so it is unit-tested."""
from __future__ import annotations

from harness.workloads.fio import FioResult


def aggregate(results: list[FioResult]) -> dict[str, tuple[float, str]]:
    """Totals and means over concurrent fio processes.

    Latency mean is weighted by IOPS (it is the mean over all I/Os); percentiles cannot be merged
    from per-process summaries, so p50/p99 are the mean of the per-process values (the max p99
    is reported too, as the worst VM's tail).
    """
    if not results:
        raise ValueError("no results to aggregate")
    total = sum(r.iops for r in results)
    n = len(results)
    return {
        "aggregate_iops": (total, "IOPS"),
        "iops_per_vm": (total / n, "IOPS"),
        "aggregate_bw": (sum(r.bw_kib_s for r in results), "KiB/s"),
        "lat_mean": (sum(r.lat_mean_us * r.iops for r in results) / total, "us"),
        "lat_p50": (sum(r.lat_p50_us for r in results) / n, "us"),
        "lat_p99": (sum(r.lat_p99_us for r in results) / n, "us"),
        "lat_p99_max": (max(r.lat_p99_us for r in results), "us"),
    }


def ratio(virtual: float, physical: float) -> float:
    """Virtual over physical (1.0 = bare-metal parity)."""
    if physical <= 0:
        raise ValueError("physical baseline must be positive")
    return virtual / physical
