"""The backend interface and the small XML/QEMU-option helpers every backend shares."""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

from harness.common import pids
from harness.common.exits import StepFailed
from harness.common.paths import safe_path
from harness.common.schema import Section
from harness.hosts import Host, LocalHost, descriptor_problem
from harness.libvirt.libvirt_xml import attr, qemu_commandline, qemu_opt
from harness.resources.ceph.plan import CephFleet

DATA_SERIAL = "vtb-data"     # the guest runner finds a disk by this serial ...
DATA_PCI_SLOT = 0x10         # ... or, for devices with no serial, by this guest PCI slot
NAME = re.compile(r"vtb-[a-z0-9][a-z0-9.-]*")   # a fleet's prefix, its VMs', pool's and volume's names


@dataclass(frozen=True)
class HostProcess:
    """A long-lived process a backend's host side runs: every point records its CPU time, and gc
    stops one that is vtb's by record."""
    label: str          # the CPU figure it counts in (cpu_<label>_s in every sample)
    executable: str     # its executable's name, as ps shows it
    pattern: str        # text its command line contains
    polls: bool = False  # it polls by design: its CPU does not make the host busy
    what: str = ""      # its name in summaries (default: the executable)


@dataclass(frozen=True)
class HostDevice:
    path: str                  # the file or block device every data disk is carved from
    kind: str                  # "file" (a volume in the fleet's pool), "block", or "rbd" (an image,
                               # path rbd:POOL/IMAGE@CONF)
    pool: str | None = None
    volume: str | None = None


@dataclass(frozen=True)
class VmSlot:
    index: int
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class HostPlan:
    """Everything the host side of a backend needs; saved as JSON for Terraform's hooks."""
    prefix: str
    fleet_dir: str
    disk: dict                 # DiskConfig as data
    device: HostDevice
    vms: list[VmSlot] = field(default_factory=list)
    host: dict = field(default_factory=lambda: LocalHost().descriptor())  # where the host side runs
    guest_memory_mib: int = 0  # each VM's RAM (a vhost-user target maps all of it)
    allow: list[str] = field(default_factory=list)  # the host's allowlist of devices (raid.allow here), for vfio
    slice_bytes: int = 0       # each VM's slice (fleet.disk_size_mib)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "HostPlan":
        """The plan, every field checked first (gc reads plans back from disk and acts as root on
        what they name): ValueError naming the first that is not what vtb writes. Its backend's
        own fields are its backend's to check: harness.backends.read_plan."""
        d = json.loads(text)
        plan = cls(prefix=d["prefix"], fleet_dir=d["fleet_dir"], disk=d["disk"],
                   device=HostDevice(**d["device"]), vms=[VmSlot(**v) for v in d["vms"]],
                   host=d.get("host") or LocalHost().descriptor(), guest_memory_mib=d.get("guest_memory_mib", 0),
                   allow=d.get("allow", []), slice_bytes=d.get("slice_bytes", 0))
        if why := plan.problem():
            raise ValueError(why)
        return plan

    def problem(self) -> str | None:
        """The first field that is not what vtb writes, or None."""
        dev = self.device
        checks = [
            (NAME.fullmatch(self.prefix), f"prefix {self.prefix!r} is not a vtb- name"),
            (safe_path(self.fleet_dir), f"fleet_dir {self.fleet_dir!r} is not an absolute path without '..'"),
            (dev.kind in ("file", "block", "rbd"), f"device.kind {dev.kind!r} is not file, block or rbd"),
            # an rbd image's path is rbd:POOL/IMAGE@CONF#ID: its conf is the path
            (safe_path(dev.path.partition("@")[2].partition("#")[0] if dev.kind == "rbd" else dev.path),
             f"device.path {dev.path!r} is not an absolute path without '..'"),
            (all(v is None or NAME.fullmatch(v) for v in (dev.pool, dev.volume)), "device.pool/volume is not a vtb- name"),
            (all(type(n) is int and n >= 0 for vm in self.vms for n in (vm.index, vm.offset, vm.size)),
             "vms: an index, offset or size is not a whole number"),
            (all(NAME.fullmatch(vm.name) for vm in self.vms), "vms: a name is not a vtb- name"),
            (all(type(n) is int and n >= 0 for n in (self.guest_memory_mib, self.slice_bytes)),
             "guest_memory_mib or slice_bytes is not a whole number"),
            (all(safe_path(a) for a in self.allow), "allow: an entry is not an absolute path without '..'"),
        ]
        if why := next((said for ok, said in checks if not ok), None) or descriptor_problem(self.host):
            return why
        shared = {k: self.disk.get(k) for k in ("cache", "aio", "iothreads", "num_queues") if self.disk.get(k) is not None}
        if not all(re.fullmatch(r"[a-z_]+", v) if isinstance(v, str) else type(v) is int for v in shared.values()):
            return "disk: cache, aio, iothreads or num_queues is not of the config's shape"
        return None

    @property
    def device_bytes(self) -> int:
        """What the device holds: a slice per VM, and one with no VM (a sweep that measures the host only)."""
        return max(1, len(self.vms)) * (self.slice_bytes or (self.vms[0].size if self.vms else 0))   # an older plan's

    @property
    def run_dir(self) -> Path:
        """Sockets and pid files of host-side daemons (its path carries the fleet prefix for gc)."""
        return Path(self.fleet_dir) / f"{self.prefix}-run"


@dataclass(frozen=True)
class Attachment:
    """What one VM gets: XML added to <devices> and to <domain>, and how the guest finds the disk."""
    devices_xml: str = ""
    domain_xml: str = ""
    locator: str = f"serial:{DATA_SERIAL}"


class NoOptions(Section):
    """A backend with no [disk] fields of its own."""


@dataclass(frozen=True)
class Knob:
    """A [disk] field worth tuning, the values a tuning study tries (the first is vtb's default),
    and what changing it trades (the study's answer says it beside a knob that made no difference)."""
    field: str
    values: tuple
    trades: str


AIO = Knob("aio", ("native", "io_uring", "threads"), "how QEMU submits the disk's I/O: Linux AIO, io_uring or a thread pool")
CACHE = Knob("cache", ("none", "directsync", "writeback"),
             "the host's page cache: bypassed, bypassed with a flush after each write, or used")
IOTHREADS = Knob("iothreads", (1, 0), "an I/O thread of the disk's own, or QEMU's main loop")
NUM_QUEUES = Knob("num_queues", (1, 2, 4), "the disk's virtqueues (NVMe: I/O queue pairs)")


class Backend:
    """One way to serve a VM's data disk. Subclasses live one per module in this package."""
    name: ClassVar[str]
    shared_options: ClassVar[frozenset[str]] = frozenset()  # the common [disk] fields it honours
    Options: ClassVar[type[Section]] = NoOptions  # its own [disk] fields (with defaults), merged into [disk]
    summary: ClassVar[str] = ""
    diagnostic: ClassVar[bool] = False  # a measuring aid, not a way to serve disks (left out of "all")
    stores_nothing: ClassVar[bool] = False  # a device with no storage behind it: the virtualization layers alone
    local_host_only: ClassVar[bool] = False  # its host side runs on this machine (not yet through harness.hosts)
    # the host's baseline reads and writes the disks' own slices of a file or block device, so a job
    # file, a trace or a filesystem runs there as in the VMs (not so for images reached through librbd)
    host_slices: ClassVar[bool] = True
    needs_block_device: ClassVar[bool] = False  # its disks must be slices of a host block device, not a file
    processes: ClassVar[tuple[HostProcess, ...]] = ()  # the daemons its host side runs
    knobs: ClassVar[tuple[Knob, ...]] = ()  # the settings `harness run tuning` varies, with their values
    host_packages: ClassVar[tuple[str, ...]] = ()  # Debian packages its host side needs beyond the main job's,
                                                   # installed on first use where the host allows (hosts.packages)

    @property
    def options(self) -> frozenset[str]:
        """Every [disk] field this backend honours."""
        return self.shared_options | frozenset(self.Options.model_fields)

    def check(self, disk) -> str | None:
        """A config the backend cannot honour (beyond unsupported options), as one sentence."""
        return None

    def first_use(self, host: Host, plan: HostPlan) -> None:
        """Builds what its host side needs on its first use, where the host lets vtb (its
        `host_packages` are installed by its fleet first, Testbed.first_use); nothing here."""

    def preflight(self, host: LocalHost, plan: HostPlan) -> str | None:
        """None when this host can serve the backend, else why not, in one sentence."""
        return None

    def host_command(self, plan: HostPlan) -> list[str]:
        """The command line of the host-side daemon serving the first VM's disk, where the backend
        runs one (a tuning study's answer gives it beside the XML); none here."""
        return []

    def disk_store(self, ceph: CephFleet, hosts: Callable[[], list[Host]], host: Host, host_dir: Path,
                   image_base: str):
        """Where the fleet's disks are kept when they are not slices of a host device (the rbd
        backend's Ceph, from `ceph`: harness/resources/ceph/fleet_store.py), or None. `hosts()`:
        the fleet's, asked only by a store that needs them (it may reach each host). The fleet asks
        the store for its device, checks, hooks, record and teardown."""
        return None

    def host_up(self, host: LocalHost, plan: HostPlan) -> None:
        """Provision the host side (daemons, bindings). Idempotent."""

    def host_down(self, host: LocalHost, plan: HostPlan) -> None:
        """Undo host_up. Idempotent, and safe after a crash."""

    def attach(self, plan: HostPlan, vm: VmSlot) -> Attachment:
        raise NotImplementedError

    def fault(self, host: LocalHost, device_path: str) -> str | None:
        """Why the storage under its disks cannot complete I/O now, in that storage's own words (a
        full Ceph cluster), or None. Asked before and during every point of a fleet on it: a fault
        fails the point at once, rather than leaving its I/O waiting."""
        return None

    def guest_view(self, plan: HostPlan, vm: VmSlot) -> dict:
        """What a VM's guest sees of its data disk: its size and every [disk] field this backend
        honours (queues, block sizes, serial). A disk served from outside QEMU has these on a daemon's
        command line, not in the domain XML, so a restored guest is keyed by them too."""
        return {"backend": self.name, "size": vm.size, "disk": {k: plan.disk.get(k) for k in sorted(self.options)}}

    def metadata(self, disk) -> dict:
        """Every knob a result row records; n/a where this backend has no such knob."""
        knobs = ("cache", "aio", "iothreads", "num_queues")
        return {"backend": self.name,
                **{k: (getattr(disk, k) if k in self.options else "n/a") for k in knobs}}


# --- helpers -------------------------------------------------------------------------------
QSD = "qemu-storage-daemon"   # serves several backends' exports (vhost-user-blk, NBD); its CPU counts as "daemon"
QSD_PROCESS = HostProcess("daemon", QSD, QSD)

# Run on the fleet's host (this machine or a nested one), never assumed to be here.
_LISTENING = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
              "try:\n    s.connect(sys.argv[1])\nexcept OSError:\n    sys.exit(1)")


def listening(host, path: Path) -> bool:
    """Something accepts connections on the unix socket at `path`, on the host."""
    return host.run(["python3", "-c", _LISTENING, str(path)], check=False, timeout=30).returncode == 0


def qsd_command(pidfile: Path, plan: "HostPlan", vms: list["VmSlot"], exports: list[str]) -> list[str]:
    """A daemonized qemu-storage-daemon's command line (its pid file `pidfile`): each VM's slice as
    the block node `<vm>-data`, with these export (and server) arguments."""
    d = plan.disk
    args = [QSD, "--daemonize", "--pidfile", str(pidfile)]
    for vm in vms:
        args += [a for spec in file_blockdev(f"{vm.name}-data", plan.device.path, d["cache"], d["aio"], vm)
                 for a in ("--blockdev", spec)]
    return [*args, *exports]


def start_qsd(host, pidfile: Path, plan: "HostPlan", vms: list["VmSlot"], exports: list[str], what: str) -> None:
    """qsd_command's daemon, started on the host; StepFailed with its own message when it does not start."""
    out = host.run(qsd_command(pidfile, plan, vms, exports), check=False, timeout=120)
    if out.returncode != 0:
        raise StepFailed(f"{QSD} for {what} failed to start on {host.label}: {out.stderr.decode(errors='replace').strip()}")
    record_daemon(host, pidfile, what)


def check_listening(host, sockets: list[Path]) -> None:
    """Every socket listens (a daemon that returned may still have failed to); StepFailed naming the first that does not."""
    for sock in sockets:
        if not listening(host, sock):
            raise StepFailed(f"{QSD} is not listening on {sock}")


def succeeds(host, script: str, *args) -> bool:
    """`sh -c script` with `args` as $1... on the host exits 0 (bounded)."""
    return host.run(["sh", "-c", script, "sh", *map(str, args)], check=False, timeout=60).returncode == 0


def record_daemon(host, pidfile: Path, what: str, within_s: float = 10) -> None:
    """Keeps, beside the pid file a daemon just wrote of itself, the proof of that process (its boot
    and start time, harness/common/pids.py), without which it is never signalled; StepFailed when
    the file names no running process within the bound."""
    if not pids.on(host, "record", str(pidfile), within_s, timeout=60 + within_s):
        raise StepFailed(f"{what} on {host.label} wrote no pid file of a running process at {pidfile}")


def daemon_alive(host, pidfile: Path) -> bool:
    """A host-side daemon the harness started (qemu-storage-daemon, SPDK, tgtd) is running, by its pid
    file and the proof beside it (a pid file outlives a reboot, and its pid may be another process's
    now). A killed one not yet reaped (a zombie: its parent, or an init that reaps late) is not."""
    return pids.on(host, "alive", str(pidfile), timeout=30)


def stop_daemon(host, pidfile: Path, grace_s: float = 5, *also_remove: Path) -> None:
    """TERM to the daemon in the pid file, KILL after the grace, each only while its proof holds;
    removes the pid file, its proof (and `also_remove`, e.g. its sockets). Safe to repeat."""
    pids.on(host, "stop", str(pidfile), grace_s, *map(str, also_remove), timeout=60 + grace_s)


def disk_source(device: HostDevice, vm: VmSlot) -> tuple[str, str]:
    """(disk type, <source> element) for the VM's slice of the host device."""
    slices = f"<slices><slice type='storage' offset={attr(vm.offset)} size={attr(vm.size)}/></slices>"
    if device.kind == "file":
        return "volume", f"<source pool={attr(device.pool)} volume={attr(device.volume)}>{slices}</source>"
    return "block", f"<source dev={attr(device.path)}>{slices}</source>"


def data_disk(plan: HostPlan, vm: VmSlot, target: str, bus: str, driver_extra: str = "") -> str:
    """A <disk> for the VM's slice of the host device, found in the guest by our serial; shareable
    because every VM opens the same device."""
    kind, source = disk_source(plan.device, vm)
    d = plan.disk
    return (f"<disk type={attr(kind)} device='disk'>"
            f"<driver name='qemu' type='raw' cache={attr(d['cache'])} io={attr(d['aio'])}{driver_extra}/>"
            f"{source}<target dev={attr(target)} bus={attr(bus)}/><serial>{DATA_SERIAL}</serial><shareable/></disk>")


def iothreads(n: int) -> tuple[str, str]:
    """(driver attribute, domain element) for n iothreads, the first serving the disk."""
    return (" iothread='1'", f"<iothreads>{n}</iothreads>") if n else ("", "")


def shared_memory(hugepages: bool = False) -> str:
    """vhost-user needs guest RAM that another process can map; SPDK also needs it in hugepages
    (it translates guest addresses through its hugepage map: 4 KiB pages crash it)."""
    huge = "<hugepages/>" if hugepages else ""
    return f"<memoryBacking>{huge}<source type='memfd'/><access mode='shared'/></memoryBacking>"


def file_blockdev(node: str, path: str, cache: str, aio: str, vm: VmSlot) -> list[str]:
    """Block node definitions (values of QEMU's -blockdev, qemu-storage-daemon's --blockdev) for the
    VM's slice of the device: a file node under a raw node with offset/size. Locking is off because
    every VM (or daemon) opens the same file, each within its own slice."""
    direct = "on" if cache in ("none", "directsync") else "off"
    return [f"driver=file,node-name={node}-file,filename={qemu_opt(path)},cache.direct={direct},aio={aio},locking=off",
            f"driver=raw,node-name={node},file={node}-file,offset={vm.offset},size={vm.size}"]


def virtio_blk_args(node: str, disk: dict) -> list[str]:
    """A virtio-blk device on the block node `node`, on a QEMU command line (for disks the provider
    cannot carry: network block drivers), found by our serial at the fixed data slot; its iothread
    when disk.iothreads asks for one."""
    device = f"virtio-blk-pci,drive={node},serial={DATA_SERIAL},num-queues={disk['num_queues']}"
    args = []
    if disk["iothreads"]:
        args += ["-object", "iothread,id=vtbio0"]
        device += ",iothread=vtbio0"
    return [*args, "-device", f"{device},bus=pci.0,addr={DATA_PCI_SLOT:#x}"]


def pci_address(slot: int = DATA_PCI_SLOT) -> str:
    return f"0000:00:{slot:02x}.0"


def vhost_user_blk(sock: Path, num_queues: int, hugepages: bool = False) -> Attachment:
    """A vhost-user-blk device on a QEMU command line (the provider cannot carry a vhostuser disk),
    at the fixed data PCI slot, with the shared guest memory vhost-user requires."""
    args = ["-chardev", f"socket,id=vtbvhost,path={qemu_opt(sock)}",
            "-device", f"vhost-user-blk-pci,chardev=vtbvhost,num-queues={num_queues},"
                       f"bus=pci.0,addr={DATA_PCI_SLOT:#x}"]
    return Attachment(domain_xml=shared_memory(hugepages) + qemu_commandline(*args), locator=f"pci:{pci_address()}")
