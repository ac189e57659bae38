"""What each metric vtb writes means for the better: declared once, read by the pipeline (a sample's
`better`), compare (what a regression is) and the summaries (which backend is best)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Direction(str, Enum):
    HIGHER = "higher"   # throughput: more is better
    LOWER = "lower"     # latency, time per operation, errors: less is better


HIGHER, LOWER = Direction.HIGHER, Direction.LOWER

# The latency percentiles fio is asked for (every job vtb renders, and a user's job that sets none)
PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999)


@dataclass(frozen=True)
class Metric:
    better: Direction
    units: tuple[str, ...]   # each sample's `unit` is one of these (a latency's differs by tool)
    what: str


def _m(better: Direction, units: str, what: str) -> Metric:
    return Metric(better, tuple(units.split(" | ")), what)


US = "us"
# Every value the samples' `metric` column takes, in groups; results/README.md's table is this.
METRIC_GROUPS: tuple[tuple[str, dict[str, Metric]], ...] = (
    ("fio, per participant (`scope` `vm` or `slot`); the latencies also ioping's and db_bench's", {
        "iops": _m(HIGHER, "IOPS", "I/Os per second, one direction of one job"),
        "bw": _m(HIGHER, "KiB/s", "bandwidth, one direction of one job"),
        "lat_mean": _m(LOWER, US, "mean total latency (submission and completion); over a point's participants, "
                                  "weighted by their IOPS (the mean over all I/Os)"),
        "lat_p50": _m(LOWER, US, "median completion latency; over a point's participants, of all their I/Os "
                                 "together (their merged histograms); ioping's and db_bench's own"),
        "lat_p99": _m(LOWER, US, "99th-percentile completion latency, as lat_p50"),
        "lat_p999": _m(LOWER, US, "99.9th-percentile completion latency, as lat_p50"),
    }),
    ("over a point's participants (`scope` aggregate)", {
        "aggregate_iops": _m(HIGHER, "IOPS", "the participants' IOPS summed"),
        "iops_per_vm": _m(HIGHER, "IOPS", "aggregate_iops over the participants"),
        "aggregate_bw": _m(HIGHER, "KiB/s", "the participants' bandwidth summed"),
        "lat_p99_max": _m(LOWER, US, "the worst participant's p99"),
    }),
    ("request-timed runs: device-profile's, and ioping's (`latency.tools`)", {
        "requests": _m(HIGHER, "I/Os | requests", "the requests the tool timed, as asked"),
        "iops_req": _m(HIGHER, "IOPS", "device-profile: one over the mean request latency"),
        "iops_req_ci_lo": _m(HIGHER, "IOPS", "device-profile: iops_req's 95% CI over the requests, lower end"),
        "iops_req_ci_hi": _m(HIGHER, "IOPS", "device-profile: iops_req's 95% CI over the requests, upper end"),
        "lat_p95": _m(LOWER, "us | ms", "95th-percentile latency: ioping's (us); sysbench's (ms, over a point: the "
                                        "servers' mean)"),
    }),
    ("sysbench (MySQL), per server and per point", {
        "tps": _m(HIGHER, "tx/s", "transactions per second, one server"),
        "qps": _m(HIGHER, "q/s", "queries per second, one server"),
        "aggregate_tps": _m(HIGHER, "tx/s", "the servers' TPS summed"),
        "aggregate_qps": _m(HIGHER, "q/s", "the servers' QPS summed"),
        "tps_per_vm": _m(HIGHER, "tx/s", "aggregate_tps over the servers"),
        "lat_avg": _m(LOWER, "ms", "mean transaction latency (over a point: the servers' mean)"),
        "errors": _m(LOWER, "1/s", "errors per second"),
    }),
    ("db_bench (RocksDB)", {
        "ops": _m(HIGHER, "ops/s", "operations per second"),
        "us_per_op": _m(LOWER, US, "time per operation"),
        "mb_s": _m(HIGHER, "MB/s", "db_bench's own bandwidth"),
    }),
    ("derived", {
        "ve_pe_ratio": _m(HIGHER, "ratio", "virtual over physical at the same concurrency (the mean of the physical "
                                           "repeats): aggregate IOPS, TPS for mysql, the headline in sweeps "
                                           "(`ratio_of`)"),
        "ios_per_cpu_s": _m(HIGHER, "IO/CPU-s", "virtual points: IOPS per CPU-second of QEMU and the backend's own "
                                               "daemons"),
        "expected_bw": _m(HIGHER, "KiB/s", "RAID points: the RAID model's bandwidth from the base at the same "
                                          "point and env"),
        "measured_expected": _m(HIGHER, "ratio", "RAID points: measured over expected_bw"),
        "stack_overhead": _m(LOWER, "ratio", "RAID points: 1 - measured/expected"),
    }),
)
METRICS: dict[str, Metric] = {name: m for _, group in METRIC_GROUPS for name, m in group.items()}
DIRECTIONS: dict[str, Direction] = {name: m.better for name, m in METRICS.items()}


def markdown() -> str:
    """The metric reference in results/README.md."""
    out = ["<!-- generated from harness/results/metrics.py by `harness results metrics`; do not edit -->"]
    for title, group in METRIC_GROUPS:
        out += ["", f"**{title}**", "", "| metric | better | unit | meaning |", "|---|---|---|---|"]
        out += [f"| `{name}` | {m.better.value} | {' or '.join(m.units)} | {m.what} |" for name, m in group.items()]
    return "\n".join(out) + "\n"


def direction(metric: str, declared: dict[str, Direction] | None = None) -> Direction | None:
    """The metric's direction: as a run's samples declared it (their `better`), else as declared
    here; None for a metric vtb does not know (not judged)."""
    return (declared or {}).get(metric) or DIRECTIONS.get(metric)
