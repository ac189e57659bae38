"""SPDK's vhost target for real: built from the vendored source (cached), started by the fleet's
Terraform hook with its hugepages, one VM on vhost-user-blk-spdk with fio in the guest and host
fio on the same slice, in polling and in interrupt mode; then teardown, and gc after a crash,
leaving no SPDK process, no hugepages reserved by vtb and no sockets."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from run_harness import harness

from harness.backends import spdk_target
from harness.common import paths
from harness.fleet import gc
from harness.hosts import LocalHost
from harness.resources import hugepages

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
STATE = Path("/var/tmp/vtb-ci")
FLEET = ["--config", str(CONFIG), "--set", "fleet.name=spdk", "--set", "disk.backend=vhost-user-blk-spdk",
         "--set", "fleet.vms=1"]
PREFIX = "vtb-spdk-"


def reserved_pages() -> int:
    return int(Path(hugepages.NR_HUGEPAGES).read_text())


def spdk_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-af", "bin/vhost "], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if PREFIX in l]


@pytest.mark.core
def test_the_build_is_cached():
    out = subprocess.run(["bash", str(paths.REPO / "scripts" / "spdk.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    assert "spdk: cached" in out.stdout or "spdk: built" in out.stdout
    assert spdk_target.missing_build("") is None
    again = subprocess.run(["bash", str(paths.REPO / "scripts" / "spdk.sh")], capture_output=True, text=True, timeout=60)
    assert "spdk: cached" in again.stdout


@pytest.mark.extended(why="SPDK's two modes; make test measures SPDK in the backends sweep")
@pytest.mark.covers(backends="vhost-user-blk-spdk")
def test_one_vm_on_spdk_polling_and_interrupt_mode_then_nothing_is_left(tmp_path):
    before = reserved_pages()
    try:
        for interrupt in ("false", "true"):
            mode = ["--set", f"disk.spdk_interrupt={interrupt}"]
            up = harness("testbed", "up", *FLEET, *mode)
            assert "fleet ready" in up.stdout
            assert reserved_pages() > before and len(spdk_processes()) == 1
            assert ("--interrupt-mode" in spdk_processes()[0]) == (interrupt == "true")
            results = tmp_path / interrupt
            harness("run", "vm-scaling", *FLEET, *mode, "--set", f"results_dir={results}",
                    "--set", "vm_scaling.vm_counts=[1]", "--set", "repeat.count=1")
            (run,) = [p for p in results.iterdir() if p.is_dir()]
            rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
            assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
            iops = {r["env"]: r for r in rows if r["metric"] == "aggregate_iops"}
            assert set(iops) == {"physical", "virtual"} and all(r["value"] > 0 for r in iops.values())
            virtual = iops["virtual"]
            assert virtual["backend"] == "vhost-user-blk-spdk" and virtual["spdk_interrupt"] == (interrupt == "true")
            assert virtual["spdk_version"] == spdk_target.version("") != "unknown"
            assert virtual["spdk_cpu_s"] > 0 and "spdk_cpu_pct" in virtual   # the target's cost, recorded
            if interrupt == "false":   # a polling reactor: one core, busy or not; the settle wait ignores it
                # most of a core (less when the other lane of `make test` keeps both cores busy)
                assert virtual["spdk_cpu_pct"] > 50 and not virtual["settle_timed_out"]
            host_job = json.loads((run / "raw" / "physical-n1" / "host-slot0.json").read_text())["global options"]
            assert host_job["filename"].endswith("vtb-spdk-device.raw") and host_job["offset"] == "0"   # VM 0's slice
    finally:
        harness("testbed", "down", *FLEET, check=False)
    assert reserved_pages() == before and not spdk_processes() and not gc.leftovers(PREFIX)
    assert not list(STATE.glob("spdk/**/*.sock")) and not (STATE / "spdk").exists()


@pytest.mark.core
@pytest.mark.covers(backends="vhost-user-blk-spdk")
def test_after_a_crash_gc_stops_the_target_and_gives_the_hugepages_back():
    before = reserved_pages()
    try:
        harness("testbed", "up", *FLEET)
        assert len(spdk_processes()) == 1 and reserved_pages() > before
        removed = gc.collect(PREFIX, LocalHost())   # as after a SIGKILL: by the prefix alone
        print(removed)
        assert any("(vhost)" in r for r in removed) and any(r.startswith("hugepages: given back") for r in removed)
        assert reserved_pages() == before and not spdk_processes()
    finally:
        harness("testbed", "down", *FLEET, check=False)
    assert reserved_pages() == before and not gc.leftovers(PREFIX)
