"""The SPDK backend's JSON-RPC calls, answered with the replies a real SPDK v25.09 vhost target gave
(tests/fixtures/spdk/v25.09-replies.json), and its configuration and refusals. The live target is
run by tests/integration/test_spdk_live.py."""
import json
from pathlib import Path

import pytest
from spdk.rpc.client import JSONRPCException

from harness.backends import HostDevice, HostPlan, VmSlot, spdk_target
from harness.backends.spdk_target import SpdkError, call
from harness.backends.vhost_user_spdk import VhostUserSpdk, hugepage_plan
from harness.config.core import ConfigError
from harness.engine import settings

MIB = 1 << 20
RECORDED = json.loads((Path(__file__).parents[2] / "fixtures" / "spdk" / "v25.09-replies.json").read_text())


class RecordedTarget:
    """Stands in for the PyPI client's JSONRPCClient.call: answers each method with what v25.09
    answered, and rejects what v25.09 rejected (as the client raises it)."""

    def __init__(self, fail=()):
        self.calls, self.fail = [], set(fail)

    def call(self, method, params=None):
        self.calls.append((method, params))
        accepted = set(RECORDED["replies"][method]["params"] or {})
        for rejected in RECORDED["rejected"].get(method, []):
            shape = set(rejected["params"] or {})
            if method in self.fail or (shape != accepted and set(params or {}) == shape):
                raise JSONRPCException("Got JSON-RPC error response\nresponse:\n" + json.dumps(rejected["error"]))
        return RECORDED["replies"][method]["result"]


def plan(tmp_path, **disk):
    return HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path),
                    disk={"spdk_socket": "", "spdk_vhost_dir": "/var/tmp", "spdk_build": "", "spdk_interrupt": False,
                          "num_queues": 2, **disk},
                    device=HostDevice(path="/dev/nvme0n1", kind="block"),
                    vms=[VmSlot(0, "vtb-t-vm0", 0, 64 * MIB), VmSlot(1, "vtb-t-vm1", 64 * MIB, 64 * MIB)],
                    guest_memory_mib=512)


def test_serving_a_fleet_is_one_aio_bdev_split_per_vm_and_a_controller_each(tmp_path):
    target = RecordedTarget()
    VhostUserSpdk(rpc_factory=lambda sock: target)._serve(plan(tmp_path))
    assert target.calls == [
        ("bdev_aio_create", {"filename": "/dev/nvme0n1", "name": "vtb-t-aio", "block_size": 512}),
        ("bdev_split_create", {"base_bdev": "vtb-t-aio", "split_count": 2, "split_size_mb": 64}),
        ("vhost_create_blk_controller", {"ctrlr": "vtb-t-vm0", "dev_name": "vtb-t-aiop0"}),
        ("vhost_create_blk_controller", {"ctrlr": "vtb-t-vm1", "dev_name": "vtb-t-aiop1"}),
    ]


def test_only_the_given_fields_are_sent_since_v25_09_rejects_the_v26_helpers_extra_one():
    """spdk 26.x's bdev_aio_create sends nowait=false; v25.09 rejects the whole request for it.
    `call` sends exactly the fields named, so the pinned client's requests decode."""
    target = RecordedTarget()
    assert call(target, "bdev_aio_create", filename="/f", name="a", block_size=512) == "vtb-t-aio"
    with pytest.raises(SpdkError, match="bdev_aio_create failed: .*spdk_json_decode_object failed"):
        call(target, "bdev_aio_create", filename="/f", name="a", block_size=512, readonly=False, fallocate=False,
             nowait=False)


def test_teardown_reverses_and_keeps_going_past_spdk_errors(tmp_path):
    target = RecordedTarget(fail={"vhost_delete_controller"})
    p = plan(tmp_path, spdk_socket="/run/theirs.sock")   # a user's target: only RPCs, never stopped
    VhostUserSpdk(rpc_factory=lambda sock: target).host_down(None, p)
    assert [m for m, _ in target.calls] == ["vhost_delete_controller", "vhost_delete_controller",
                                           "bdev_split_delete", "bdev_aio_delete"]


def test_an_spdk_error_carries_its_message(tmp_path):
    with pytest.raises(SpdkError, match="bdev_aio_create failed: .*No such file or directory"):
        VhostUserSpdk(rpc_factory=lambda sock: RecordedTarget(fail={"bdev_aio_create"}))._serve(plan(tmp_path))


def test_controllers_up_are_read_from_the_target(tmp_path):
    got = VhostUserSpdk(rpc_factory=lambda sock: RecordedTarget())._controllers(plan(tmp_path))
    assert got == {"vtb-t-vm0", "vtb-t-vm1"}


def test_guests_get_hugepage_backed_shared_memory_and_the_harness_target_s_sockets(tmp_path):
    p = plan(tmp_path)
    a = VhostUserSpdk().attach(p, p.vms[1])
    assert "<hugepages/><source type='memfd'/><access mode='shared'/>" in a.domain_xml
    assert f"path={p.run_dir}/vtb-t-vm1\"" in a.domain_xml and "num-queues=2" in a.domain_xml
    assert a.locator == "pci:0000:00:10.0"
    theirs = VhostUserSpdk().attach(plan(tmp_path, spdk_socket="/run/s.sock", spdk_vhost_dir="/run/v"), p.vms[0])
    assert "path=/run/v/vtb-t-vm0\"" in theirs.domain_xml


def test_hugepages_cover_every_guest_and_the_target(tmp_path):
    hp = hugepage_plan(plan(tmp_path))
    assert hp.pages == (2 * 512 + spdk_target.MEM_MIB) // 2
    assert hp.mount.startswith(str(tmp_path / "vtb-t-run")) and hp.record.endswith("hugepages.json")


def test_the_target_command_line(tmp_path):
    t = spdk_target.Target(None, tmp_path / "vtb-t-run", Path("/cache/spdk/x"), "/hp", interrupt=True)
    argv = t.argv()
    assert argv[0] == "/cache/spdk/x/bin/vhost" and argv[argv.index("-S") + 1] == str(tmp_path / "vtb-t-run")
    assert argv[argv.index("-r") + 1].endswith("vtb-t-run/spdk.sock") and "--no-pci" in argv
    assert argv[argv.index("--huge-dir") + 1] == "/hp" and argv[-1] == "--interrupt-mode"
    assert "--interrupt-mode" not in spdk_target.Target(None, tmp_path, Path("/b"), "/hp", interrupt=False).argv()


def test_without_a_build_or_a_source_the_reason_says_how_to_provide_one(tmp_path, monkeypatch):
    monkeypatch.setattr(spdk_target, "CACHED_BUILD", tmp_path / "none")
    monkeypatch.setattr(spdk_target, "vendored_source", lambda: None)
    reason = spdk_target.missing_build("")
    assert "no SPDK build and no SPDK source" in reason and "VTB_SPDK_SOURCE" in reason and "disk.spdk_build" in reason
    assert "has no bin/vhost" in spdk_target.missing_build(str(tmp_path))
    monkeypatch.setattr(spdk_target, "vendored_source", lambda: Path("/shared/vendor/spdk-v25.09.tar.gz"))
    assert "make spdk" in spdk_target.missing_build("")
    (tmp_path / "b" / "bin").mkdir(parents=True)
    (tmp_path / "b" / "bin" / "vhost").touch()
    assert spdk_target.missing_build(str(tmp_path / "b")) is None


def test_a_users_target_with_start_options_is_refused():
    with pytest.raises(ConfigError, match="spdk_interrupt"):
        settings.load(None, ["disk.backend=vhost-user-blk-spdk", "disk.spdk_socket=/run/s.sock",
                             "disk.spdk_interrupt=true"])


def test_the_version_recorded_comes_from_the_build_or_its_tree(tmp_path):
    build = tmp_path / "spdk" / "build"
    (build / "bin").mkdir(parents=True)
    assert spdk_target.version(str(build)) == "unknown"
    (tmp_path / "spdk" / "VERSION").write_text("25.09.0\n")   # an SPDK tree: VERSION beside build/
    assert spdk_target.version(str(build)) == "25.09.0"
    (build / "VERSION").write_text("25.09.1\n")                # make spdk's build: copied in
    assert spdk_target.version(str(build)) == "25.09.1"
    meta = VhostUserSpdk().metadata(settings.load(None, ["disk.backend=vhost-user-blk-spdk",
                                                         f"disk.spdk_build={build}"]).disk)
    assert meta["spdk_version"] == "25.09.1" and meta["spdk_target"] == "harness" and meta["spdk_interrupt"] is False
