"""What each metric vtb writes means for the better: declared once, read by the pipeline (a sample's
`better`), compare (what a regression is) and the summaries (which backend is best)."""
from __future__ import annotations

from enum import Enum


class Direction(str, Enum):
    HIGHER = "higher"   # throughput: more is better
    LOWER = "lower"     # latency, time per operation, errors: less is better


HIGHER, LOWER = Direction.HIGHER, Direction.LOWER

# The latency percentiles fio is asked for (every job vtb renders, and a user's job that sets none)
PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999)


DIRECTIONS: dict[str, Direction] = {
    # fio (per process and over a point's participants)
    "iops": HIGHER, "bw": HIGHER, "aggregate_iops": HIGHER, "aggregate_bw": HIGHER, "iops_per_vm": HIGHER,
    "lat_mean": LOWER, "lat_p50": LOWER, "lat_p95": LOWER, "lat_p99": LOWER, "lat_p999": LOWER, "lat_p99_max": LOWER,
    # device-profile's request-timed runs
    "iops_req": HIGHER, "iops_req_ci_lo": HIGHER, "iops_req_ci_hi": HIGHER, "requests": HIGHER,
    # sysbench (MySQL)
    "tps": HIGHER, "qps": HIGHER, "aggregate_tps": HIGHER, "aggregate_qps": HIGHER, "tps_per_vm": HIGHER,
    "lat_avg": LOWER, "errors": LOWER,
    # db_bench (RocksDB)
    "ops": HIGHER, "us_per_op": LOWER, "mb_s": HIGHER,
    # derived: against bare metal, per CPU, against the RAID model, the virtualization stack's share
    "ve_pe_ratio": HIGHER, "ios_per_cpu_s": HIGHER, "expected_bw": HIGHER, "measured_expected": HIGHER,
    "stack_overhead": LOWER,
}


def direction(metric: str, declared: dict[str, Direction] | None = None) -> Direction | None:
    """The metric's direction: as a run's samples declared it (their `better`), else as declared
    here; None for a metric vtb does not know (not judged)."""
    return (declared or {}).get(metric) or DIRECTIONS.get(metric)
