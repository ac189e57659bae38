"""Reaching the nested host: an L1 VM that plays the host, for machines whose kernel has no md
(like this CI machine) and for nested-virt CI. Its libvirtd listens on its unix socket only,
reached as qemu+ssh through its sshd (forwarded on 127.0.0.1, the testbed's key, its host key
checked); host commands run through its guest agent. Building and tearing it down is
harness/resources/nested_l1.py's work.
"""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, fields
from pathlib import Path

import libvirt

from harness.common import paths
from harness.common.exits import StepFailed
from harness.hosts.ssh import libvirt_uri
from harness.libvirt.agent import AgentError, guests
from harness.libvirt.libvirt_conn import connect

DOMAIN = f"{paths.PREFIX}nested"          # the first nested host; the others are vtb-nested<i>
SSH_PORT = 22
HOST_IMAGE_DIR = paths.CACHE / "images" / "host-current"
DRIVE_PCI_SLOT = 0x10           # drive i sits at slot 0x10 + i
DRIVE_SERIAL = "vtb-drive"      # drive i has serial vtb-drive<i>
LIBVIRTD_LOG = "/var/log/libvirt/libvirtd.log"   # where the host image's libvirtd.conf logs warnings
LOG_BYTES = 256 << 10
SYSRQ_L = [56, 99, 38]   # Linux keycodes: left Alt, SysRq, L


RECORD = "nested.json"   # in the host's state dir: while it exists, the host is up


class NestedHostError(StepFailed):
    pass


@dataclass
class NestedRecord:
    drives: list[str]           # member-device paths inside the L1, in drive order
    drive_model: str
    drive_mib: int
    image: str
    l0_accel: dict
    ready_s: float
    domain: str = DOMAIN
    ssh_port: int = 0           # its sshd, forwarded on 127.0.0.1: the only way in but the guest agent
    identity: str = ""          # the testbed's key, in root's authorized_keys there ("": an older record)
    known_hosts: str = ""       # its host key, as ssh and the Terraform provider check it
    shared_address: str = ""    # its address/prefix on the network the nested hosts share ("": none)
    started: str = "booted"     # "booted", or "restored" from its saved booted state (resources/nested_saves.py)


def domain_name(index: int) -> str:
    return DOMAIN if index == 0 else f"{DOMAIN}{index}"


def state_subdir(index: int) -> str:
    """Where nested host `index` keeps its files under the state dir."""
    return "nested" if index == 0 else f"nested{index}"


class NestedHost:
    kind = "nested"
    is_this_machine = False
    confines_tools = True
    start_lead_s = 1.5
    drives_are_users = False            # its emulated NVMe drives are vtb's own
    drive_size_field = "nested.drive_mib"
    keeps_guest_image = True
    # Nested KVM saves and restores L2 guests (checked), but an L1 under TCG hangs now and then as an
    # L2 starts, and a restore once failed that way: off until restores are shown not to make it more likely.
    no_restore = ("L2 fleets in a nested host boot for now (an L1 under TCG hangs now and then as an L2 "
                  "starts, and a restore once hung it)")
    rebuildable = True
    installs_packages = False   # its image has every package
    name = "nested"
    label = "the nested host"

    def __init__(self, state_dir: Path, record: NestedRecord):
        self.state_dir = state_dir
        self.record = record
        self.domain = record.domain
        self.uri = libvirt_uri("root", "127.0.0.1", record.ssh_port, record.identity, record.known_hosts)

    @classmethod
    def load(cls, state_dir: Path) -> "NestedHost":
        path = state_dir / RECORD
        if not path.exists():
            raise NestedHostError("no nested host is up. Fix: run `harness host nested up` (with the same config)")
        saved = json.loads(path.read_text())
        host = cls(state_dir, NestedRecord(**{f.name: saved[f.name] for f in fields(NestedRecord) if f.name in saved}))
        if not (host.record.ssh_port and host.record.identity):
            raise NestedHostError(f"{host.domain} was booted by an older vtb, its libvirtd on unauthenticated TCP. "
                                  "Fix: `harness host nested down` then `up`")
        if reason := host.stopped():
            raise NestedHostError(f"{reason}. Fix: `harness host nested down` then `up`")
        return host

    def stopped(self) -> str | None:
        """Why the L1 is not running (gone, or stopped: it reset or powered off), or None."""
        try:
            conn = connect(paths.LIBVIRT_URI)
            try:
                if not conn.lookupByName(self.domain).isActive():
                    return (f"{self.domain} is not running (it reset or powered off; its console is "
                            f"{self.state_dir / 'console.log'})")
            finally:
                conn.close()
        except libvirt.libvirtError:
            return f"{self.domain} does not exist"
        return None

    def descriptor(self) -> dict:
        return {"kind": self.kind, "state_dir": str(self.state_dir)}

    @classmethod
    def from_descriptor(cls, d: dict) -> "NestedHost":
        return cls.load(Path(d["state_dir"]))

    def fleet_dir(self, local: Path, fleet: str) -> Path:
        return local

    def diagnostics(self) -> dict[str, str]:
        """The L1's kernel log and libvirtd log, and its console (a file on this machine). When the
        L1 no longer answers, its CPUs' stacks are asked for first (sysrq-l, onto the console)."""
        logs = {}
        for name, argv in (("nested-host-dmesg.log", ["dmesg"]),
                           ("nested-host-libvirtd.log", ["tail", "-c", str(LOG_BYTES), LIBVIRTD_LOG])):
            try:
                logs[name] = self.run(argv, timeout=30, check=False).stdout.decode(errors="replace")
            except (AgentError, subprocess.SubprocessError) as e:
                logs[name] = f"(not readable: {e})"
                if name == "nested-host-dmesg.log":
                    self._dump_cpu_stacks()
        console = self.state_dir / "console.log"
        if console.exists():
            logs["nested-host-console.log"] = console.read_text(errors="replace")[-LOG_BYTES:]
        return logs

    def _dump_cpu_stacks(self) -> None:
        """Alt-SysRq-L on the L1's keyboard (from this machine's libvirt): every CPU's backtrace,
        printed on its serial console even when nothing inside answers."""
        try:
            conn = connect(paths.LIBVIRT_URI)
            try:
                conn.lookupByName(self.domain).sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0, SYSRQ_L, len(SYSRQ_L), 0)
            finally:
                conn.close()
            time.sleep(5)  # the dump is slow to print under TCG
        except libvirt.libvirtError:
            pass

    @property
    def drives(self) -> tuple[str, ...]:
        return tuple(self.record.drives)

    @property
    def l0_accel(self) -> str:
        return self.record.l0_accel["accel"]

    def clock_offset_s(self) -> float:
        with guests(paths.LIBVIRT_URI, [self.domain]) as (l1,):
            return l1.clock_offset_s()

    def run(self, argv: list[str], *, env: dict | None = None, input: bytes | None = None,
            timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
        with guests(paths.LIBVIRT_URI, [self.domain]) as (l1,):
            return l1.run(argv, env=env, input=input, timeout=timeout, check=check)


HOST = NestedHost
