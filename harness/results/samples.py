"""The Sample: one measured (or failed) value with everything needed to interpret it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from harness.common.schema import ConfigError


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


class SamplesError(ConfigError):
    """A file given as a run's samples that is not one (bad input: exit 2, nothing changed)."""


class NoSamples(SamplesError):
    """A run with no samples (none written: killed before it measured anything)."""


FIX = "Fix: give a run folder, a run id (`harness runs`), a baseline's name or a run's samples.jsonl"


def read_samples(path: Path) -> list[dict]:
    """The rows of a samples file given by a user (a run's, a baseline's, any path), as `read_rows`
    gives them, each first checked against the samples' schema, as vtb writes them: a file that is
    not one (not text, not JSON lines, rows of another shape, none at all) is refused, naming its
    line. Columns vtb no longer writes are let through: a baseline may come from an older vtb."""
    import jsonschema

    from harness.results import columns
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SamplesError(f"{path}: not a samples file (not UTF-8 text). {FIX}") from None
    except OSError as e:
        raise SamplesError(f"{path}: cannot be read as a samples file ({e.strerror or e}). {FIX}") from None
    validator = jsonschema.Draft202012Validator({**columns.generated_schema(), "additionalProperties": True})
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise SamplesError(f"{path}, line {number}: not a JSON sample row. {FIX}") from None
        if (error := next(iter(validator.iter_errors(row)), None)) is not None:
            where = ".".join(map(str, error.absolute_path))
            raise SamplesError(f"{path}, line {number}: not a sample row of vtb's ({where + ': ' if where else ''}"
                               f"{error.message[:200]}). {FIX}")
        rows.append({k: v for k, v in row.items() if v is not None})
    if not rows:
        raise NoSamples(f"{path}: no sample rows. {FIX}")
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows of a samples.jsonl, each without its null columns: a row as its sample had it (a
    run writes every column in every row, null where the sample has no such field)."""
    return [{k: v for k, v in json.loads(line).items() if v is not None}
            for line in path.read_text().splitlines() if line.strip()]
