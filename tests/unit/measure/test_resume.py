"""`harness run --resume`: which run goes on, and what changed since it began."""
from __future__ import annotations

import json

import pytest

from harness.measure import resume


def test_what_changed_is_named_field_by_field():
    manifest = {"config": {"repeat": {"count": 3}, "fleet": {"vms": 2}},
                "environment": {"accel": "tcg", "host": "local", "harness_rev": "abc"}}
    changed = resume.changes(manifest, {"repeat": {"count": 5}, "fleet": {"vms": 2}},
                             {"accel": "kvm", "host": "local", "harness_rev": "abc"})
    assert changed == ["repeat.count: 3 -> 5", "accel: 'tcg' -> 'kvm'"]
    assert resume.changes(manifest, manifest["config"], manifest["environment"]) == []


def test_an_experiments_section_added_to_vtb_since_the_run_began_is_no_change():
    manifest = {"config": {"repeat": {"count": 3}}, "environment": {}}
    assert resume.changes(manifest, {"repeat": {"count": 3}, "queue_depth": {"iodepths": [1, 4]}}, {}) == []
    assert resume.changes(manifest, {}, {}) == ["repeat.count: 3 -> None"]   # one it began with still counts


def test_only_an_unfinished_run_of_the_same_experiment_goes_on(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"experiment": "iops", "status": "interrupted"}))
    assert resume.refusal(run, "iops") is None
    assert "harness run iops --resume r1" in resume.refusal(run, "latency")
    (run / "run.json").write_text(json.dumps({"experiment": "iops", "status": "completed"}))
    assert "nothing is left" in resume.refusal(run, "iops")
    assert resume.folder_of(tmp_path, "r1") == run.resolve()
    with pytest.raises(Exception, match="harness runs"):
        resume.folder_of(tmp_path, "nosuchrun")
