"""vhost-user-blk served by qemu-storage-daemon: the data path bypasses the VM's QEMU.

The harness starts the daemons (one per VM, or one per host device exporting every VM's slice)
and stops them. Provider v0.8.3 crashes on a <disk type='vhostuser'> added by XSLT, so the device
is a QEMU command-line -chardev/-device pair with an explicit PCI address; guest RAM is memfd-shared.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.backends.base import Attachment, Backend, HostPlan, VmSlot, file_blockdev, vhost_user_blk
from harness.hosts import LocalHost
from harness.libvirt_xml import qemu_opt
from harness.schema import Section

BINARY = "qemu-storage-daemon"


def socket_path(plan: HostPlan, vm: VmSlot) -> Path:
    return plan.run_dir / f"{vm.name}.vhost.sock"


def _daemons(plan: HostPlan) -> dict[str, list[VmSlot]]:
    """Daemon name -> the VMs whose slices it exports."""
    if plan.disk["qsd_per"] == "device":
        return {f"{plan.prefix}-qsd": plan.vms}
    return {f"{vm.name}-qsd": [vm] for vm in plan.vms}


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


class QsdOptions(Section):
    qsd_per: Literal["vm", "device"] = Field("vm", description="vhost-user-blk-qsd: one qemu-storage-daemon per "
                                             "VM or one per host device")


class VhostUserQsd(Backend):
    name = "vhost-user-blk-qsd"
    shared_options = frozenset({"cache", "aio", "num_queues"})
    Options = QsdOptions
    local_host_only = True
    summary = "vhost-user-blk, served by qemu-storage-daemon"

    def preflight(self, host: LocalHost, plan: HostPlan) -> str | None:
        if shutil.which(BINARY) is None:
            return f"{BINARY} is not installed (Debian: apt install qemu-system-common)"
        for vm in plan.vms:
            path = socket_path(plan, vm)
            if path.exists() and _listening(path) and not (plan.run_dir / f"{vm.name}-qsd.pid").exists() \
                    and not (plan.run_dir / f"{plan.prefix}-qsd.pid").exists():
                return f"storage-daemon socket {path} is already in use by another process"
        return None

    def host_up(self, host: LocalHost, plan: HostPlan) -> None:
        plan.run_dir.mkdir(parents=True, exist_ok=True)
        d = plan.disk
        for daemon, vms in _daemons(plan).items():
            pidfile = plan.run_dir / f"{daemon}.pid"
            if pidfile.exists() and _alive(pidfile):
                continue
            args = [BINARY, "--daemonize", "--pidfile", str(pidfile)]
            for vm in vms:
                node = f"{vm.name}-data"
                args += [a for spec in file_blockdev(node, plan.device.path, d["cache"], d["aio"], vm)
                         for a in ("--blockdev", spec)]
                args += ["--export", f"type=vhost-user-blk,id={vm.name}-export,node-name={node},"
                                     f"addr.type=unix,addr.path={qemu_opt(socket_path(plan, vm))},writable=on,"
                                     f"num-queues={d['num_queues']}"]
            out = subprocess.run(args, capture_output=True, text=True)
            if out.returncode != 0:
                self.host_down(host, plan)
                raise RuntimeError(f"{BINARY} for {daemon} failed to start: {out.stderr.strip()}")
        for vm in plan.vms:  # --daemonize returns once the exports listen; check, do not assume
            if not _listening(socket_path(plan, vm)):
                self.host_down(host, plan)
                raise RuntimeError(f"{BINARY} is not listening on {socket_path(plan, vm)}")

    def host_down(self, host: LocalHost, plan: HostPlan) -> None:
        for daemon in _daemons(plan):
            pidfile = plan.run_dir / f"{daemon}.pid"
            if pidfile.exists():
                _stop(int(pidfile.read_text()))
                pidfile.unlink(missing_ok=True)
        for vm in plan.vms:
            socket_path(plan, vm).unlink(missing_ok=True)

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        return vhost_user_blk(socket_path(plan, vm), plan.disk["num_queues"])

    def metadata(self, disk) -> dict:
        return {**super().metadata(disk), "qsd_per": disk.qsd_per}


def _alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


BACKEND = VhostUserQsd()
