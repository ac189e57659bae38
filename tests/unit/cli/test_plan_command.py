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
    said = " ".join(out.stdout.split())   # rich wraps long lines
    assert "estimated duration: " in said and "the development machine's costs, shipped with vtb" in said
    assert not state.exists() and not results.exists()      # no nested host, no state, no run


def test_plan_uses_what_this_host_has_cost_before(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "costs.json").write_text(json.dumps({"local": {
        "setup_s": {"vm-scaling": [60.0]}, "overhead_s": {"vm-scaling:physical": [5.0], "vm-scaling:virtual": [10.0]},
        "noise_cv": {"headline": [0.08]}}}))
    out = subprocess.run([HARNESS, "run", "vm-scaling", "--plan", "--vm-counts", "1", "--set", "repeat.count=2",
                          "--set", f"results_dir={results}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # 60 s setup + 2 repeats x (physical 12+5 s, virtual 12+10 s) = 138 s (the job: 10 s runtime, 2 s ramp)
    assert "estimated duration: 2 min 18 s" in out.stdout, out.stdout
    assert "CV of 8%" in out.stdout and "10% needs" in out.stdout
    assert sorted(p.name for p in results.iterdir()) == ["costs.json"]


def test_a_resumed_run_goes_on_with_its_own_config_and_only_the_command_line_is_compared(tmp_path):
    """`harness runs` offers `harness run vm-scaling --resume RUN`: that command takes the run's own
    config from its run.json (not today's defaults), and refuses only what the command line changes;
    a run folder moved to another results folder still resumes. --plan checks what the run checks."""
    from harness.engine import settings
    moved = tmp_path / "moved"
    folder = moved / "r1"
    folder.mkdir(parents=True)
    began = settings.load(None, ["vm_scaling.vm_counts=[1,2]", "repeat.count=2", f"results_dir={tmp_path}/old"])
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", "experiment": "vm-scaling", "status": "interrupted",
                                                 "config": json.loads(began.model_dump_json()), "environment": {}}))

    def plan(*args):
        return subprocess.run([HARNESS, "run", "vm-scaling", "--plan", "--resume", "r1", *args,
                               "--set", f"results_dir={moved}"], capture_output=True, text=True, timeout=120)
    offered = plan()
    assert offered.returncode == 0, offered.stdout + offered.stderr
    assert "8 point runs (2 shuffled repeat(s) of each point)" in offered.stdout   # VM counts 1, 2: 4 points
    assert "resuming r1: 0 of its 8 point runs were measured before" in offered.stdout
    changed = plan("--set", "repeat.count=3")
    assert changed.returncode == 2 and "repeat.count: 2 -> 3" in changed.stderr, changed.stdout + changed.stderr
    assert "vm_counts" not in changed.stderr   # what the command line did not state is the run's own
    assert plan("--set", "repeat.count=3", "--resume-anyway").returncode == 0
    for refused, said in ((["--run-id", "x"], "give one of them"), (["--budget", "30m"], "repeat.budget_s bounds")):
        out = plan(*refused)
        assert out.returncode == 2 and said in out.stdout + out.stderr, out.stdout + out.stderr
    missing = subprocess.run([HARNESS, "run", "vm-scaling", "--plan", "--resume", "nonexistent", "--set",
                              f"results_dir={moved}"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "--resume nonexistent: no run of that id" in missing.stderr
    bad_id = subprocess.run([HARNESS, "run", "vm-scaling", "--plan", "--run-id", "a/b c", "--set",
                             f"results_dir={moved}"], capture_output=True, text=True, timeout=120)
    assert bad_id.returncode == 2 and "cannot name a run folder" in bad_id.stderr
