"""`harness run NAME --plan`: the plan and its estimate, from the real command, and nothing made:
no nested host booted, no state, no run folder."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = str(Path(sys.executable).parent / "harness")


@pytest.mark.parametrize("experiment", ["raid-levels", "vm-scaling", "backends"])
def test_plan_prints_blocks_points_and_an_estimate_and_makes_nothing(tmp_path, experiment):
    results, state = tmp_path / "results", tmp_path / "state"
    out = subprocess.run([HARNESS, "run", experiment, "--plan", "--set", "host.kind=nested",
                          "--set", f"results_dir={results}", "--set", f"state_dir={state}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"plan: {experiment}, " in out.stdout and "on host nested" in out.stdout
    assert "estimated duration: " in out.stdout and "none measured on this host yet" in out.stdout
    assert not state.exists() and not results.exists()      # no nested host, no state, no run


def test_plan_uses_what_this_host_has_cost_before(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "costs.json").write_text(json.dumps({"local": {
        "setup_s": {"vm-scaling": [60.0]}, "overhead_s": {"physical": [5.0], "virtual": [10.0]},
        "noise_cv": {"headline": [0.08]}}}))
    out = subprocess.run([HARNESS, "run", "vm-scaling", "--plan", "--vm-counts", "1", "--set", "repeat.count=2",
                          "--set", f"results_dir={results}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # 60 s setup + 2 repeats x (physical 12+5 s, virtual 12+10 s) = 138 s (the job: 10 s runtime, 2 s ramp)
    assert "estimated duration: 2 min 18 s" in out.stdout, out.stdout
    assert "CV of 8%" in out.stdout and "10% needs" in out.stdout
    assert sorted(p.name for p in results.iterdir()) == ["costs.json"]
