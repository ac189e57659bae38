"""Building the nested host (an L1 VM with emulated NVMe drives backed by prefilled files, running
libvirtd and KVM for an L2 fleet) and tearing it down with everything in it. Reaching it once it
is up is harness/hosts/nested.py's work."""
from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, Literal

import libvirt
from pydantic import Field, field_validator

from harness.common import paths
from harness.common.bounded import heartbeat, write_bound_s
from harness.common.console import step, warn
from harness.common.files import write_atomic
from harness.common.pids import owner, owner_alive
from harness.common.schema import FIX, Section
from harness.hosts import Host, LocalHost, accel
from harness.hosts.nested import (
    DOMAIN,
    DRIVE_PCI_SLOT,
    DRIVE_SERIAL,
    HOST_IMAGE_DIR,
    RECORD,
    SSH_PORT,
    NestedHost,
    NestedHostError,
    NestedRecord,
    domain_name,
    state_subdir,
)
from harness.libvirt.agent import AgentError, AgentTimeout, GuestAgent, guests
from harness.libvirt.libvirt_conn import Unanswered, connect, define, domain_call, message, unanswered
from harness.libvirt.libvirt_xml import UNRECORDED, attr, owner_metadata, owner_of, qemu_commandline, qemu_opt
from harness.resources import image_builds, nested_saves
from harness.resources.leftovers import Scope

BOOT_TIMEOUT_S = 240
SHARED_BRIDGE = f"{DOMAIN}-br"           # the network the nested hosts share: a bridge here, no address on it
BRIDGE_RECORD = "nested-bridge.json"     # in the state dir, written before the bridge is made
SHARED_ALIAS = f"{DOMAIN}-shared"        # gc keeps it while a nested host's record is live (prefix vtb-nested)
SHARED_PCI_SLOT = 0x1e                   # vtb-host-init finds the NIC by it
_bridge_lock = threading.Lock()          # hosts boot in parallel; one of them makes the bridge
ANSWER_WITHIN_S = 30   # an L1 whose libvirtd does not answer a call within this is taken for hung
AGENT_SILENT_S = 30    # an L1 whose guest agent does not answer a ping within this is taken for lost
BOOTING = "booting.json"   # in a host's state dir from before its domain is defined until its record is written


class NestedConfig(Section):
    drives: int = Field(4, ge=1, le=8, description="emulated drives of the nested host")
    drive_mib: int = Field(320, ge=64, description="size of each drive in MiB (files prefilled with random data; "
                                                   "320 holds the filesystems experiment's xfs)")
    drive_model: Literal["nvme", "virtio-blk"] = Field("nvme", description="how the drives are emulated")
    memory_mib: int = Field(3072, ge=1024, description="memory of the nested host (its L2 fleet lives in it)")
    vcpus: int = Field(2, ge=1, le=64, description="vCPUs of the nested host")
    shared_subnet: str = Field("10.214.0.0/24", description="the network the nested hosts share (a bridge here, "
                               "no address of this machine's on it): nested host i is .11+i, its cluster_address "
                               "in the config `up --count N` writes",
                               json_schema_extra={FIX: "use a private /24 no interface here uses, e.g. 10.214.0.0/24"})

    @field_validator("shared_subnet")
    @classmethod
    def _subnet(cls, v: str) -> str:
        net = ipaddress.ip_network(v)   # a ValueError names what is wrong with it
        if net.prefixlen > 24 or not net.is_private:
            raise ValueError(f"{v} is not a private network of at least a /24")
        return v


@dataclass(frozen=True)
class NestedPlace:
    """What building nested hosts takes (`Config.nested_place`): [nested], the state dir they live
    in, and the accelerator fleet.accel asks for."""
    nested: NestedConfig
    state_dir: Path
    accel: str = "auto"


def host_for(kind: str, place: NestedPlace) -> Host:
    """The host of host.kind `kind`: a nested host booted when it is not up (it then stays up for
    the next run; `harness host nested down` or `make testbed down` removes it), else this machine."""
    return up(place) if kind == "nested" else LocalHost()


def _free_port(preferred: int | None = None) -> int:
    """A port free on 127.0.0.1: `preferred` when it is, else any."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred or 0))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def removed(host: Host) -> bool:
    """Whether `host` is a nested host that was removed (its record gone: a teardown found it not
    answering and removed it with its fleet)."""
    return host.rebuildable and not (host.state_dir / RECORD).exists()


SSH_KEY_DIR = "ssh"                      # under the state dir: the testbed's key into the nested hosts
_key_lock = threading.Lock()             # hosts boot in parallel; one of them makes the key


def _testbed_key(state_dir: Path) -> Path:
    """The testbed's own ssh key (made once, 0600 in a 0700 folder): root's way into the nested hosts."""
    key = state_dir / SSH_KEY_DIR / "id_ed25519"
    with _key_lock:
        if not key.exists():
            key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vtb-testbed", "-f", str(key)],
                           check=True, timeout=60)
    return key


def _let_key_in(host: NestedHost, key: Path) -> str:
    """The key put in root's authorized_keys there (through the guest agent), and the host's
    known_hosts line (its host key, made at its first boot, read the same way)."""
    host.run(["sh", "-c", "mkdir -p /root/.ssh; chmod 700 /root/.ssh; k=$(cat); grep -qxF \"$k\" /root/.ssh/authorized_keys"
              " 2>/dev/null || echo \"$k\" >> /root/.ssh/authorized_keys; chmod 600 /root/.ssh/authorized_keys"],
             input=key.with_suffix(".pub").read_bytes(), timeout=60)
    host_key = host.run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"], timeout=60).stdout.decode().split()[:2]
    return f"[127.0.0.1]:{host.record.ssh_port} {' '.join(host_key)}"


def shared_address(nested: NestedConfig, index: int) -> str:
    """Nested host `index`'s address on the shared network, with its prefix length."""
    net = ipaddress.ip_network(nested.shared_subnet)
    return f"{net[11 + index]}/{net.prefixlen}"


def _shared_bridge(state_dir: Path) -> None:
    """The bridge the nested hosts' second NICs join (made once, recorded in the state dir first;
    `down` removes it by that record)."""
    with _bridge_lock:
        if subprocess.run(["ip", "link", "show", SHARED_BRIDGE], capture_output=True, timeout=60).returncode == 0:
            return
        state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(state_dir / BRIDGE_RECORD, json.dumps({"bridge": SHARED_BRIDGE}))
        for argv in (["ip", "link", "add", SHARED_BRIDGE, "type", "bridge"],
                     ["ip", "link", "set", SHARED_BRIDGE, "alias", SHARED_ALIAS],
                     ["ip", "link", "set", SHARED_BRIDGE, "up"]):
            done = subprocess.run(argv, capture_output=True, timeout=60)
            if done.returncode != 0:
                raise NestedHostError(f"the nested hosts' shared network: `{' '.join(argv)}` failed: "
                                      f"{done.stderr.decode(errors='replace').strip()}")


def domain_xml(n: NestedConfig, state_dir: Path, choice: accel.AccelChoice, ssh_port: int, name: str = DOMAIN,
               shared: str = "") -> str:
    drives = []
    for i in range(n.drives):
        path = state_dir / "drives" / f"{name}-drive{i}.raw"
        node = f"drive{i}"
        drives += ["-blockdev", f"driver=file,node-name={node}-file,filename={qemu_opt(path)},cache.direct=on,aio=native",
                   "-blockdev", f"driver=raw,node-name={node},file={node}-file"]
        device = "nvme" if n.drive_model == "nvme" else "virtio-blk-pci"
        drives += ["-device", f"{device},drive={node},serial={DRIVE_SERIAL}{i},bus=pci.0,addr={DRIVE_PCI_SLOT + i:#x}"]
    # its sshd only, on loopback: libvirtd is reached through it (qemu+ssh), never on TCP
    net = ["-netdev", f"user,id=vtbnet,hostfwd=tcp:127.0.0.1:{ssh_port}-:{SSH_PORT}",
           "-device", "virtio-net-pci,netdev=vtbnet,bus=pci.0,addr=0x1f"]
    # TCG: the 'max' CPU model, which carries SVM, so that KVM works inside for the L2 fleet, with
    # kvm_amd.npt=0: with nested paging, the L1 (QEMU 7.2's TCG emulating SVM) reset or panicked
    # within seconds of L2 guests starting, in 4 of 6 fleet bring-ups; with shadow paging, 0 of 8,
    # and L2 boots barely slower (see DEVELOPERS.md). A KVM L0 passes its CPU through as it is.
    if choice.accel == "kvm":
        cpu, paging = "<cpu mode='host-passthrough'/>", ""
    else:
        cpu, paging = "<cpu mode='maximum' migratable='off'/>", " kvm_amd.npt=0"
    img = HOST_IMAGE_DIR.resolve()
    # A second NIC on the bridge the nested hosts share (QEMU's own virtio-net: no vhost-net here)
    mac = f"52:54:00:7b:00:{ipaddress.ip_interface(shared).ip.packed[-1]:02x}" if shared else ""
    shared_nic = f"""<interface type='bridge'><source bridge='{SHARED_BRIDGE}'/><mac address='{mac}'/>
      <model type='virtio'/><driver name='qemu'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='{SHARED_PCI_SLOT:#04x}' function='0x0'/>
    </interface>""" if shared else ""
    storage_arg = f" vtb.storage={shared}" if shared else ""
    return f"""<domain type={attr(choice.domain_type)}>
  <name>{name}</name>
  {owner_metadata(name)}
  <memory unit='MiB'>{n.memory_mib}</memory>
  <vcpu>{n.vcpus}</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{img / 'vmlinuz'}</kernel><initrd>{img / 'initrd.img'}</initrd>
    <cmdline>root=LABEL=vtbroot rw console=ttyS0 init=/sbin/vtb-host-init vtb.name={name}{storage_arg} quiet \
sysrq_always_enabled{paging}</cmdline>
  </os>
  <features><acpi/></features>
  {cpu}
  <on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file={attr(state_dir / 'root.qcow2')}/><target dev='vda' bus='virtio'/></disk>
    <serial type='file'><source path={attr(state_dir / 'console.log')}/><target port='0'/></serial>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='none'/>
    {shared_nic}
  </devices>
  {qemu_commandline(*drives, *net)}
</domain>"""


def up(place: NestedPlace, index: int = 0, port: int | None = None) -> NestedHost:
    """Boots nested host `index` (idempotent: an L1 that is up and answering is kept), its sshd
    forwarded from `port` when that is given and free."""
    state_dir = place.state_dir / state_subdir(index)
    name = domain_name(index)
    try:
        host = NestedHost.load(state_dir)
        if why := unanswered(host.uri, ANSWER_WITHIN_S):   # a hung L1 runs, and keeps its port open
            raise NestedHostError(why)
        if why := _other_drives(host, place.nested):
            raise NestedHostError(why)
        if host.record.shared_address != shared_address(place.nested, index):
            raise NestedHostError(f"its shared-network address is {host.record.shared_address or 'none'}, the config "
                                  f"gives {shared_address(place.nested, index)} (nested.shared_subnet)")
        step(f"nested host: {name} already up ({host.uri})")
        return host
    except NestedHostError as e:
        if (state_dir / RECORD).exists():
            warn(f"nested host: {name} is not usable ({e}); booting a new one")
        _down_one(place.state_dir, index)
    # The image of the current recipe (cached by its hash: instant when built; a few minutes once
    # after the recipe changed, so a pulled change never boots a stale host).
    try:
        image_builds.built("host", "the nested host image")
    except image_builds.ImageBuildFailed as e:
        raise NestedHostError(str(e)) from None
    n = place.nested
    t0 = time.monotonic()
    (state_dir / "drives").mkdir(parents=True, exist_ok=True)
    _fresh_root(state_dir)
    step(f"nested host: {n.drives} {n.drive_model} drives of {n.drive_mib} MiB, prefilled with random data")
    for i in range(n.drives):
        # Prefilled: reads of a sparse file cost no I/O and would give meaningless numbers.
        subprocess.run(["dd", "if=/dev/urandom", f"of={state_dir / 'drives' / f'{name}-drive{i}.raw'}", "bs=1M",
                        f"count={n.drive_mib}", "status=none"], check=True, timeout=write_bound_s(n.drive_mib << 20))
    choice = accel.choose(place.accel, HOST_IMAGE_DIR / "vmlinuz")
    # gc keeps a booting host while this process lives: its record is written only once it answers
    write_atomic(state_dir / BOOTING, json.dumps({"domain": name, **owner()}))
    try:
        host = _booted(place, state_dir, name, index, choice, port, t0)
    finally:
        (state_dir / BOOTING).unlink(missing_ok=True)
    step(f"nested host: {name} up in {host.record.ready_s:.0f} s ({host.record.started}), drives "
         f"{' '.join(host.record.drives)}")
    return host


def _booted(place: NestedPlace, state_dir: Path, name: str, index: int, choice: accel.AccelChoice, port: int | None,
            t0: float) -> NestedHost:
    """The L1 defined, restored from its saved booted state or booted, and let in (the testbed's key,
    its libvirtd answering), its record written. A restored one that fails to come in boots afresh."""
    n = place.nested
    ssh_port = _free_port(port)
    shared = shared_address(n, index)
    _shared_bridge(place.state_dir)
    image = (HOST_IMAGE_DIR / "recipe.sha").read_text().strip()
    key = _testbed_key(place.state_dir)
    conn = connect(paths.LIBVIRT_URI)
    try:
        xml = domain_xml(n, state_dir, choice, ssh_port, name, shared)
        save_key = nested_saves.key(xml, image, nested_saves.versions(conn), drive_mib=n.drive_mib)
        how = _restored(conn, name, xml, save_key, state_dir) or _boot(conn, name, xml, save_key, state_dir, choice,
                                                                        ssh_port)
        record = NestedRecord(drives=[], drive_model=n.drive_model, drive_mib=n.drive_mib, image=image,
                              l0_accel=accel.as_dict(choice), ready_s=0.0, domain=name, ssh_port=ssh_port,
                              shared_address=shared, identity=str(key), known_hosts=str(state_dir / "known_hosts"),
                              started=how)
        try:
            host = _let_in(NestedHost(state_dir, record), key, n.drives)
        except COMING_IN as e:
            if how != "restored":
                raise
            why = message(e)
            warn(f"nested host: the restored {name} did not come in ({why}); it boots, and is not saved again")
            _fresh_start(conn, name, save_key, state_dir)
            nested_saves.refuse(save_key, f"a restore of it did not come in: {why}")
            record.started = _boot(conn, name, xml, save_key, state_dir, choice, ssh_port)
            host = _let_in(NestedHost(state_dir, record), key, n.drives)
    finally:
        conn.close()
    record.ready_s = round(time.monotonic() - t0, 1)
    write_atomic(state_dir / RECORD, json.dumps(asdict(record), indent=2))
    return host


# what saving or restoring an L1 can raise, and letting a running one in: a restored one that fails so boots afresh
RESTORE_FAILED = (libvirt.libvirtError, AgentError, OSError, subprocess.SubprocessError)
COMING_IN = (NestedHostError, *RESTORE_FAILED)


def _let_in(host: NestedHost, key: Path, drives: int) -> NestedHost:
    """The running L1's drives found, the testbed's key let in, its libvirtd answering."""
    host.record.drives = _find_drives(host, drives)
    write_atomic(host.state_dir / "known_hosts", _let_key_in(host, key) + "\n")
    deadline = time.monotonic() + 60
    with heartbeat(f"libvirtd in {host.domain} to answer at {host.uri}"):
        while True:
            try:
                connect(host.uri).close()
                return host
            except libvirt.libvirtError as e:
                if time.monotonic() > deadline:
                    raise NestedHostError(f"libvirtd in {host.domain} is not reachable at {host.uri}: "
                                          f"{e.get_error_message()} (console: {host.state_dir / 'console.log'})") from None
                time.sleep(1)


def _fresh_root(state_dir: Path) -> None:
    """The L1's root overlay, new over the image: as a first boot finds it."""
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                    str((HOST_IMAGE_DIR / "rootfs.qcow2").resolve()), str(state_dir / "root.qcow2")], check=True,
                   timeout=60)


def _fresh_start(conn: libvirt.virConnect, name: str, save_key: str, state_dir: Path) -> None:
    """After a restore that proved wrong: its saved state thrown away, the domain stopped and
    undefined, and its root overlay made anew over the image, as for a first boot."""
    nested_saves.forget(save_key)
    try:
        dom = conn.lookupByName(name)
    except libvirt.libvirtError:
        dom = None   # never defined
    try:
        if dom is not None and dom.isActive():
            domain_call(dom, "destroy")
        if dom is not None:
            domain_call(dom, "undefineFlags", 0)
    except libvirt.libvirtError as e:
        raise NestedHostError(f"{name}: after a restore that failed, it could not be removed to boot afresh "
                              f"({e.get_error_message()}). Fix: `harness host nested down`, then `up`") from None
    _fresh_root(state_dir)


def _restored(conn: libvirt.virConnect, name: str, xml: str, save_key: str, state_dir: Path) -> str | None:
    """"restored" once the L1 runs from its saved state (nested_saves), None when there is none, or
    the restore failed (then thrown away, the domain undefined and its root overlay made anew)."""
    about = nested_saves.saved(save_key)
    if about is None:
        return None
    step(f"nested host: restoring {name} from its saved booted state ({save_key})")
    try:
        dom = define(conn, name, xml.replace("<name>", f"<uuid>{about['uuid']}</uuid><name>", 1))
        nested_saves.restore(conn, name, save_key, state_dir, domain_call(dom, "XMLDesc", libvirt.VIR_DOMAIN_XML_SECURE))
        nested_saves.made_its_own(GuestAgent(dom))
        return "restored"
    except RESTORE_FAILED as e:
        warn(f"nested host: restoring {name} failed ({message(e)}); it boots, and its booted state is saved anew")
    _fresh_start(conn, name, save_key, state_dir)
    return None


def _boot(conn: libvirt.virConnect, name: str, xml: str, save_key: str, state_dir: Path,
          choice: accel.AccelChoice, ssh_port: int) -> str:
    """"booted": the L1 defined and booted, its agent answering; its booted state saved for the next up."""
    dom = define(conn, name, xml)
    t0 = time.monotonic()
    domain_call(dom, "create")
    step(f"nested host: booting {name} (accel={choice.accel}), its sshd on 127.0.0.1:{ssh_port}")
    agent = GuestAgent(dom)
    try:
        with heartbeat(f"{name} to boot and its agent to answer", BOOT_TIMEOUT_S):
            agent.wait_ready(BOOT_TIMEOUT_S)
    except AgentError as e:
        raise NestedHostError(f"{e}; its console is {state_dir / 'console.log'}. Fix: read it, then "
                              "`harness host nested down` and `up` again") from None
    if refused := nested_saves.refused(save_key):
        step(f"nested host: its booted state is not saved ({refused})")
        return "booted"
    try:
        nested_saves.capture(dom, agent, state_dir, save_key, time.monotonic() - t0)
        nested_saves.made_its_own(agent)   # restored from the save just made: its clock is behind
    except RESTORE_FAILED as e:
        why = message(e)
        nested_saves.refuse(save_key, f"saving or restoring it failed before: {why}")
        if not dom.isActive():   # saved, then not restored: this up fails, the next boots without saving
            raise NestedHostError(f"{name}: saving its booted state and restoring it failed ({why}). Fix: "
                                  "`harness host nested up` again (it boots without saving)") from None
        warn(f"nested host: saving its booted state failed ({why}); it boots from now on")
    return "booted"


def booting_domains(state_dir: Path) -> list[str]:
    """The nested hosts of a state dir whose boot a live process is doing (no record yet)."""
    found = []
    for marker in state_dir.glob(f"nested*/{BOOTING}") if state_dir.is_dir() else []:
        try:
            who = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        if owner_alive(who):
            found.append(str(who.get("domain", DOMAIN)))
    return found


def _other_drives(host: NestedHost, n) -> str | None:
    """Why a running nested host's drives are not the ones [nested] asks for, or None."""
    r = host.record
    have, want = (len(r.drives), r.drive_mib, r.drive_model), (n.drives, n.drive_mib, n.drive_model)
    if have != want:
        return (f"it has {have[0]} {have[2]} drives of {have[1]} MiB, the config asks for {want[0]} {want[2]} "
                f"drives of {want[1]} MiB")
    return None


def rebuild(place: NestedPlace) -> NestedHost:
    """The config's nested host destroyed and booted anew: after its L1 stopped answering (a KVM
    guest started in an L1 under TCG can hang it), nothing in it can be saved, and a fresh one is
    half a minute away."""
    step(f"nested host: removing {', '.join(_down_one(place.state_dir, 0)) or 'nothing'}")
    return up(place)


def _lost(host: Host, why_lost: Callable[[], str | None]) -> str | None:
    """Why a nested host is taken for lost (`why_lost()`, or its guest agent, through which vtb
    drives it, silent for AGENT_SILENT_S), or None; None for any other kind of host."""
    if not host.rebuildable:
        return None
    if lost := why_lost():
        return lost
    try:
        with heartbeat(f"the guest agent of {host.domain} (silent {AGENT_SILENT_S} s: the host is taken for lost)",
                       AGENT_SILENT_S), guests(paths.LIBVIRT_URI, [host.domain]) as (l1,):
            l1.wait_ready(AGENT_SILENT_S)
    except AgentTimeout:
        return f"its guest agent did not answer for {AGENT_SILENT_S} s"
    except (AgentError, libvirt.libvirtError) as e:
        return str(e)
    return None


def rebuilt_after_loss(place: NestedPlace, host: Host, why_lost: Callable[[], str | None]) -> NestedHost | None:
    """After a failed bring-up on `host`: when it is a nested host that stopped answering (`why_lost()`
    says how; its L1 hung as an L2 started, or its agent fell silent), the host rebuilt, for the
    caller to provision again. None for any other failure, which stands."""
    if not (lost := _lost(host, why_lost)):
        return None
    warn(f"the nested host stopped answering during the bring-up ({lost}); rebuilding it and provisioning again")
    return rebuild(place)


def removed_after_loss(host: Host, why_lost: Callable[[], str | None]) -> list[str] | None:
    """After a failed teardown on `host`: when it is a nested host that stopped answering (`why_lost()`
    says how, asked only of a nested host), the host removed, and the fleet in it with it (nothing
    of it lives outside the L1), and what went. None for any other failure, which stands."""
    if not (lost := _lost(host, why_lost)):
        return None
    warn(f"the nested host stopped answering during the teardown ({lost}); removing it, and the fleet in it "
         "with it (the next run boots a new one)")
    return _remove(host.domain, host.state_dir)


def _find_drives(host: NestedHost, count: int) -> list[str]:
    """The L1's device paths of our drives, by serial (no udev there, so no /dev/disk/by-id)."""
    script = ('for d in /sys/block/*; do s=$(cat "$d/device/serial" 2>/dev/null || cat "$d/serial" 2>/dev/null); '
              'echo "${d##*/} $s"; done')
    deadline = time.monotonic() + 30
    while True:
        out = host.run(["/bin/sh", "-c", script], timeout=60).stdout.decode()
        by_serial = {s.strip(): f"/dev/{name}" for name, _, s in (l.partition(" ") for l in out.splitlines())}
        found = [by_serial.get(f"{DRIVE_SERIAL}{i}") for i in range(count)]
        if all(found):
            return found  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise NestedHostError(f"{host.domain}: found {sum(map(bool, found))} of {count} drives ({out.strip()!r})")
        time.sleep(1)


def uses_shared_bridge(state_dir: Path) -> bool:
    """Whether the state dir records the shared bridge: made from it (its record, written before the
    bridge), or a nested host there on it (its record has the shared network's address)."""
    if (state_dir / BRIDGE_RECORD).exists():
        return True
    for record in state_dir.glob(f"nested*/{RECORD}") if state_dir.is_dir() else []:
        try:
            if "shared_address" in json.loads(record.read_text()):
                return True
        except (OSError, ValueError):
            continue
    return False


def down(state_dir: Path) -> list[str]:
    """Destroys every nested host and removes their files (everything in them goes with them), and
    the config that drove them as ssh hosts."""
    names = [f"{DOMAIN}{d.name.removeprefix('nested')}" for d in state_dir.glob("nested*") if d.is_dir()]
    try:
        conn = connect(paths.LIBVIRT_URI)
        try:
            names += [d.name() for d in conn.listAllDomains()]   # running and defined alike
        finally:
            conn.close()
    except libvirt.libvirtError:
        pass
    indices = {0} | {int(m.group(1) or 0) for n in names if (m := re.fullmatch(f"{DOMAIN}(\\d*)", n))}
    shared = uses_shared_bridge(state_dir)   # read before the records go with their hosts
    removed = [r for i in sorted(indices) for r in _down_one(state_dir, i)]
    if shared and subprocess.run(["ip", "link", "del", SHARED_BRIDGE], capture_output=True, timeout=60).returncode == 0:
        removed.append(f"bridge {SHARED_BRIDGE}")
    (state_dir / BRIDGE_RECORD).unlink(missing_ok=True)
    for path in (state_dir / SSH_HOSTS_CONFIG, state_dir / SSH_FLEET_DIR, state_dir / SSH_KEY_DIR):
        if path.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True, timeout=300)
            removed.append(f"files {path}")
    return removed


def _down_one(state_dir: Path, index: int) -> list[str]:
    """Destroys nested host `index` and removes its files."""
    return _remove(domain_name(index), state_dir / state_subdir(index))


def _remove(name: str, nested_dir: Path) -> list[str]:
    """Destroys the nested host's domain and removes its folder."""
    removed = []
    try:
        conn = connect(paths.LIBVIRT_URI)
    except libvirt.libvirtError:
        conn = None
    if conn is not None:
        try:
            dom = conn.lookupByName(name)
            if owner_of(domain_call(dom, "XMLDesc", 0)) is None and not nested_dir.exists():
                removed.append(f"(domain {name} not removed: {UNRECORDED})")
            else:
                if dom.isActive():
                    domain_call(dom, "destroy")
                domain_call(dom, "undefineFlags", 0)
                removed.append(f"domain {name}")
        except Unanswered as e:   # still there, perhaps running: its folder stays with it
            removed.append(f"(domain {name} not removed: {e})")
            return removed
        except libvirt.libvirtError:
            pass
        finally:
            conn.close()
    if nested_dir.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(nested_dir)], check=True, timeout=300)
        removed.append(f"files {nested_dir}")
    return removed


# --- several nested hosts, driven as ssh hosts -------------------------------------------------
SSH_HOSTS_CONFIG = "nested-hosts.toml"   # under the state dir: the config `up --count N` prints
SSH_FLEET_DIR = "ssh-fleet"              # under the state dir: that config's state dir


def _vcpus_that_fit(place: NestedPlace, count: int) -> NestedPlace:
    """The settings, with each host's vCPUs lowered so that all of them fit this machine's cores,
    unless nested.vcpus was set. A host whose vCPU thread waits for a core stalls its other vCPUs
    (RCU stalls, then a host that answers nothing: seen with 2 x 2 vCPUs under TCG on 2 cores)."""
    cores, n = os.cpu_count() or 1, place.nested
    if count * n.vcpus <= cores:
        return place
    if "vcpus" in n.model_fields_set:
        warn(f"{count} nested hosts x nested.vcpus={n.vcpus} overcommit this machine's {cores} cores; "
             "a starved host can stop answering")
        return place
    fit = max(1, cores // count)
    step(f"nested host: {fit} vCPU(s) each, so that {count} hosts fit this machine's {cores} cores "
         "(set nested.vcpus to choose)")
    return replace(place, nested=n.model_copy(update={"vcpus": fit}))


def up_many(place: NestedPlace, count: int, results_dir: Path, disk_size_mib: int) -> Path:
    """Boots nested hosts 0..count-1 (kept when up), lets the testbed's own key in as root, and
    writes a config that drives them all as `ssh` hosts: exactly the path a user's servers take,
    writing to `results_dir`, each VM's disk at most `disk_size_mib`. Returns that config's path."""
    place = _vcpus_that_fit(place, count)
    with ThreadPoolExecutor(count) as pool:
        nested = list(pool.map(lambda i: up(place, i), range(count)))
    key_dir = place.state_dir / SSH_KEY_DIR
    key = _testbed_key(place.state_dir)
    write_atomic(key_dir / "known_hosts", "".join(Path(h.record.known_hosts).read_text() for h in nested))
    tables = [f'''[[hosts]]
name = "nested{i}"
ssh = "root@127.0.0.1"
port = {host.record.ssh_port}
identity = "{key}"
known_hosts = "{key_dir / 'known_hosts'}"
devices = [{", ".join(f'"{d}"' for d in host.drives)}]
cluster_address = "{ipaddress.ip_interface(host.record.shared_address).ip}"
''' for i, host in enumerate(nested)]
    drive_mib = place.nested.drive_mib
    text = (f"# Written by `harness host nested up --count {count}`: the {count} nested hosts as ssh hosts.\n"
            f"# `harness run vm-scaling --config THIS_FILE` spreads the fleet over them.\n"
            f'state_dir = "{place.state_dir / SSH_FLEET_DIR}"\nresults_dir = "{results_dir}"\n\n'
            f"[fleet]\n# slices of each host's first {drive_mib} MiB drive: room for 4 VMs a host\n"
            f"disk_size_mib = {min(disk_size_mib, drive_mib // 4)}\n\n"
            + "\n".join(tables))
    path = place.state_dir / SSH_HOSTS_CONFIG
    write_atomic(path, text)
    return path


def _shared_bridge_recorded(s: Scope) -> set[str]:
    """The shared bridge, while a state dir records it (gc then removes it with the nested hosts)."""
    return {SHARED_BRIDGE} if any(uses_shared_bridge(d) for d in s.state_dirs) else set()


def _live_hosts(state_dir: Path, read: bool) -> list[str]:
    """The nested hosts with a record in the state dir, and those a live process is booting; all
    of them (by the prefix) when the dir may not be read."""
    if not read:
        return [DOMAIN] if any(state_dir.glob(f"nested*/{RECORD}")) else []
    recorded = [json.loads(r.read_text()).get("domain", DOMAIN) for r in state_dir.glob(f"nested*/{RECORD}")]
    return recorded + booting_domains(state_dir)


RECORDED_NETWORKS = (_shared_bridge_recorded,)
LIVE_NAMES = (_live_hosts,)
