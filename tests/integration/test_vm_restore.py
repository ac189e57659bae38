"""Fleets started from a saved, booted template, for real: each restored guest is its own machine
(name, clock, RNG, its own data disk), and measures; a shape libvirt cannot save (emulated NVMe)
and `fleet.restore = false` boot, each with its reason; teardown leaves nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_harness import harness

from harness.fleet import gc
from harness.libvirt.agent import guests

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
STATE = Path("/var/tmp/vtb-ci")
FLEET = ["--config", str(CONFIG), "--set", "fleet.name=rs"]
PREFIX = "vtb-rs-"


def up(*sets: str) -> dict:
    harness("testbed", "up", *FLEET, *(a for s in sets for a in ("--set", s)))
    return json.loads((STATE / "rs" / "testbed.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def clean():
    harness("testbed", "down", *FLEET, check=False)
    yield
    harness("testbed", "down", *FLEET)
    assert gc.leftovers(PREFIX) == []
    assert not (STATE / "rs").exists()


@pytest.mark.extended(why="every fleet in make test is restored; these are restore's edge cases")
def test_restored_guests_are_each_their_own_machine():
    record = up()
    assert {n: s["how"] for n, s in record["started"].items()} == {"vtb-rs-vm0": "restored", "vtb-rs-vm1": "restored"}
    with guests(record["uri"], ["vtb-rs-vm0", "vtb-rs-vm1"]) as agents:
        seen = {a.vm: a.run(["/bin/sh", "-c", "hostname; head -c 16 /dev/urandom | od -An -tx1"]).stdout.decode().split("\n")
                for a in agents}
        offsets = [a.clock_offset_s() for a in agents]
    assert [seen[n][0] for n in ("vtb-rs-vm0", "vtb-rs-vm1")] == ["vtb-rs-vm0", "vtb-rs-vm1"]
    assert seen["vtb-rs-vm0"][1] != seen["vtb-rs-vm1"][1]          # RNGs re-seeded apart
    assert all(abs(o) < 2 for o in offsets), offsets                # clocks set to this machine's


@pytest.mark.extended(why="every fleet in make test is restored and measures")
def test_a_restored_fleet_measures(tmp_path):
    harness("run", "vm-scaling", *FLEET, "--set", f"results_dir={tmp_path}", "--set", "repeat.count=1",
            "--set", "vm_scaling.vm_counts=[2]")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    virtual = [r for r in rows if r["env"] == "virtual" and r["metric"] == "aggregate_iops"]
    assert virtual and all(r["status"] == "ok" and r["value"] > 0 and r["vm_start"] == "restored" for r in virtual)
    seeds = {json.loads(p.read_text())["global options"]["randseed"] for p in (run / "raw").rglob("vtb-rs-vm*.json")}
    assert len(seeds) >= 2                                           # each VM's fio drew its own


@pytest.mark.extended(why="restore's edge cases")
def test_a_shape_libvirt_cannot_save_boots_with_the_reason():
    record = up("disk.backend=nvme")
    assert all(s["how"] == "booted" and "non-migratable" in s["reason"] for s in record["started"].values())


@pytest.mark.extended(why="restore's edge cases")
def test_restore_off_boots():
    record = up("fleet.restore=false")
    assert all((s["how"], s["reason"]) == ("booted", "fleet.restore is false") for s in record["started"].values())


SAVES = Path("/var/cache/vtb/saves")


def _templates(record: dict) -> set[str]:
    return {s["template"] for s in record["started"].values() if s["how"] == "restored"}


@pytest.mark.extended(why="restore's edge cases, a fleet per daemon backend")
@pytest.mark.parametrize("backend", ["vhost-user-blk-qsd", "nbd", "iscsi"])
def test_a_disk_served_from_outside_qemu_restores_only_from_a_template_of_its_size(backend):
    """Such a disk's size is on the daemon's command line, not in the domain XML: two sizes of one
    shape make two templates, and each fleet restores from its own (its guests see their own slices)."""
    small, large = up(f"disk.backend={backend}", "fleet.disk_size_mib=64"), up(f"disk.backend={backend}")
    for record in (small, large):
        assert {s["how"] for s in record["started"].values()} == {"restored"}, record["started"]
    assert len(_templates(small)) == len(_templates(large)) == 1
    assert _templates(small) != _templates(large)


@pytest.mark.extended(why="restore's edge cases")
def test_a_restore_the_guest_shows_wrong_boots_anew_and_saves_a_fitting_template():
    """A template that lies (it holds a guest that saw a 64 MiB disk, under the key of a 128 MiB one):
    the restored guests see the wrong size, the template is thrown away, the VMs boot, a fitting
    template is saved and restored from, and the record says so."""
    small, large = up("disk.backend=nbd", "fleet.disk_size_mib=64"), up("disk.backend=nbd")
    (lie,), (fit,) = _templates(small), _templates(large)
    harness("testbed", "down", *FLEET)
    for name in ("state.save", "root.qcow2"):
        (SAVES / fit / name).write_bytes((SAVES / lie / name).read_bytes())
    record = up("disk.backend=nbd")
    assert {s["how"] for s in record["started"].values()} == {"restored"}, record["started"]
    assert all("a first restore was wrong" in s["reason"] and "bytes and its slice" in s["reason"]
               for s in record["started"].values()), record["started"]
