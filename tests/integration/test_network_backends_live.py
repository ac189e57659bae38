"""The network block paths for real under TCG: `harness run backends` measures nbd and iscsi PE and
VE, with their daemons' CPU, and leaves nothing behind."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fleet import gc

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
HARNESS = str(Path(sys.executable).parent / "harness")
# A fleet name of their own: these run in the nested hosts' lane (tests/conftest.py), beside the ci
# fleet's sweeps in the other lane.
OWN_FLEET = ["--set", "fleet.name=net"]
SWEEP_PREFIX = "vtb-sw-net-"
SMALL = ["--set", 'latency.patterns=["randread"]', "--set", "iops.numjobs=[1]", "--set", "iops.iodepth=[4]",
         "--set", 'bandwidth.patterns=["read"]', "--set", "bandwidth.numjobs=1", "--set", "bandwidth.iodepth=4",
         "--runtime", "1", "--ramp", "0", "--set", "repeat.count=1"]


@pytest.mark.parametrize(("backend", "cpu", "daemon"), [("nbd", "daemon_cpu_s", "qemu-storage-daemon"),
                                                        ("iscsi", "tgt_cpu_s", "tgtd")])
@pytest.mark.core
@pytest.mark.covers(experiments="latency", backends=("nbd", "iscsi"))
def test_a_network_backend_against_the_host(tmp_path, backend, cpu, daemon):
    out = subprocess.run([HARNESS, "run", "backends", "--set", f"results_dir={tmp_path}",
                          "--set", f'backends.backends=["{backend}"]', *SMALL, "--config", str(CONFIG), *OWN_FLEET],
                         capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    got = {(r["group"], r["backend"]) for r in rows if r["metric"] in ("lat_mean", "iops", "bw")}
    assert got == {(g, b) for g in ("latency", "iops", "bandwidth") for b in ("host", backend)}
    assert len([r for r in rows if r["metric"] == "ve_pe_ratio" and r["value"] > 0]) == 3
    virtual = [r for r in rows if r["backend"] == backend and r["metric"] == "iops"]
    assert virtual and all(r[cpu] > 0 for r in virtual)   # its daemon's CPU, recorded with every sample
    assert gc.leftovers(SWEEP_PREFIX) == []
    assert SWEEP_PREFIX not in subprocess.run(["pgrep", "-af", daemon], capture_output=True, text=True).stdout
