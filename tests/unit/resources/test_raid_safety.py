"""RAID plan refusals on this machine's own devices (loop devices; the nested-host integration
test proves the rest on real md). Nothing here writes to a device: every plan is refused."""
import os
import subprocess
from pathlib import Path

import pytest

from harness.config.core import ConfigError
from harness.engine import settings
from harness.hosts import LocalHost
from harness.resources import raid

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for loop devices")


@pytest.fixture
def loops(tmp_path):
    devs = []
    for i in range(2):
        backing = tmp_path / f"vtb-test-raid{i}.img"
        backing.write_bytes(b"\x5a" * (16 << 20))
        devs.append(subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True,
                                   check=True).stdout.strip())
    yield devs
    for d in devs:
        subprocess.run(["losetup", "-d", d], check=True)


def plan(members, **kw):
    return raid.RaidPlan(**{"name": "vtb-test-raid", "level": 0, "members": members, "chunk_kib": 64,
                            "allow": members, **kw})


def test_free_allowlisted_members_pass(loops):
    assert raid.refusals(LocalHost(), plan(loops)) == []


def test_member_not_on_the_allowlist(loops):
    assert raid.refusals(LocalHost(), plan(loops, allow=loops[:1])) == [
        f"{loops[1]}: not on the allowlist (raid.allow); add it there only if the harness may destroy its data"]


def test_the_allowlist_compares_disks_not_strings(loops, tmp_path):
    """An entry by a stable name (a /dev/disk/by-id link, here one made in tmp) allows the disk it
    names under its kernel name, and no other disk."""
    by_id = tmp_path / "nvme-SAMSUNG_MZ1LB960_S3Z0NX0M123456"
    by_id.symlink_to(loops[0])
    assert raid.device_refusals(LocalHost(), [loops[0]], [str(by_id)], wipe=False) == []
    (why,) = raid.device_refusals(LocalHost(), [loops[1]], [str(by_id)], wipe=False)
    assert why.startswith(f"{loops[1]}: not on the allowlist (raid.allow)")


def test_too_few_members_for_the_level(loops):
    assert "RAID 5 needs at least 3 member devices, got 2" in raid.refusals(LocalHost(), plan(loops, level=5))[0]


def test_signature_refused_unless_wipe(loops):
    subprocess.run(["mkfs.ext4", "-q", loops[1]], check=True)
    (why,) = raid.refusals(LocalHost(), plan(loops))
    assert why.startswith(f"{loops[1]}: it carries a ext4 signature") and "raid.wipe=true" in why
    assert raid.refusals(LocalHost(), plan(loops, wipe=True)) == []


def test_mounted_member_refused_even_with_wipe(loops, tmp_path):
    subprocess.run(["mkfs.ext4", "-q", loops[0]], check=True)
    subprocess.run(["mount", loops[0], str(tmp_path)], check=True)
    try:
        (why,) = raid.refusals(LocalHost(), plan(loops, wipe=True))
        assert why == f"{loops[0]}: {loops[0]} is mounted on {tmp_path}; unmount it or choose another device"
    finally:
        subprocess.run(["umount", str(tmp_path)], check=True)


def test_system_disk_refused_even_when_allowlisted(loops):
    root = next(l.split()[0] for l in Path("/proc/mounts").read_text().splitlines() if l.split()[1] == "/")
    if not root.startswith("/dev/"):
        pytest.skip("the root filesystem is not on a block device here")
    why = raid.refusals(LocalHost(), plan([root, loops[0]], wipe=True))[0]
    assert why.startswith(f"{root}: it is (or is on) the host's system disk")


def test_create_refuses_and_changes_nothing(loops):
    subprocess.run(["mkfs.ext4", "-q", loops[1]], check=True)
    with pytest.raises(raid.RaidError, match=f"refusing to create the array:\n  {loops[1]}: it carries"):
        raid.create(LocalHost(), plan(loops))
    assert b"ext4" in subprocess.run(["wipefs", "-n", loops[1]], capture_output=True).stdout  # still there


def test_config_names_the_field_and_the_fix():
    with pytest.raises(ConfigError, match=r"raid.members: RAID 5 needs at least 3 member devices, got 2"):
        settings.load(None, ["raid.level=5", 'raid.members=["/dev/a","/dev/b"]'])
    with pytest.raises(ConfigError, match=r"raid.members: /dev/b not in raid.allow"):
        settings.load(None, ["raid.level=0", 'raid.members=["/dev/a","/dev/b"]', 'raid.allow=["/dev/a"]'])
    with pytest.raises(ConfigError, match=r"stripe_size.chunks_kib: a chunk size must be a power of two KiB"):
        settings.load(None, ["stripe_size.chunks_kib=[96]"])
    with pytest.raises(ConfigError, match=r"raid_levels.levels"):
        settings.load(None, ["raid_levels.levels=[4]"])
