"""A running nested host is kept only when its drives are the ones [nested] asks for."""
from pathlib import Path

from harness import nested_host
from harness.config import NestedConfig
from harness.hosts.nested import NestedHost, NestedRecord


def host_with(drives: int, mib: int, model: str = "nvme") -> NestedHost:
    record = NestedRecord(port=1, drives=[f"/dev/nvme{i}n1" for i in range(drives)], drive_model=model,
                          drive_mib=mib, image="x", l0_accel={}, ready_s=1.0)
    return NestedHost(Path("/nonexistent"), record)


def test_the_same_drives_keep_the_host():
    assert nested_host._other_drives(host_with(4, 320), NestedConfig()) is None


def test_other_drives_name_both_shapes():
    why = nested_host._other_drives(host_with(4, 256), NestedConfig())
    assert why == "it has 4 nvme drives of 256 MiB, the config asks for 4 nvme drives of 320 MiB"
    assert nested_host._other_drives(host_with(4, 320, "virtio-blk"), NestedConfig()) is not None
