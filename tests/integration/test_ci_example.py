"""The CI example in docs/ci.md, run: its steps' commands (not its YAML), in order, on this
repository's CI configuration with 1-second points; then a second push's Measure and Gate against
the baseline the first one saved. `make bootstrap` is the set-up `make test` has already done, and
the job's run is named by its RUN variable, push-1 then push-2."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from harness.fleet import gc

pytestmark = pytest.mark.integration
REPO = Path(__file__).parents[2]
CONFIG = REPO / "tests" / "ci.toml"


def steps() -> dict[str, str]:
    """name -> the shell commands of each step of the workflow in docs/ci.md."""
    text = (REPO / "docs" / "ci.md").read_text()
    workflow = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    found, name, lines = {}, None, workflow.splitlines()
    for i, line in enumerate(lines):
        if m := re.match(r"\s+- name: (.+)", line):
            name = m.group(1)
        elif name and (m := re.match(r"(\s+)run: (.*)", line)):
            if m.group(2) != "|":
                found[name] = m.group(2)
                continue
            block = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(m.group(1)):
                    break
                block.append(nxt.strip())
            found[name] = "\n".join(block)
    return found


@pytest.mark.core
def test_the_ci_example_gates_reports_and_keeps_a_baseline(tmp_path):
    commands = steps()
    assert list(commands) == ["Set-up", "Measure", "Gate", "Report", "Baseline", "Down"]
    # the example's commands read ./harness.toml: the ci config, under a fleet name of its own (this
    # runs in the nested hosts' lane, beside the ci fleet's sweeps: tests/conftest.py)
    (tmp_path / "harness.toml").write_text(CONFIG.read_text().replace('name = "ci"', 'name = "cix"', 1))
    env = {**os.environ, "RESULTS": str(tmp_path / "results"), "RUNTIME": "1", "RUN": "push-1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def step(name: str, script: str | None = None) -> subprocess.CompletedProcess:
        script = re.sub(r"^make bootstrap$", "true", script or commands[name], flags=re.M)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)
        print(f"--- {name}\n{done.stdout}{done.stderr}")
        return done

    try:
        first = {name: step(name) for name in ("Set-up", "Measure", "Gate", "Report", "Baseline")}   # on main
        assert [name for name, done in first.items() if done.returncode != 0] == []
        assert "no baseline yet" in first["Gate"].stdout
        assert (tmp_path / "results" / "baselines" / "main" / "samples.jsonl").exists()
        page = (tmp_path / "report.html").read_text()
        assert page.index("Verdict") < page.index("Physical against virtual")
        env["RUN"] = "push-2"
        assert step("Measure").returncode == 0   # the next push: gated against main
        gate = step("Gate")
        assert gate.returncode in (0, 1) and "compared metric(s)" in gate.stdout   # 1: a regression, as CI reads it
        (suite,) = list(JUnitXml.fromfile(str(tmp_path / "compare.xml")))
        names = {case.name for case in suite}
        assert {f"fio-job/qd1-randread/read {b} iops" for b in ("physical", "virtio-blk", "virtio-scsi")} <= names, names
        # what changed, and when: both pushes' runs, oldest first
        trend = subprocess.run(["harness", "trend", "iops", "--point", "qd1-randread", "--set", f"results_dir={env['RESULTS']}"],
                               cwd=tmp_path, env={**env, "COLUMNS": "250"}, capture_output=True, text=True, timeout=120)
        assert trend.returncode == 0, trend.stdout + trend.stderr
        runs = sorted(p.name for p in (tmp_path / "results").glob("push-*"))
        assert runs == ["push-1", "push-2"] and trend.stdout.index(runs[0]) < trend.stdout.index(runs[1])
        assert (tmp_path / "results" / "trend-iops.png").exists()
        # a push that breaks the VM disk path fails at Measure: its VM points fail for real (a job whose
        # buffers, 1 GiB, do not fit a 512 MiB guest, where the host's fio runs it), never "no regression"
        env["RUN"] = "push-3"
        (tmp_path / "big-buffers.fio").write_text("[big-buffers]\nrw=randread\nbs=32m\niodepth=32\nioengine=libaio\n"
                                                  "direct=1\n")
        broken = step("Measure", commands["Measure"].replace("--profile qd1-latency", "--job big-buffers.fio")
                      .replace("--backend virtio-blk,virtio-scsi", "--backend virtio-blk"))   # one fleet is enough
        assert broken.returncode == 3, broken.stdout + broken.stderr
        rows = [json.loads(line) for line in (tmp_path / "results" / "push-3" / "samples.jsonl").read_text().splitlines()]
        assert {r["env"] for r in rows if r["status"] == "failed"} == {"virtual"}
        assert any(r["env"] == "physical" and r["status"] == "ok" for r in rows)
    finally:
        assert step("Down").returncode == 0
    assert gc.leftovers("vtb-cix-") == [] and gc.leftovers("vtb-sw-cix-") == []
