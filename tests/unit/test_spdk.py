"""The SPDK backend's JSON-RPC sequence. The transport records each request and answers with the
result shapes SPDK documents for these methods (a bdev name, true); no SPDK daemon is faked."""
import pytest

from harness.backends import HostDevice, HostPlan, VmSlot
from harness.backends.vhost_user_spdk import SpdkRpc, SpdkRpcError, VhostUserSpdk

MIB = 1 << 20
RESULTS = {"bdev_aio_create": "vtb-t-aio", "bdev_split_create": ["vtb-t-aiop0", "vtb-t-aiop1"],
           "vhost_create_blk_controller": True, "vhost_delete_controller": True, "bdev_split_delete": True,
           "bdev_aio_delete": True, "spdk_get_version": {"version": "SPDK v24.01", "fields": {"major": 24}}}


class Recorder:
    def __init__(self, fail=()):
        self.requests = []
        self.fail = set(fail)

    def __call__(self, request):
        self.requests.append(request)
        if request["method"] in self.fail:
            return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -19, "message": "No such device"}}
        return {"jsonrpc": "2.0", "id": request["id"], "result": RESULTS[request["method"]]}

    def calls(self):
        return [(r["method"], r.get("params")) for r in self.requests]


def plan(tmp_path, sock=None):
    return HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path),
                    disk={"spdk_socket": sock or str(tmp_path / "spdk.sock"), "spdk_vhost_dir": "/var/tmp",
                          "num_queues": 2},
                    device=HostDevice(path="/dev/nvme0n1", kind="block"),
                    vms=[VmSlot(0, "vtb-t-vm0", 0, 64 * MIB), VmSlot(1, "vtb-t-vm1", 64 * MIB, 64 * MIB)])


def backend(rec):
    return VhostUserSpdk(rpc_factory=lambda sock: SpdkRpc(sock, transport=rec))


def test_host_up_sequence(tmp_path):
    rec = Recorder()
    backend(rec).host_up(None, plan(tmp_path))
    assert rec.calls() == [
        ("bdev_aio_create", {"filename": "/dev/nvme0n1", "name": "vtb-t-aio", "block_size": 512}),
        ("bdev_split_create", {"base_bdev": "vtb-t-aio", "split_count": 2, "split_size_mb": 64}),
        ("vhost_create_blk_controller", {"ctrlr": "vtb-t-vm0", "dev_name": "vtb-t-aiop0"}),
        ("vhost_create_blk_controller", {"ctrlr": "vtb-t-vm1", "dev_name": "vtb-t-aiop1"}),
    ]
    assert [r["id"] for r in rec.requests] == [1, 2, 3, 4] and all(r["jsonrpc"] == "2.0" for r in rec.requests)


def test_host_down_reverses_and_keeps_going_after_errors(tmp_path):
    rec = Recorder(fail={"vhost_delete_controller"})
    backend(rec).host_down(None, plan(tmp_path))
    assert [m for m, _ in rec.calls()] == ["vhost_delete_controller", "vhost_delete_controller",
                                          "bdev_split_delete", "bdev_aio_delete"]


def test_errors_carry_spdk_message(tmp_path):
    with pytest.raises(SpdkRpcError, match="bdev_aio_create failed: No such device"):
        backend(Recorder(fail={"bdev_aio_create"})).host_up(None, plan(tmp_path))


def test_preflight_without_spdk_says_how_to_install(tmp_path):
    reason = backend(Recorder()).preflight(None, plan(tmp_path))
    assert "SPDK is not running" in reason and "github.com/spdk/spdk" in reason


def test_preflight_with_spdk_answering(tmp_path):
    sock = tmp_path / "spdk.sock"
    sock.touch()
    rec = Recorder()
    assert backend(rec).preflight(None, plan(tmp_path, str(sock))) is None
    assert rec.calls() == [("spdk_get_version", None)]


def test_attach_is_a_vhost_user_device_on_the_spdk_socket(tmp_path):
    a = backend(Recorder()).attach(plan(tmp_path), VmSlot(1, "vtb-t-vm1", 0, MIB))
    assert "path=/var/tmp/vtb-t-vm1" in a.domain_xml and "num-queues=2" in a.domain_xml
    assert "memfd" in a.domain_xml and a.locator == "pci:0000:00:10.0"
