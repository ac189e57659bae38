"""A failed `terraform destroy` is never ignored: what it left is removed directly and checked;
when something remains, `testbed down` fails naming it and keeps the state for a retry."""
from __future__ import annotations

import subprocess

import pytest

from harness.engine import settings
from harness.fleet import gc, testbed
from harness.hosts import LocalHost


def _bed(tmp_path, monkeypatch, remains: list[str]):
    cfg = settings.load(None, [f"state_dir={tmp_path / 'state'}"])
    bed = testbed.Testbed(cfg, host=LocalHost())
    bed.dir.mkdir(parents=True)
    for name in ("terraform.tfstate", "fleet.tfvars.json"):
        (bed.dir / name).write_text("{}")
    monkeypatch.setattr(bed, "_terraform", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "Error: locked"))
    monkeypatch.setattr(gc, "collect", lambda prefix, host, keep=(): [])
    monkeypatch.setattr(gc, "leftovers", lambda prefix, host, keep=(): list(remains))
    return bed


def test_a_failed_destroy_with_something_left_fails_down_and_keeps_the_state(tmp_path, monkeypatch):
    bed = _bed(tmp_path, monkeypatch, ["domain vtb-default-vm0"])
    with pytest.raises(testbed.TestbedError) as e:
        bed.down(quiet=True)
    assert "terraform destroy failed (exit 1" in str(e.value) and "domain vtb-default-vm0" in str(e.value)
    assert "run `harness testbed down` again" in str(e.value)
    assert (bed.dir / "terraform.tfstate").exists()


def test_a_failed_destroy_whose_leftovers_were_removed_says_so_and_finishes(tmp_path, monkeypatch):
    bed = _bed(tmp_path, monkeypatch, [])
    removed = bed.down(quiet=True)
    assert any("terraform destroy failed" in r and "nothing of the fleet remains" in r for r in removed)
    assert not bed.dir.exists()


def test_a_failed_destroy_undoes_the_backends_host_side_by_its_plan(tmp_path, monkeypatch):
    """#28: when Terraform's teardown hook may not have run, the backend's host side (a controller
    on vfio-pci, storage daemons) is undone from the plan the fleet kept, before its folder goes."""
    from harness import backends
    from harness.backends import HostDevice, HostPlan
    bed = _bed(tmp_path, monkeypatch, [])
    plan = HostPlan(prefix=bed.cfg.prefix, fleet_dir=str(bed.dir), disk={"backend": "vfio"},
                    device=HostDevice(path="/dev/null", kind="block"))
    (bed.dir / "backend-0.json").write_text(plan.to_json())
    undone = []
    monkeypatch.setattr(backends, "get", lambda name: type("B", (), {"host_down": lambda s, h, p: undone.append(p.prefix)})())
    removed = bed.down(quiet=True)
    assert undone == [bed.cfg.prefix] and f"vfio host side of {bed.cfg.prefix}" in removed
    assert not bed.dir.exists()


class _FailingDown:
    def __init__(self):
        self.calls = 0

    def down(self, quiet=False):
        self.calls += 1
        raise testbed.TestbedError("terraform destroy failed and vtb-x-vm0 remains")


def test_a_failed_teardown_after_a_failed_body_does_not_replace_its_error(capsys):
    """#28: Ctrl-C in a sweep stays Ctrl-C (exit 130) when its fleet's teardown fails too: the
    teardown's error is a warning. Without a failure first, the teardown's error is the error."""
    fleet = _FailingDown()
    with pytest.raises(KeyboardInterrupt):
        with testbed.torn_down_after(lambda: fleet, "the sweep fleet"):
            raise KeyboardInterrupt
    assert fleet.calls == 1 and "tearing down the sweep fleet failed too" in capsys.readouterr().out
    with pytest.raises(testbed.TestbedError, match="vtb-x-vm0 remains"):
        with testbed.torn_down_after(lambda: fleet):
            pass
    assert fleet.calls == 2
