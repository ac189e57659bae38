"""Terraform on a host that stops answering is stopped within minutes, not after its 20-minute
bound: the host and its libvirtd are asked while it runs."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.common import paths
from harness.engine import settings
from harness.fleet import testbed


@dataclass(frozen=True)
class SilentHost:
    """A host whose checks fail (the provider's own calls on it would wait without end)."""
    is_this_machine = False
    rebuildable = False
    uri: str = "qemu+ssh://root@192.0.2.1/system"
    name: str = "silent"
    label: str = "host silent (root@192.0.2.1)"
    drives: tuple[str, ...] = ("/dev/vdb",)
    l0_accel: str = "n/a"

    def stopped(self) -> str | None:
        return "host silent (root@192.0.2.1) does not answer over SSH (timeout)"

    def fleet_dir(self, local: Path, fleet: str) -> Path:
        return local

    def descriptor(self) -> dict:
        return {"kind": "ssh"}


def terraform_that_never_ends(tmp_path, monkeypatch, says: str) -> None:
    """A terraform that prints `says` and waits without end (as the provider does on a lost host),
    watched every 0.2 s."""
    fake = tmp_path / "tf"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "terraform").write_text(f"#!/bin/sh\necho {says}\nexec sleep 600\n")
    (fake / "bin" / "terraform").chmod(0o755)
    monkeypatch.setattr(paths, "TERRAFORM_CACHE", fake)
    monkeypatch.setattr(testbed, "HOST_CHECK_EVERY_S", 0.2)
    monkeypatch.setattr(testbed, "HOST_SILENT_CHECKS", 2)


def test_terraform_on_a_host_that_stops_answering_is_stopped_early(tmp_path, monkeypatch):
    terraform_that_never_ends(tmp_path, monkeypatch, "applying")
    cfg = settings.load(None, [f"state_dir={tmp_path / 'state'}"])
    bed = testbed.Testbed(cfg, host=SilentHost(), device="/dev/vdb")
    t0 = time.monotonic()
    with pytest.raises(testbed.TestbedError, match="did not answer 2 checks") as err:
        bed._terraform("apply")
    assert time.monotonic() - t0 < 10
    assert "does not answer over SSH" in str(err.value) and "harness host nested down" in str(err.value)
    assert "applying" in bed.log.read_text()   # what it printed is kept


@dataclass(frozen=True)
class SilentNestedHost(SilentHost):
    """A nested host (an L1 VM that vtb booted) whose L1 hung."""
    rebuildable = True
    domain: str = "vtb-unit-no-such-nested"
    state_dir: Path = Path("/nonexistent")

    def descriptor(self) -> dict:
        return {"kind": "nested", "state_dir": str(self.state_dir)}


def stuck_teardown(tmp_path, monkeypatch, host) -> testbed.Testbed:
    """A fleet whose terraform destroy never ends, on `host`."""
    terraform_that_never_ends(tmp_path, monkeypatch, "destroying")
    cfg = settings.load(None, [f"state_dir={tmp_path / 'state'}"])
    bed = testbed.Testbed(cfg, host=host, device="/dev/vdb")
    bed.dir.mkdir(parents=True)
    for name in ("terraform.tfstate", "fleet.tfvars.json", "raid-0123456789ab.json"):
        (bed.dir / name).write_text("{}")
    return bed


def test_a_hung_nested_host_is_removed_at_teardown_and_its_fleet_with_it(tmp_path, monkeypatch):
    """Everything of the fleet lives in the L1, so removing the L1 removes it all; nothing is asked
    of the hung host (its arrays went with it)."""
    l1 = tmp_path / "state" / "nested"
    (l1 / "drives").mkdir(parents=True)
    bed = stuck_teardown(tmp_path, monkeypatch, SilentNestedHost(state_dir=l1))
    removed = bed.down()
    assert removed == [f"files {l1}"] and not l1.exists() and not bed.dir.exists()


def test_a_host_of_the_user_that_stops_answering_at_teardown_is_left_and_said(tmp_path, monkeypatch):
    bed = stuck_teardown(tmp_path, monkeypatch, SilentHost())
    with pytest.raises(testbed.TestbedError, match="terraform destroy on host silent .* was stopped"):
        bed.down()
    assert (bed.dir / "terraform.tfstate").exists()   # kept, for a retry once the host is back
