"""The latency-vs-IOPS curve of one environment: where latency starts to climb, and what it costs
to run near the bound (the figures the PE/VE study reports per device and environment)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CurveFacts:
    base_lat: float             # mean latency at the lowest rate
    bound_iops: float           # the highest achieved IOPS on the curve
    knee_iops: float | None     # achieved IOPS of the first point whose latency grew > threshold
    iops_at_95: float           # 95% of the bound
    lat_at_95: float            # latency there (interpolated along the curve)

    @property
    def increase_at_95(self) -> float:
        return self.lat_at_95 / self.base_lat - 1


def facts(points: list[tuple[float, float]], threshold_pct: float) -> CurveFacts:
    """points: (achieved IOPS, mean latency), in increasing rate order."""
    if len(points) < 2:
        raise ValueError("a curve needs at least two points")
    pts = sorted(points)
    iops = np.array([p[0] for p in pts])
    lat = np.array([p[1] for p in pts])
    base = float(points[0][1])
    knee = next((i for i, l in points if l > base * (1 + threshold_pct / 100)), None)
    bound = float(iops.max())
    target = 0.95 * bound
    return CurveFacts(base, bound, knee, target, float(np.interp(target, iops, lat)))
