"""vhost-user-blk served by SPDK's vhost target.

By default the harness runs the target itself, as the fleet's host side (Terraform's hook, like
qemu-storage-daemon): it reserves hugepages for the target and for every guest's RAM (SPDK maps
guest memory, which must be hugepage-backed and shared), starts `vhost` from `make spdk`'s build
(or disk.spdk_build), and over its JSON-RPC makes one AIO bdev on the host device, split into one
bdev per VM slice, and one vhost-blk controller per VM. Teardown undoes all of it, hugepages
included. A target you already run (disk.spdk_socket) is used as it is and never stopped.

RPCs (SPDK v25.09, through the PyPI `spdk` client):
  spdk_get_version                                              it answers
  bdev_aio_create       {filename, name, block_size}            the host device as an AIO bdev
  bdev_split_create     {base_bdev, split_count, split_size_mb}  one slice per VM: <base>p<i>
  vhost_create_blk_controller {ctrlr, dev_name}                 socket <vhost dir>/<ctrlr>
  vhost_get_controllers                                         what is up (idempotent host_up)
  vhost_delete_controller {ctrlr}; bdev_split_delete {base_bdev}; bdev_aio_delete {name}   teardown
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from pydantic import Field

from harness.backends import spdk_target
from harness.backends.base import Attachment, Backend, HostPlan, HostProcess, VmSlot, vhost_user_blk
from harness.backends.spdk_target import SpdkError, call
from harness.common.schema import Section
from harness.hosts import Host
from harness.resources import hugepages


def names(plan: HostPlan) -> tuple[str, list[str]]:
    """(base AIO bdev, split bdev per VM) as SPDK names them."""
    base = f"{plan.prefix}-aio"
    return base, [f"{base}p{i}" for i in range(len(plan.vms))]


class SpdkOptions(Section):
    spdk_socket: str = Field("", description="vhost-user-blk-spdk: the JSON-RPC socket of an SPDK vhost target you run "
                             "(used as it is, never stopped); empty = the harness runs its own")
    spdk_vhost_dir: str = Field("/var/tmp", description="vhost-user-blk-spdk: with spdk_socket, the folder your "
                                "target's -S names (its controllers' sockets)")
    spdk_build: str = Field("", description="vhost-user-blk-spdk: an SPDK build/ folder (with bin/vhost and lib/) to "
                            "run; empty = the one `make spdk` builds")
    spdk_interrupt: bool = Field(False, description="vhost-user-blk-spdk: start the target in interrupt mode (its "
                                 "reactor sleeps when idle instead of polling a core at 100%)")


def hugepage_plan(plan: HostPlan) -> hugepages.HugepagePlan:
    """Every guest's RAM and the target's own memory, in 2 MiB pages."""
    return hugepages.HugepagePlan.for_mib(len(plan.vms) * plan.guest_memory_mib + spdk_target.MEM_MIB,
                                          mount=str(plan.run_dir / "hugepages"),
                                          record=str(plan.run_dir / hugepages.RECORD))


class VhostUserSpdk(Backend):
    name = "vhost-user-blk-spdk"
    processes = (HostProcess("spdk", "vhost", "/bin/vhost ", polls=True, what="SPDK vhost"),)   # SPDK's reactors poll
    shared_options = frozenset({"num_queues"})
    Options = SpdkOptions
    local_host_only = True
    summary = "vhost-user-blk, served by SPDK vhost"

    def __init__(self, rpc_factory: Callable[[str], object] = spdk_target.client):
        self.rpc_factory = rpc_factory

    def check(self, disk) -> str | None:
        if disk.spdk_socket and (disk.spdk_interrupt or disk.spdk_build):
            return ("disk.spdk_interrupt and disk.spdk_build choose how the harness starts its own target; with "
                    "disk.spdk_socket your target runs as you started it: unset one or the other")
        return None

    def _own(self, plan: HostPlan) -> bool:
        return not plan.disk["spdk_socket"]

    def _sock(self, plan: HostPlan) -> str:
        return plan.disk["spdk_socket"] or str(plan.run_dir / "spdk.sock")

    def _target(self, host: Host, plan: HostPlan) -> spdk_target.Target:
        return spdk_target.Target(host, plan.run_dir, spdk_target.build_dir(plan.disk["spdk_build"]),
                                  hugepage_plan(plan).mount, plan.disk["spdk_interrupt"])

    def first_use(self, host: Host, plan: HostPlan) -> None:
        """Builds the cached target where none is built yet and a source is at hand (this machine only)."""
        if (self._own(plan) and not plan.disk["spdk_build"] and host.installs_packages
                and spdk_target.missing_build("") and spdk_target.vendored_source()):
            spdk_target.build(host)

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        if len({vm.size for vm in plan.vms}) > 1 or any(vm.size % (1 << 20) for vm in plan.vms):
            return "SPDK splits the device into equal whole-MiB slices: use a whole-MiB fleet.disk_size_mib"
        if not self._own(plan):
            if reason := hugepages.libvirt_cannot_use(host):
                return reason
            sock = plan.disk["spdk_socket"]
            if not Path(sock).exists():
                return f"no SPDK target at disk.spdk_socket={sock}: start yours there, or unset it to let the harness run one"
            try:
                call(self.rpc_factory(sock), "spdk_get_version")
            except SpdkError as e:
                return f"{e}: check your target, or unset disk.spdk_socket to let the harness run one"
            return None
        if reason := spdk_target.missing_build(plan.disk["spdk_build"]) or hugepages.libvirt_cannot_use(host):
            return reason
        hp = hugepage_plan(plan)
        if not hugepages.applied(host, hp):   # a fleet that is up holds its pages already
            return hugepages.refusal(host, hp, f"{len(plan.vms)} VM(s) x fleet.memory_mib={plan.guest_memory_mib} "
                                               f"+ {spdk_target.MEM_MIB} MiB for SPDK")
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        if {vm.name for vm in plan.vms} <= self._controllers(plan):
            return   # already up
        self.host_down(host, plan)   # whatever a host_up killed half-way left
        try:
            if self._own(plan):
                hp = hugepage_plan(plan)
                hugepages.apply(host, hp)
                self._target(host, plan).start()
                # DPDK takes more than its -s (its memseg lists): what the guests need must still be free
                hugepages.top_up(host, hp, math.ceil(len(plan.vms) * plan.guest_memory_mib / hugepages.PAGE_MIB))
            self._serve(plan)
        except BaseException:
            self.host_down(host, plan)
            raise

    def _controllers(self, plan: HostPlan) -> set[str]:
        try:
            return {c["ctrlr"] for c in call(self.rpc_factory(self._sock(plan)), "vhost_get_controllers")}
        except SpdkError:
            return set()

    def _serve(self, plan: HostPlan) -> None:
        rpc = self.rpc_factory(self._sock(plan))
        base, splits = names(plan)
        call(rpc, "bdev_aio_create", filename=plan.device.path, name=base, block_size=512)
        call(rpc, "bdev_split_create", base_bdev=base, split_count=len(plan.vms), split_size_mb=plan.vms[0].size >> 20)
        for vm, split in zip(plan.vms, splits):
            call(rpc, "vhost_create_blk_controller", ctrlr=vm.name, dev_name=split)

    def host_down(self, host: Host, plan: HostPlan) -> None:
        """Removes what host_up made, whatever exists of it: controllers and bdevs (keep going past
        errors), then the harness's own target and its hugepages."""
        try:
            rpc = self.rpc_factory(self._sock(plan))
        except SpdkError:
            rpc = None   # no target answers: nothing to remove there
        if rpc is not None:
            base, _ = names(plan)
            calls = [("vhost_delete_controller", {"ctrlr": vm.name}) for vm in plan.vms]
            calls += [("bdev_split_delete", {"base_bdev": base}), ("bdev_aio_delete", {"name": base})]
            for method, params in calls:
                try:
                    call(rpc, method, **params)
                except SpdkError:
                    pass
        if self._own(plan):
            self._target(host, plan).stop()
            hugepages.revert(host, hugepage_plan(plan))

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        vhost_dir = plan.run_dir if self._own(plan) else Path(plan.disk["spdk_vhost_dir"])
        return vhost_user_blk(vhost_dir / vm.name, plan.disk["num_queues"], hugepages=True)

    def metadata(self, disk) -> dict:
        own = {} if disk.spdk_socket else {"spdk_version": spdk_target.version(disk.spdk_build),
                                           "spdk_build": str(spdk_target.build_dir(disk.spdk_build).resolve())}
        return {**super().metadata(disk), "spdk_target": "yours" if disk.spdk_socket else "harness",
                "spdk_interrupt": disk.spdk_interrupt, **own}


BACKEND = VhostUserSpdk()
