"""noisy-neighbour for real under TCG: the victim's QD1 latency alone and beside a busy VM, on the
host and in the VMs, and beside a neighbour that libvirt's iotune holds to its cap (its own fio
report, kept with the victim's, shows the cap held); the experiment's fleet goes afterwards."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fleet import gc
from harness.workloads import fio

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
HARNESS = str(Path(sys.executable).parent / "harness")
CAP = 50


@pytest.mark.extended(why="a study: neighbour VMs")
@pytest.mark.covers(experiments="noisy-neighbour")
def test_a_neighbour_inflates_the_victims_latency_unless_capped(tmp_path):
    out = subprocess.run([HARNESS, "run", "noisy-neighbour", "--config", str(CONFIG), "--neighbours", "0,1",
                          "--cap-iops", str(CAP), "--runtime", "2", "--set", "noisy_neighbour.victim.ramp_s=0",
                          "--set", "repeat.count=1", "--set", f"results_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    got = {(r["point"], r["env"]) for r in rows if r["metric"] == "lat_p99" and r["status"] == "ok"}
    assert got == {("n0", "physical"), ("n0", "virtual"), ("n1", "physical"), ("n1", "virtual"), ("n1-capped", "virtual")}
    assert {r["iodepth"] for r in rows if r["metric"] == "lat_p99"} == {1}   # the victim at QD1
    capped = [r for r in rows if r["point"] == "n1-capped" and r["metric"] in ("lat_p99", "ve_pe_ratio")]
    assert {r["cap_iops"] for r in capped} == {CAP}
    assert [r["baseline_point"] for r in capped if r["metric"] == "ve_pe_ratio"] == ["n1/physical"]
    # the neighbour's own report, kept beside the victim's: the cap held it, and without it ran faster
    reports = {p.parent.name: fio.parse(p.read_text()).iops for p in (run / "raw" / "n1").rglob("*.neighbour-*.json")}
    assert set(reports) == {"virtual", "virtual-capped", "physical"}, reports
    assert reports["virtual-capped"] <= CAP * 1.2 < reports["virtual"], reports
    assert "noisy-neighbour: the victim's QD1 latency" in (run / "summary.txt").read_text()
    assert gc.leftovers("vtb-nn-ci-") == []
