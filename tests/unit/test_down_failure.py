"""A failed `terraform destroy` is never ignored: what it left is removed directly and checked;
when something remains, `testbed down` fails naming it and keeps the state for a retry."""
from __future__ import annotations

import subprocess

import pytest

from harness import gc, settings, testbed
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
