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


def summed_points(metas) -> set[str]:
    """The points whose figures are summed over their participants (VMs, host slots): their own
    `aggregate_*` samples stand for the point, their participants' are each one's share."""
    return {m.get("point_id") for m in metas if m.get("scope") == "aggregate"
            and str(m.get("metric", "")).startswith("aggregate_")} - {None}


def one_participants(meta: dict, summed: set[str]) -> bool:
    """A participant's own sample of a summed point: never a repeat of the point."""
    return meta.get("scope") in ("vm", "slot") and meta.get("point_id") in summed
