"""A run's sample table loads as data: every row has every column, and a nested value in the CSV
is JSON (not a Python repr)."""
from __future__ import annotations

import csv
import json

from harness.results.samples import Sample
from harness.results.store import RunStore


def test_every_row_has_every_column_and_nested_and_boolean_csv_values_are_json(tmp_path):
    store = RunStore(tmp_path, "run")
    store.update_manifest(experiment="unit")
    store.add([Sample("iops", 100.0, "IOPS", {"point_id": "p", "repeat": 0, "percentiles_us": {"50": 12.5, "99": 80},
                                              "host_quiet": False}),
               Sample("ve_pe_ratio", 0.5, "ratio", {"point_id": "p", "repeat": "all", "placement": ["a", "b"]})])
    rows = [json.loads(line) for line in (store.dir / "samples.jsonl").read_text().splitlines()]
    assert len({tuple(sorted(r)) for r in rows}) == 1 and rows[0]["placement"] is None
    with open(store.dir / "samples.csv") as f:
        table = list(csv.DictReader(f))
    assert json.loads(table[0]["percentiles_us"]) == {"50": 12.5, "99": 80}
    assert json.loads(table[1]["placement"]) == ["a", "b"]
    assert table[0]["host_quiet"] == "false"   # booleans as JSON, as the JSON lines have them
    again = RunStore.reopened(store.dir)   # a field a sample did not have stays absent when read back
    assert "placement" not in again.samples[0].metadata and again.samples[1].metadata["placement"] == ["a", "b"]
