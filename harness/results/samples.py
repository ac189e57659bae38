"""The Sample: one measured (or failed) value with everything needed to interpret it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable


@dataclass(frozen=True)
class Sample:
    metric: str                 # e.g. iops, lat_p99, aggregate_iops
    value: float | None         # None only when status is "failed"
    unit: str
    metadata: dict = field(default_factory=dict)   # config, environment, point, raw-output path
    status: str = "ok"          # "ok" or "failed"
    error: str = ""

    @classmethod
    def from_row(cls, row: dict) -> "Sample":
        """The sample a row of samples.jsonl holds (`row()`'s inverse; a field the sample did not
        have is null in its row, and absent again here)."""
        meta = dict(row)
        metric, value, unit = meta.pop("metric"), meta.pop("value"), meta.pop("unit") or ""
        status, error = meta.pop("status", None) or "ok", meta.pop("error", None) or ""
        return cls(metric, value, unit, {k: v for k, v in meta.items() if v is not None}, status, error)

    def row(self) -> dict:
        return {"metric": self.metric, "value": self.value, "unit": self.unit, "status": self.status,
                "error": self.error, **self.metadata}


def summed_points(rows: Iterable[dict]) -> set[str]:
    """The point ids (of sample rows, `Sample.row()`) whose figures are summed over their
    participants (VMs, host slots): their own `aggregate_*` samples stand for the point, their
    participants' are each one's share."""
    return {r.get("point_id") for r in rows if r.get("scope") == "aggregate"
            and str(r.get("metric", "")).startswith("aggregate_")} - {None}


def participant_sample(row: dict, summed: set[str]) -> bool:
    """Whether the row is one participant's own sample of a summed point: never a repeat of the point."""
    return row.get("scope") in ("vm", "slot") and row.get("point_id") in summed


def read_rows(path: Path) -> list[dict]:
    """The rows of a samples.jsonl, each without its null columns: a row as its sample had it (a
    run writes every column in every row, null where the sample has no such field)."""
    return [{k: v for k, v in json.loads(line).items() if v is not None}
            for line in path.read_text().splitlines() if line.strip()]
