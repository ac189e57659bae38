"""Device safety checks against real loop devices (root only; the host has loop support)."""
import os
import subprocess
from pathlib import Path

import pytest

from harness.config.core import ConfigError
from harness.engine import settings
from harness.resources.devices import refuse_reason

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for loop devices")


@pytest.fixture
def loop(tmp_path):
    backing = tmp_path / "vtb-test-loop.img"
    backing.write_bytes(b"\x5a" * (40 << 20))
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        yield Path(dev), backing
    finally:
        subprocess.run(["umount", dev], capture_output=True)
        subprocess.run(["losetup", "-d", dev], check=True)


def test_a_blank_device_on_the_allowlist_is_accepted_and_off_it_refused(loop, tmp_path):
    """#28: on this machine fleet.device must be on raid.allow too (compared as disks: a link to it
    is the same disk), checked just before use: a mistyped disk that is blank and unmounted is
    refused. (Not as the config loads: a fleet made before must still be torn down.)"""
    from harness.common.schema import Refusal
    from harness.fleet.testbed import Testbed
    from harness.hosts import LocalHost
    dev, _ = loop
    assert refuse_reason(dev) is None
    alias = tmp_path / "by-id-name"
    alias.symlink_to(dev)
    cfg = settings.load(None, [f"fleet.device={dev}", f"raid.allow=[\"{alias}\"]", "fleet.disk_size_mib=16", "fleet.vms=2",
                               f"state_dir={tmp_path / 'state'}"])
    assert cfg.fleet.device == dev
    Testbed(cfg, LocalHost())._user_device_gate(str(dev))
    cfg = settings.load(None, [f"fleet.device={dev}", "fleet.disk_size_mib=16", "fleet.vms=2", f"state_dir={tmp_path / 'state'}"])
    with pytest.raises(Refusal, match=rf"fleet.device {dev} refused: not on raid.allow; add it there"):
        Testbed(cfg, LocalHost())._user_device_gate(str(dev))


def test_device_too_small_for_the_fleet_is_refused(loop):
    dev, _ = loop
    with pytest.raises(ConfigError, match=r"\(40 MiB\) is smaller than fleet.vms x fleet.disk_size_mib \(2 x 32 MiB\)"):
        settings.load(None, [f"fleet.device={dev}", "fleet.disk_size_mib=32"])


def test_filesystem_signature_is_refused_unless_wipe(loop):
    dev, _ = loop
    subprocess.run(["mkfs.ext4", "-q", str(dev)], check=True)
    assert "ext4 signature" in refuse_reason(dev)
    with pytest.raises(ConfigError, match="fleet.wipe=true"):
        settings.load(None, [f"fleet.device={dev}", "fleet.disk_size_mib=16"])
    assert refuse_reason(dev, allow_signature=True) is None


def test_mounted_device_is_refused_even_with_wipe(loop, tmp_path):
    dev, _ = loop
    subprocess.run(["mkfs.ext4", "-q", str(dev)], check=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", str(dev), str(mnt)], check=True)
    try:
        assert "is mounted on" in refuse_reason(dev, allow_signature=True)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_partition_table_is_refused_unless_wipe(loop):
    dev, _ = loop
    subprocess.run(["sfdisk", "--quiet", str(dev)], input="label: gpt\n", text=True, check=True)
    assert "gpt signature" in refuse_reason(dev, wipe_field="raid.wipe")
    assert "set raid.wipe=true" in refuse_reason(dev, wipe_field="raid.wipe")
    assert refuse_reason(dev, allow_signature=True) is None


def test_held_device_is_refused(loop):
    """A device held open exclusively (as an md array or a mount holds its members)."""
    dev, _ = loop
    holder = subprocess.Popen(["python3", "-c", "import os,sys,time; os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL); "
                               "print('held', flush=True); time.sleep(30)", str(dev)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert "in use" in refuse_reason(dev, allow_signature=True)
    finally:
        holder.kill()
        holder.wait()


def test_missing_and_non_block_devices_are_refused(tmp_path):
    assert refuse_reason(tmp_path / "nope") == "it does not exist"
    assert refuse_reason(Path("/dev/null")) == "it is not a block device"


def test_checks_run_on_the_host_that_holds_the_device(loop):
    """The same rules, evaluated by the host's own python3 (as on a nested host)."""
    from harness.hosts import LocalHost
    from harness.resources.devices import refuse_reason_on
    dev, _ = loop
    assert refuse_reason_on(LocalHost(), str(dev)) is None
    subprocess.run(["mkfs.ext4", "-q", str(dev)], check=True)
    assert "ext4 signature" in refuse_reason_on(LocalHost(), str(dev))


def test_a_signature_probe_that_cannot_run_is_a_refusal_not_a_blank_device(loop, monkeypatch):
    dev, _ = loop
    monkeypatch.setenv("PATH", "/nonexistent")   # no wipefs: nothing was checked
    assert refuse_reason(dev) == "wipefs is not installed here, so its signatures cannot be checked; install util-linux"
    assert refuse_reason(dev, allow_signature=True) is None   # wiping allowed: no probe needed


def test_a_signature_probe_that_fails_is_a_refusal_not_a_blank_device(loop, monkeypatch, tmp_path):
    """#28: wipefs's own exit status counts: a probe error with empty output is not "no signature"."""
    dev, _ = loop
    (tmp_path / "wipefs").write_text("#!/bin/sh\necho 'wipefs: error: probing initialization failed' >&2\nexit 1\n")
    (tmp_path / "wipefs").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert refuse_reason(dev) == ("wipefs could not read its signatures (wipefs: error: probing initialization failed); "
                                  "a device that cannot be checked is not used")
