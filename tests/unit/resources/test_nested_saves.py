"""The nested host's saved booted states: what keys them, and how they are kept (the live path is
tests/integration/test_nested_raid.py's: an up restores the L1 that the first up saved)."""
from __future__ import annotations

import json
import os
import time

import pytest

from harness.resources import nested_saves


@pytest.fixture(autouse=True)
def saves(tmp_path, monkeypatch):
    monkeypatch.setattr(nested_saves, "SAVES", tmp_path / "saves")
    return tmp_path / "saves"


XML = ("<domain><name>vtb-nested</name><memory unit='MiB'>3072</memory><qemu:commandline>"
       "<qemu:arg value='user,id=vtbnet,hostfwd=tcp:127.0.0.1:{port}-:22'/></qemu:commandline></domain>")


def test_the_key_is_what_the_l1_sees_not_its_forwarded_port():
    def key(xml=XML.format(port=1), image="img", versions="libvirt 9 qemu 7", drive_mib=320):
        return nested_saves.key(xml, image, versions, drive_mib=drive_mib)
    same = {key(XML.format(port=p)) for p in (2222, 40123)}
    assert len(same) == 1
    assert key(XML.format(port=1).replace("3072", "4096")) not in same
    assert key(image="img2") not in same and key(versions="libvirt 9 qemu 8") not in same
    assert key(drive_mib=64) not in same   # a drive's size is not in the XML (QEMU reads it from the file)


def made(saves, k: str, age_s: float = 0) -> None:
    (saves / k).mkdir(parents=True)
    for f in ("state.save", "root.qcow2"):
        (saves / k / f).write_bytes(b"x")
    (saves / k / "saved.json").write_text(json.dumps({"uuid": "u-" + k}))
    t = time.time() - age_s
    os.utime(saves / k / "saved.json", (t, t))


def test_only_a_whole_save_counts_and_a_refused_key_says_why(saves):
    made(saves, "a")
    assert nested_saves.saved("a")["uuid"] == "u-a"
    (saves / "a" / "root.qcow2").unlink()
    assert nested_saves.saved("a") is None and nested_saves.saved("nothing") is None
    nested_saves.refuse("b", "saving failed before: x")
    assert nested_saves.refused("b") == "saving failed before: x" and nested_saves.refused("c") is None


def test_the_most_recently_used_are_kept_and_half_made_ones_go_after_an_hour(saves):
    for i in range(nested_saves.KEEP + 2):
        made(saves, f"k{i:02}", age_s=7200 + 100 * i)
    made(saves, "used-now")   # beyond KEEP, but used within the hour: another up may be restoring it
    (saves / ".k9-1").mkdir()
    os.utime(saves / ".k9-1", (time.time() - 7200,) * 2)
    (saves / ".k8-2").mkdir()   # being made now
    nested_saves._prune()
    assert sorted(p.name for p in saves.iterdir()) == [".k8-2", *(f"k{i:02}" for i in range(nested_saves.KEEP - 1)),
                                                        "used-now"]
    nested_saves.forget("k00")
    assert not (saves / "k00").exists()
