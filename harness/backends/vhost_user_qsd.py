"""vhost-user-blk served by qemu-storage-daemon: the data path bypasses the VM's QEMU.

The harness starts the daemons (one per VM, or one per host device exporting every VM's slice)
and stops them. Provider v0.8.3 crashes on a <disk type='vhostuser'> added by XSLT, so the device
is a QEMU command-line -chardev/-device pair with an explicit PCI address; guest RAM is memfd-shared.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.backends.base import (
    AIO,
    CACHE,
    NUM_QUEUES,
    QSD,
    QSD_PROCESS,
    Attachment,
    Backend,
    HostPlan,
    VmSlot,
    check_listening,
    daemon_alive,
    listening,
    qsd_command,
    start_qsd,
    stop_daemon,
    succeeds,
    vhost_user_blk,
)
from harness.common.exits import StepFailed
from harness.common.schema import Section
from harness.hosts import Host
from harness.libvirt.libvirt_xml import qemu_opt


def socket_path(plan: HostPlan, vm: VmSlot) -> Path:
    return plan.run_dir / f"{vm.name}.vhost.sock"


def _daemons(plan: HostPlan) -> dict[str, list[VmSlot]]:
    """Daemon name -> the VMs whose slices it exports."""
    if plan.disk["qsd_per"] == "device":
        return {f"{plan.prefix}-qsd": plan.vms}
    return {f"{vm.name}-qsd": [vm] for vm in plan.vms}


class QsdOptions(Section):
    qsd_per: Literal["vm", "device"] = Field("vm", description="vhost-user-blk-qsd: one qemu-storage-daemon per "
                                             "VM or one per host device")


class VhostUserQsd(Backend):
    name = "vhost-user-blk-qsd"
    processes = (QSD_PROCESS,)
    shared_options = frozenset({"cache", "aio", "num_queues"})
    knobs = (AIO, CACHE, NUM_QUEUES)
    Options = QsdOptions
    summary = "vhost-user-blk, served by qemu-storage-daemon"

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        if not succeeds(host, f"command -v {QSD}"):
            return f"{QSD} is not installed on {host.label} (Debian: apt install qemu-system-common)"
        for vm in plan.vms:
            path = socket_path(plan, vm)
            ours = [plan.run_dir / f"{vm.name}-qsd.pid", plan.run_dir / f"{plan.prefix}-qsd.pid"]
            if succeeds(host, '[ -S "$1" ] && [ ! -e "$2" ] && [ ! -e "$3" ]', path, *ours) and listening(host, path):
                return f"storage-daemon socket {path} is already in use by another process"
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        host.run(["mkdir", "-p", str(plan.run_dir)], timeout=30)
        try:
            for daemon, vms in _daemons(plan).items():
                pidfile = plan.run_dir / f"{daemon}.pid"
                if not daemon_alive(host, pidfile):
                    start_qsd(host, pidfile, plan, vms, _exports(plan, vms), daemon)
            check_listening(host, [socket_path(plan, vm) for vm in plan.vms])
        except StepFailed:
            self.host_down(host, plan)
            raise

    def host_down(self, host: Host, plan: HostPlan) -> None:
        for daemon in _daemons(plan):
            stop_daemon(host, plan.run_dir / f"{daemon}.pid")
        host.run(["rm", "-f", *(str(socket_path(plan, vm)) for vm in plan.vms)], check=False, timeout=30)

    def host_command(self, plan: HostPlan) -> list[str]:
        daemon, vms = next(iter(_daemons(plan).items()))
        return qsd_command(plan.run_dir / f"{daemon}.pid", plan, vms, _exports(plan, vms))

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        return vhost_user_blk(socket_path(plan, vm), plan.disk["num_queues"])

    def metadata(self, disk) -> dict:
        return {**super().metadata(disk), "qsd_per": disk.qsd_per}


def _exports(plan: HostPlan, vms: list[VmSlot]) -> list[str]:
    """qemu-storage-daemon's vhost-user-blk export of each VM's block node, on its socket."""
    return [a for vm in vms for a in (
        "--export", f"type=vhost-user-blk,id={vm.name}-export,node-name={vm.name}-data,"
                    f"addr.type=unix,addr.path={qemu_opt(socket_path(plan, vm))},writable=on,"
                    f"num-queues={plan.disk['num_queues']}")]


BACKEND = VhostUserQsd()
