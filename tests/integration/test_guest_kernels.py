"""The guest image's two kernels, for real: the cloud kernel by default, the generic one where
fleet.kernel asks for it, in which a guest makes and measures on f2fs and nilfs2 (the filesystems
the cloud kernel lacks; nilfs2 needs 132 MiB); switching the kernel restarts the VM on it;
teardown leaves nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_harness import harness

from harness.fleet import gc
from harness.fleet.testbed import TestbedRecord
from harness.libvirt.agent import guests
from harness.resources.raid import MKFS
from harness.workloads import fio

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
STATE = Path("/var/tmp/vtb-ci")
FLEET = ["--config", str(CONFIG), "--set", "fleet.name=gk", "--set", "fleet.vms=1", "--set", "fleet.disk_size_mib=160"]


def up(kernel: str) -> TestbedRecord:
    harness("testbed", "up", *FLEET, "--set", f"fleet.kernel={kernel}")
    return TestbedRecord.from_json((STATE / "gk" / "testbed.json").read_text())


def uname(record: TestbedRecord) -> str:
    with guests(record.uri, [record.vms[0].name]) as (agent,):
        return agent.run(["uname", "-r"]).stdout.decode().strip()


@pytest.fixture(scope="module", autouse=True)
def clean():
    harness("testbed", "down", *FLEET, check=False)
    yield
    harness("testbed", "down", *FLEET)
    assert gc.leftovers("vtb-gk-") == []


@pytest.mark.extended(why="a second guest kernel, booted for two filesystems")
def test_the_generic_kernel_makes_f2fs_and_nilfs2_in_a_guest_and_the_cloud_one_is_the_default():
    record = up("generic")
    assert uname(record).endswith("-amd64") and "cloud" not in uname(record)
    assert record.metadata()["guest_kernel"] == "generic"
    # a fixed count of writes: nilfs2 logs every write, and a timed run fills a small one
    job = fio.FioJob(rw="randwrite", direct=False, runtime_s=30, ramp_s=0, iodepth=1, ios=2000)
    for fs in ("f2fs", "nilfs2"):
        (out,) = fio.in_guests(record.uri, job, record.vms, size=32 << 20, extra_env=fio.fs_env(MKFS[fs]))
        assert fio.parse(out.raw).iops > 0, fs
    assert "cloud" in uname(up("cloud"))            # another kernel restarts the VM on it
    assert json.loads((STATE / "gk" / "testbed.json").read_text())["fleet"]["kernel"] == "cloud"
