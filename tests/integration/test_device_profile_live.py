"""device-profile for real, sized to fit: the fleet's own file and a RAM-backed loop device, each
read and written zone by zone and randomly at QD1 with a fixed request count, from the host and
in a VM on it; both plots, the CIs, and nothing left behind (fleets, loops, the RAM file)."""
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


@pytest.mark.extended(why="a study: two devices' profiles, PE and VE")
@pytest.mark.covers(experiments="device-profile")
def test_device_profile_of_a_file_and_tmpfs_pe_and_ve(tmp_path):
    out = subprocess.run([HARNESS, "run", "device-profile", "--config", str(CONFIG), "--set", f"results_dir={tmp_path}",
                          "--devices", "default,tmpfs", "--set", "device_profile.size_mib=32",
                          "--set", "device_profile.zone_mib=16", "--set", "device_profile.seq_runtime_s=1",
                          "--set", "device_profile.random_ios=500", "--set", "repeat.count=1"],
                         capture_output=True, text=True, timeout=900)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows if r["status"] != "ok"]
    zones = {(r["profiled_device"], r["zone_offset_mib"], r["direction"], r["env"]) for r in rows
             if r.get("profile") == "zone" and r["metric"] == "bw" and r["value"] > 0}
    assert zones == {(d, o, rw, e) for d in ("default", "tmpfs") for o in (0, 16) for rw in ("read", "write")
                     for e in ("physical", "virtual")}
    random = [r for r in rows if r.get("profile") == "random" and r["metric"] == "requests" and r["repeat"] != "all"]
    assert len(random) == 2 * 2 * 2 and all(r["value"] == 500 for r in random)   # exactly the requests asked for
    assert any(r["metric"] == "iops_req_ci_lo" for r in rows)   # a run's own CI over its requests
    summary = (run / "summary.txt").read_text()
    assert "read/write asymmetry" in summary and "tmpfs" in summary and "±" in summary
    for png in ("device-profile-zones.png", "device-profile-random.png"):
        assert (run / png).read_bytes()[:4] == b"\x89PNG"
    assert not gc.leftovers("vtb-dp-ci-") and not list(Path("/dev/shm").glob("vtb-dp-ci-*"))
    assert "vtb-dp-ci" not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
