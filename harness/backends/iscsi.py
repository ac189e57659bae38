"""iSCSI: a userspace target (tgt's tgtd, from Debian; no kernel target module) exports the fleet's
device as one LUN on the host's loopback, and each VM's QEMU reads its slice through QEMU's own
initiator (libiscsi, from qemu-block-extra) under virtio-blk. The path of OpenStack Cinder's
LVM/iSCSI driver, without the network between.

One tgtd per fleet, on a portal port and a control port of its own, derived from the fleet's name
so that the plan alone gives them (Terraform's hooks and the VMs' command lines agree), checked
free before use. Provider v0.8.3 cannot read a libvirt network disk back, so the disk is given on
QEMU's command line.

The target lets in only its loopback address, and only with CHAP: any local user could otherwise
read and write every VM's slice through the portal. host_up makes a random secret in the run
folder (0600, root's), declares it to tgtd as the target's account through tgtd's control socket
(iscsi_account.py: never on a command line), and each VM's QEMU logs in with it through a `secret`
object that reads the file.
"""
from __future__ import annotations

import secrets
import time
import zlib
from pathlib import Path

from harness.backends import iscsi_account
from harness.backends.base import (
    Attachment,
    Backend,
    HostPlan,
    HostProcess,
    VmSlot,
    daemon_alive,
    listening,
    record_daemon,
    stop_daemon,
    succeeds,
    virtio_blk_args,
)
from harness.common.exits import StepFailed
from harness.hosts import Host
from harness.libvirt.libvirt_xml import qemu_commandline, qemu_opt

TGTD, TGTADM = "tgtd", "tgtadm"
PORTAL_BASE, CONTROL_BASE, SPREAD = 13260, 14260, 900   # away from iSCSI's own 3260 and each other
CONTROL_SOCKETS = "/var/run/tgtd"                   # where tgtd keeps socket.<control port>
TID, LUN = 1, 1
ADDRESS = "127.0.0.1"                               # the portal and the only initiator address let in
PID_FILE_WITHIN_S = 30   # tgtd writes its pid file after it answers: seconds later on a loaded host


def ports(plan: HostPlan) -> tuple[int, int]:
    """(portal port, control port) of the fleet's target."""
    k = zlib.crc32(plan.prefix.encode()) % SPREAD
    return PORTAL_BASE + k, CONTROL_BASE + k


def target_name(plan: HostPlan) -> str:
    return f"iqn.2026-11.org.vtb:{plan.prefix}"


def pid_file(plan: HostPlan) -> Path:
    return plan.run_dir / "tgtd.pid"


def chap_file(plan: HostPlan) -> Path:
    """The target's CHAP secret, made by host_up: what QEMU's initiator logs in with."""
    return plan.run_dir / "chap.secret"


CHAP_USER = "vtb"


def control_socket(control: int) -> Path:
    return Path(CONTROL_SOCKETS) / f"socket.{control}"


def _answers(host: Host, socket: Path, within_s: float = 5.0) -> bool:
    """tgtd listens on its control socket within the bound (it daemonizes before it listens)."""
    deadline = time.monotonic() + within_s
    while not listening(host, socket):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _admin(host: Host, plan: HostPlan, *args: str, check: bool = True):
    return host.run([TGTADM, "-C", str(ports(plan)[1]), "--lld", "iscsi", *args], check=check, timeout=60)


class Iscsi(Backend):
    name = "iscsi"
    processes = (HostProcess("tgt", TGTD, f"{TGTD} "),)
    host_packages = ("tgt", "qemu-block-extra")   # the target; QEMU's libiscsi initiator
    shared_options = frozenset({"cache", "iothreads", "num_queues"})
    summary = "virtio-blk over iSCSI: tgt's userspace target on the host's loopback, QEMU's libiscsi initiator"

    def preflight(self, host: Host, plan: HostPlan) -> str | None:
        if not succeeds(host, f"command -v {TGTD} && command -v {TGTADM}"):
            return f"tgt is not installed on {host.label} (Debian: apt install tgt qemu-block-extra)"
        if not succeeds(host, "ls /usr/lib/x86_64-linux-gnu/qemu/block-iscsi.so"):
            return f"QEMU's iSCSI initiator is missing on {host.label} (Debian: apt install qemu-block-extra)"
        portal, control = ports(plan)
        if daemon_alive(host, pid_file(plan)):
            return None   # this fleet's own target, still up
        if listening(host, control_socket(control)):   # a stale socket a killed tgtd left is taken over
            return (f"tgt's control port {control} is in use on {host.label} (a tgtd listens on "
                    f"{control_socket(control)}). Fix: stop it, or rename the fleet (fleet.name)")
        if succeeds(host, f"ss -Hltn 'sport = :{portal}' | grep -q ."):
            return f"TCP port {portal} is in use on {host.label}. Fix: free it, or rename the fleet (fleet.name)"
        return None

    def host_up(self, host: Host, plan: HostPlan) -> None:
        host.run(["mkdir", "-p", str(plan.run_dir)], timeout=30)
        if daemon_alive(host, pid_file(plan)):
            return
        portal, control = ports(plan)
        out = host.run([TGTD, "-C", str(control), "-p", str(pid_file(plan)), "--iscsi", f"portal={ADDRESS}:{portal}"],
                       check=False, timeout=60)
        if out.returncode != 0 or not _answers(host, control_socket(control)):
            self.host_down(host, plan)
            raise StepFailed(f"tgtd did not start on {host.label}: {out.stderr.decode(errors='replace').strip()}")
        try:
            record_daemon(host, pid_file(plan), "tgtd", within_s=PID_FILE_WITHIN_S)
        except StepFailed:
            # it answered on this fleet's control port a moment ago: ours, though unproven (no pid
            # file), so it is stopped through tgt's own control rather than by a signal
            _admin(host, plan, "--mode", "system", "--op", "delete", "--force", check=False)
            self.host_down(host, plan)
            raise
        direct = ["--bsoflags", "direct"] if plan.disk["cache"] in ("none", "directsync") else []
        secret = secrets.token_hex(16)
        host.run(["sh", "-c", 'umask 077 && cat > "$1"', "sh", str(chap_file(plan))], input=secret.encode(), timeout=30)
        account = ["python3", "-c", Path(iscsi_account.__file__).read_text(), str(control_socket(ports(plan)[1])),
                   CHAP_USER]   # the secret on its stdin: tgtadm would take it only as an argument
        for args in (["--mode", "target", "--op", "new", "--tid", str(TID), "--targetname", target_name(plan)],
                     ["--mode", "logicalunit", "--op", "new", "--tid", str(TID), "--lun", str(LUN),
                      "--backing-store", plan.device.path, *direct],
                     ["--mode", "account", "--op", "new", "--user", CHAP_USER],
                     ["--mode", "account", "--op", "bind", "--tid", str(TID), "--user", CHAP_USER],
                     ["--mode", "target", "--op", "bind", "--tid", str(TID), "--initiator-address", ADDRESS]):
            new_account = args[:4] == ["--mode", "account", "--op", "new"]
            done = (host.run(account, input=secret.encode(), timeout=60, check=False) if new_account
                    else _admin(host, plan, *args, check=False))
            if done.returncode != 0:
                self.host_down(host, plan)
                raise StepFailed(f"tgtadm {' '.join(args[:4])} failed on {host.label}: "
                                 f"{(done.stderr or done.stdout).decode(errors='replace').strip()}")

    def host_down(self, host: Host, plan: HostPlan) -> None:
        """The target goes first (forced: a VM that was destroyed leaves its session behind), then
        the daemon by tgt's own shutdown, and by signal if it does not go."""
        control = ports(plan)[1]
        if daemon_alive(host, pid_file(plan)):
            _admin(host, plan, "--mode", "target", "--op", "delete", "--force", "--tid", str(TID), check=False)
            _admin(host, plan, "--mode", "system", "--op", "delete", "--force", check=False)
        stop_daemon(host, pid_file(plan), 5, chap_file(plan))
        # tgtd leaves its control socket behind; removed unless another tgtd listens there (a port clash)
        if not listening(host, control_socket(control)):
            host.run(["rm", "-f", str(control_socket(control)), f"{control_socket(control)}.lock"], check=False, timeout=30)

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        """QEMU's initiator on the fleet's LUN, its slice a raw node over it, under virtio-blk; each VM
        logs in with its own initiator name."""
        d, node = plan.disk, "vtbdata"
        direct = "on" if d["cache"] in ("none", "directsync") else "off"
        args = ["-object", f"secret,id={node}-chap,file={qemu_opt(str(chap_file(plan)))}",
                "-blockdev", f"driver=iscsi,node-name={node}-iscsi,transport=tcp,portal={ADDRESS}:{ports(plan)[0]},"
                             f"target={qemu_opt(target_name(plan))},lun={LUN},user={CHAP_USER},"
                             f"password-secret={node}-chap,"
                             f"initiator-name={qemu_opt(target_name(plan))}:{vm.name},cache.direct={direct}",
                "-blockdev", f"driver=raw,node-name={node},file={node}-iscsi,offset={vm.offset},size={vm.size}"]
        return Attachment(domain_xml=qemu_commandline(*args, *virtio_blk_args(node, d)))


BACKEND = Iscsi()
