"""vhost-user-blk served by SPDK's vhost target, driven through SPDK's JSON-RPC on its Unix socket.

The harness does not build or start SPDK (it needs hugepages and its own build); it talks to a
running spdk_tgt/vhost. Written against SPDK's RPC interface as documented for v23.x-v24.x
(python/spdk/rpc/bdev.py and vhost.py):

  spdk_get_version                                            preflight
  bdev_aio_create       {filename, name, block_size}          the host device as an AIO bdev
  bdev_split_create     {base_bdev, split_count, split_size_mb}   one slice per VM: <base>p<i>
  vhost_create_blk_controller {ctrlr, dev_name}               socket <vhost dir>/<ctrlr>
  vhost_delete_controller {ctrlr}                             teardown, in reverse order
  bdev_split_delete     {base_bdev}
  bdev_aio_delete       {name}

Not yet run against a live SPDK here: no SPDK on the development machine (see DEVELOPERS.md).
"""
from __future__ import annotations

import itertools
import json
import socket
from pathlib import Path
from typing import Callable

from pydantic import Field

from harness.backends.base import Attachment, Backend, HostPlan, VmSlot, vhost_user_blk
from harness.hosts import LocalHost
from harness.schema import Section

INSTALL_HINT = ("install SPDK (git clone https://github.com/spdk/spdk; scripts/pkgdep.sh; ./configure; make), "
                "reserve hugepages (scripts/setup.sh), start `build/bin/spdk_tgt -S <vhost dir>` and set "
                "disk.spdk_socket and disk.spdk_vhost_dir")


class SpdkRpcError(RuntimeError):
    pass


class SpdkRpc:
    """A JSON-RPC 2.0 client for SPDK. `transport` sends one request and returns the decoded reply;
    the default speaks to SPDK's Unix socket."""

    def __init__(self, sock_path: str, transport: Callable[[dict], dict] | None = None, timeout: float = 30):
        self.sock_path = sock_path
        self.timeout = timeout
        self.transport = transport or self._unix
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict | None = None):
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params:
            request["params"] = params
        reply = self.transport(request)
        if "error" in reply:
            err = reply["error"]
            raise SpdkRpcError(f"SPDK {method} failed: {err.get('message')} (code {err.get('code')})")
        return reply.get("result")

    def _unix(self, request: dict) -> dict:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(self.timeout)
            s.connect(self.sock_path)
            s.sendall(json.dumps(request).encode())
            buf = b""
            decoder = json.JSONDecoder()
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise SpdkRpcError(f"SPDK closed {self.sock_path} before replying to {request['method']}")
                buf += chunk
                try:
                    return decoder.decode(buf.decode())
                except json.JSONDecodeError:
                    continue


def names(plan: HostPlan) -> tuple[str, list[str]]:
    """(base AIO bdev, split bdev per VM) as SPDK names them."""
    base = f"{plan.prefix}-aio"
    return base, [f"{base}p{i}" for i in range(len(plan.vms))]


class SpdkOptions(Section):
    spdk_socket: str = Field("/var/tmp/spdk.sock", description="vhost-user-blk-spdk: SPDK's JSON-RPC socket")
    spdk_vhost_dir: str = Field("/var/tmp", description="vhost-user-blk-spdk: the directory SPDK's -S names")


class VhostUserSpdk(Backend):
    name = "vhost-user-blk-spdk"
    shared_options = frozenset({"num_queues"})
    Options = SpdkOptions
    local_host_only = True
    summary = "vhost-user-blk, served by SPDK vhost"

    def __init__(self, rpc_factory: Callable[[str], SpdkRpc] = SpdkRpc):
        self.rpc_factory = rpc_factory

    def preflight(self, host: LocalHost, plan: HostPlan) -> str | None:
        sock = plan.disk["spdk_socket"]
        if not Path(sock).exists():
            return f"SPDK is not running (no RPC socket at {sock}): {INSTALL_HINT}"
        try:
            self.rpc_factory(sock).call("spdk_get_version")
        except (OSError, SpdkRpcError) as e:
            return f"SPDK does not answer on {sock} ({e}): {INSTALL_HINT}"
        if len({vm.size for vm in plan.vms}) > 1 or any(vm.size % (1 << 20) for vm in plan.vms):
            return "SPDK splits the device into equal whole-MiB slices: use a whole-MiB fleet.disk_size_mib"
        return None

    def host_up(self, host: LocalHost, plan: HostPlan) -> None:
        rpc = self.rpc_factory(plan.disk["spdk_socket"])
        base, splits = names(plan)
        rpc.call("bdev_aio_create", {"filename": plan.device.path, "name": base, "block_size": 512})
        rpc.call("bdev_split_create", {"base_bdev": base, "split_count": len(plan.vms),
                                       "split_size_mb": plan.vms[0].size >> 20})
        for vm, split in zip(plan.vms, splits):
            rpc.call("vhost_create_blk_controller", {"ctrlr": vm.name, "dev_name": split})

    def host_down(self, host: LocalHost, plan: HostPlan) -> None:
        rpc = self.rpc_factory(plan.disk["spdk_socket"])
        base, _ = names(plan)
        calls = [("vhost_delete_controller", {"ctrlr": vm.name}) for vm in plan.vms]
        calls += [("bdev_split_delete", {"base_bdev": base}), ("bdev_aio_delete", {"name": base})]
        for method, params in calls:  # keep going: teardown must remove whatever exists
            try:
                rpc.call(method, params)
            except SpdkRpcError:
                pass

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        return vhost_user_blk(Path(plan.disk["spdk_vhost_dir"]) / vm.name, plan.disk["num_queues"])


BACKEND = VhostUserSpdk()
