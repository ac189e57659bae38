"""The Sample: one measured (or failed) value with everything needed to interpret it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    metric: str                 # e.g. iops, lat_p99, aggregate_iops
    value: float | None         # None only when status is "failed"
    unit: str
    metadata: dict = field(default_factory=dict)   # config, environment, point, raw-output path
    status: str = "ok"          # "ok" or "failed"
    error: str = ""

    def row(self) -> dict:
        return {"metric": self.metric, "value": self.value, "unit": self.unit, "status": self.status,
                "error": self.error, **self.metadata}
