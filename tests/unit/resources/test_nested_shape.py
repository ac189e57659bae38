"""A running nested host is kept only when its drives are the ones [nested] asks for."""
from pathlib import Path

import pytest

from harness.hosts.nested import NestedHost, NestedHostError, NestedRecord
from harness.resources import nested_l1
from harness.resources.nested_l1 import NestedConfig


def host_with(drives: int, mib: int, model: str = "nvme") -> NestedHost:
    record = NestedRecord(drives=[f"/dev/nvme{i}n1" for i in range(drives)], drive_model=model,
                          drive_mib=mib, image="x", l0_accel={}, ready_s=1.0)
    return NestedHost(Path("/nonexistent"), record)


def test_the_same_drives_keep_the_host():
    assert nested_l1._other_drives(host_with(4, 320), NestedConfig()) is None


def test_other_drives_name_both_shapes():
    why = nested_l1._other_drives(host_with(4, 256), NestedConfig())
    assert why == "it has 4 nvme drives of 256 MiB, the config asks for 4 nvme drives of 320 MiB"
    assert nested_l1._other_drives(host_with(4, 320, "virtio-blk"), NestedConfig()) is not None


def test_libvirtd_is_reached_through_sshd_and_never_forwarded_on_tcp():
    """The only forward is sshd's: no local user reaches the L1's libvirtd without the testbed's key."""
    from harness.hosts import accel
    choice = accel.AccelChoice(accel="tcg", domain_type="qemu", reason="test")
    xml = nested_l1.domain_xml(NestedConfig(), Path("/s/nested"), choice, ssh_port=40022)
    assert xml.count("hostfwd=") == 1 and "hostfwd=tcp:127.0.0.1:40022-:22" in xml and "16509" not in xml
    host = NestedHost(Path("/s/nested"), NestedRecord(drives=[], drive_model="nvme", drive_mib=1, image="x", l0_accel={},
                                                      ready_s=1.0, ssh_port=40022, identity="/s/ssh/id_ed25519",
                                                      known_hosts="/s/nested/known_hosts"))
    assert host.uri == ("qemu+ssh://root@127.0.0.1:40022/system?keyfile=/s/ssh/id_ed25519"
                        "&knownhosts=/s/nested/known_hosts&sshauth=privkey")


def test_a_host_booted_with_libvirtd_on_tcp_is_not_used(tmp_path):
    (tmp_path / "nested.json").write_text('{"port": 40509, "drives": [], "drive_model": "nvme", "drive_mib": 1, '
                                          '"image": "x", "l0_accel": {}, "ready_s": 1.0, "ssh_port": 40022}')
    with pytest.raises(NestedHostError, match="older vtb, its libvirtd on unauthenticated TCP"):
        NestedHost.load(tmp_path)
