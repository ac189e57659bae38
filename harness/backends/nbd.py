"""NBD: qemu-storage-daemon exports each VM's slice over NBD on a unix socket, and the VM's QEMU
reads it with its own NBD client (virtio-blk in the guest). The path of network block storage
without a cluster: every I/O crosses a socket to another process, as it would cross the network.

One daemon per VM, each with its own NBD server and socket; the harness starts and stops them.
Provider v0.8.3 cannot read a libvirt network disk back, so the disk is given on QEMU's command line.
"""
from __future__ import annotations

from pathlib import Path

from harness.backends.base import (
    QSD,
    QSD_PROCESS,
    Attachment,
    Backend,
    HostPlan,
    VmSlot,
    check_listening,
    daemon_alive,
    listening,
    start_qsd,
    stop_daemon,
    succeeds,
    virtio_blk_args,
)
from harness.common.exits import StepFailed
from harness.hosts import Host
from harness.libvirt.libvirt_xml import qemu_commandline, qemu_opt

EXPORT = "data"   # the export's name on each daemon's server


def socket_path(plan: HostPlan, vm: VmSlot) -> Path:
    return plan.run_dir / f"{vm.name}.nbd.sock"


def pid_file(plan: HostPlan, vm: VmSlot) -> Path:
    return plan.run_dir / f"{vm.name}-nbd.pid"


class Nbd(Backend):
    name = "nbd"
    processes = (QSD_PROCESS,)
    shared_options = frozenset({"cache", "aio", "iothreads", "num_queues"})
    summary = "virtio-blk over NBD: qemu-storage-daemon's export on a unix socket, QEMU's NBD client"

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        if not succeeds(host, f"command -v {QSD}"):
            return f"{QSD} is not installed on {host.label} (Debian: apt install qemu-system-common)"
        for vm in plan.vms:
            path = socket_path(plan, vm)
            if succeeds(host, '[ -S "$1" ] && [ ! -e "$2" ]', path, pid_file(plan, vm)) and listening(host, path):
                return f"NBD socket {path} is already in use by another process"
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        host.run(["mkdir", "-p", str(plan.run_dir)], timeout=30)
        try:
            for vm in plan.vms:
                if not daemon_alive(host, pid_file(plan, vm)):
                    start_qsd(host, pid_file(plan, vm), plan, [vm], [
                        "--nbd-server", f"addr.type=unix,addr.path={qemu_opt(socket_path(plan, vm))}",
                        "--export", f"type=nbd,id={vm.name}-export,node-name={vm.name}-data,name={EXPORT},writable=on"],
                        f"{vm.name} (NBD)")
            check_listening(host, [socket_path(plan, vm) for vm in plan.vms])
        except StepFailed:
            self.host_down(host, plan)
            raise

    def host_down(self, host: Host, plan: HostPlan) -> None:
        for vm in plan.vms:
            stop_daemon(host, pid_file(plan, vm), 5, socket_path(plan, vm))

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        """QEMU's NBD client on the VM's export (already its slice), under virtio-blk. cache.direct
        has no meaning on a socket: the daemon opens the device as disk.cache says."""
        d, node = plan.disk, "vtbdata"
        args = ["-blockdev", f"driver=nbd,node-name={node},server.type=unix,"
                             f"server.path={qemu_opt(socket_path(plan, vm))},export={EXPORT}"]
        return Attachment(domain_xml=qemu_commandline(*args, *virtio_blk_args(node, d)))


BACKEND = Nbd()
