"""The testbed: guest image + Terraform-provisioned fleet on a host. Brings it up, describes it, tears it down."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import libvirt

from harness import backends, hosts
from harness.backends import HostDevice, HostPlan, VmSlot
from harness.common import cancel, paths
from harness.common.bounded import heartbeat
from harness.common.console import step, warn
from harness.common.exits import BringUpFailed
from harness.common.files import write_atomic
from harness.common.pids import owner
from harness.common.schema import Refusal
from harness.config.core import Config
from harness.fleet import gc, guest_consoles, host_images, vm_start
from harness.hosts import Host, LocalHost, accel, packages, page_cache
from harness.hosts.folders import state_dir_problem
from harness.hosts.local import Stopped
from harness.hosts.ssh import SshError
from harness.libvirt.agent import AgentError, AgentTimeout, GuestAgent, guests, in_parallel, restart
from harness.libvirt.libvirt_conn import connect, unanswered
from harness.libvirt.libvirt_xml import owner_metadata
from harness.resources import entry, image_builds, nested_l1
from harness.resources import leftovers as resource_leftovers
from harness.resources.devices import refuse_reason_on, size_bytes_on
from harness.resources.raid import RaidPlan, destroy_arrays, under_fleet

AGENT_TIMEOUT_S = 180
# A bound on one terraform apply or destroy: minutes at most, even uploading the image to a nested
# host under TCG. A host that stops answering stops it much sooner (the checks below).
TERRAFORM_TIMEOUT_S = 1200
HOST_CHECK_EVERY_S = 30     # while Terraform runs, the host and its libvirtd are asked this often,
HOST_SILENT_CHECKS = 2      # and Terraform is stopped after this many unanswered checks in a row (an
                            # L1 that hung as an L2 started never came back; 4 checks cost 5 min)
LIBVIRT_ANSWER_S = 30


class TestbedError(BringUpFailed):
    pass


# What a failed bring-up raises (a resource's own failure too: a BringUpFailed): the caller then
# asks whether the host was lost (and rebuilds it)
BRING_UP_FAILURES = (BringUpFailed, AgentError, SshError)


@dataclass
class VmInfo:
    name: str
    slice_offset: int
    slice_bytes: int
    locator: str        # how the guest runner finds the data disk: serial:<s> or pci:<address>
    console_log: str
    index: int = 0      # its number in the fleet (vm<index>), across hosts when the fleet spans several
    host: str = ""      # the host it runs on


@dataclass
class TestbedRecord:
    """What `up` deployed; `run` measures against this, not against today's config."""
    prefix: str
    uri: str
    vms: list[VmInfo]
    device_path: str
    device_kind: str            # "file" (created, prefilled) or "block" (user-named, an array, a drive)
    accel: dict
    disk: dict                  # backend metadata
    fleet: dict
    image: str
    ready_s: dict = field(default_factory=dict)  # seconds from apply to agent answer, per VM
    host: dict = field(default_factory=dict)     # the host's descriptor (see harness.hosts)
    raid: dict | None = None                     # the RAID array under the fleet, if any
    ceph: dict | None = None                     # the local Ceph cluster under the fleet, if any
    boot_restarts: dict = field(default_factory=dict)  # VM -> why it was restarted while booting
    started: dict = field(default_factory=dict)  # VM -> {"how": "restored" | "booted", "reason": why it booted}

    def metadata(self) -> dict:
        """What every sample measured on this testbed records about it."""
        return {**self.disk, "device_kind": self.device_kind, "device": self.device_path, "image": self.image,
                "fleet_vms": len(self.vms), "vcpus": self.fleet["vcpus"], "memory_mib": self.fleet["memory_mib"],
                "guest_kernel": self.fleet.get("kernel", "cloud"),
                "data_size_bytes": self.vms[0].slice_bytes if self.vms else 0,
                "vm_start": "/".join(sorted({s["how"] for s in self.started.values()})) or "unknown"}

    @classmethod
    def from_json(cls, text: str) -> "TestbedRecord":
        d = json.loads(text)
        d["vms"] = [VmInfo(**v) for v in d["vms"]]
        return cls(**d)


def plan_path(folder: Path, kind: str, text: str) -> Path:
    """Where a plan of `kind` (backend, raid, ceph) is kept in a fleet's folder: named by its content."""
    return folder / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.json"


@contextlib.contextmanager
def torn_down_after(fleet: Callable[[], "Testbed"], what: str = "") -> Iterator[None]:
    """Runs the body, then tears down the fleet `fleet()` names then (a sweep's changes block by
    block). When the body failed (or was stopped), a teardown that fails too is a warning: the
    body's error, or the Ctrl-C, stays the one the run reports and exits by."""
    try:
        yield
    except BaseException:
        if what:
            step(f"tearing down {what}")
        try:
            with cancel.lowered():   # stopped by Ctrl-C: what the run made goes all the same
                fleet().down(quiet=True)
        except Exception as e:
            warn(f"tearing down {what or 'the fleet'} failed too: {e}")
        raise
    if what:
        step(f"tearing down {what}")
    fleet().down(quiet=True)


class Testbed:
    def __init__(self, cfg: Config, host: Host | None = None, raid: RaidPlan | None = None,
                 device: str | None = None, run_scoped: bool = False, indices: list[int] | None = None):
        """`raid`: an array to build under the fleet; `device`: a host block device to use as is
        (both are for experiments; the config's fleet.device is the user's). `indices`: this host's
        share of a fleet that spans hosts (harness/fleet/multi_host.py); unset = the whole fleet."""
        self.cfg = cfg
        self.host = host or hosts.placed(cfg.placement)
        self.raid = raid or (None if device else under_fleet(
            cfg.raid, self.host, f"{cfg.prefix}-raid", cfg.state_dir / cfg.fleet.name / f"{cfg.prefix}-raid-mnt",
            cfg.fleet.vms * cfg.fleet.disk_size_mib << 20))
        self.device = device
        self.run_scoped = run_scoped   # a sweep's own fleet: `gc` may remove it once its run is gone
        self.indices = list(range(cfg.fleet.vms)) if indices is None else indices
        self.part = indices is not None
        fleet = cfg.state_dir / cfg.fleet.name
        self.dir = fleet / "hosts" / self.host.name if self.part else fleet   # one Terraform root per host
        self.host_dir = self.host.fleet_dir(self.dir, cfg.fleet.name)         # the same, on the host
        # the fleet's disks kept elsewhere than on a host device (the rbd backend's Ceph), or None
        self.store = backends.get(cfg.disk.backend).disk_store(
            cfg.ceph_fleet, lambda: hosts.all_placed(cfg.placement), self.host, self.host_dir,
            f"{cfg.prefix}-{self.host.name}" if self.part else cfg.prefix)
        self.record_path = self.dir / "testbed.json"
        log = f"{cfg.prefix}-{self.host.name}-terraform.log" if self.part else f"{cfg.prefix}-terraform.log"
        self.log = cfg.state_dir / "logs" / log  # outlives the fleet, for post-mortems

    # --- Terraform -------------------------------------------------------------------------
    def _terraform(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        tf = paths.TERRAFORM_CACHE / "bin" / "terraform"
        env = {**os.environ, "TF_CLI_CONFIG_FILE": str(paths.TERRAFORM_CACHE / "cli.tfrc"),
               "TF_DATA_DIR": str(self.dir / ".terraform"), "TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
               "CHECKPOINT_DISABLE": "1"}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        argv = [str(tf), f"-chdir={paths.TERRAFORM_DIR}", *args]
        silent = 0

        def host_gone() -> str | None:   # the provider waits without end on a host that stopped answering
            nonlocal silent
            why = self.host_not_answering()
            silent = silent + 1 if why else 0
            return (f"the host did not answer {silent} checks {HOST_CHECK_EVERY_S} s apart ({why})"
                    if silent >= HOST_SILENT_CHECKS else None)
        try:
            with heartbeat(f"terraform {args[0]} on {self.host.label} (log: {self.log})", TERRAFORM_TIMEOUT_S):
                done = LocalHost().run(argv, env=env, timeout=TERRAFORM_TIMEOUT_S, check=False,
                                       stop_when=host_gone, check_every_s=HOST_CHECK_EVERY_S)
        except (subprocess.TimeoutExpired, Stopped) as e:
            stopped = str(e) if isinstance(e, Stopped) else f"it did not finish within {TERRAFORM_TIMEOUT_S} s"
            printed = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
            with open(self.log, "a") as log:
                log.write(f"$ terraform {' '.join(args)}\n{printed}\n(stopped: {stopped})\n")
            raise TestbedError(f"terraform {args[0]} on {self.host.label} was stopped: {stopped} (log: {self.log}). "
                               "Fix: check that host (`harness host nested down` removes a nested one), then retry") from None
        proc = subprocess.CompletedProcess(argv, done.returncode, done.stdout.decode(errors="replace"),
                                           done.stderr.decode(errors="replace"))
        with open(self.log, "a") as log:
            log.write(f"$ terraform {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
        if check and proc.returncode != 0:
            err = "\n".join(l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("╵"))
            raise TestbedError(f"terraform {args[0]} failed (log: {self.log}):\n{err[-1500:]}")
        return proc

    def host_not_answering(self) -> str | None:
        """Why the host or its libvirtd does not answer now, or None."""
        return self.host.stopped() or unanswered(self.host.uri, LIBVIRT_ANSWER_S)

    def _state_args(self) -> list[str]:
        return [f"-state={self.dir / 'terraform.tfstate'}", f"-var-file={self.dir / 'fleet.tfvars.json'}"]

    def plan(self) -> HostPlan:
        """The backend's view of this fleet: the host device and each VM's slice of it."""
        f, prefix = self.cfg.fleet, self.cfg.prefix
        if self.store is not None:   # one image in the store, carved like the file
            device = HostDevice(path=self.store.image().locator, kind=self.store.device_kind)
        elif self.raid is not None and self.raid.filesystem:  # a file on the array's filesystem
            device = HostDevice(path=self.raid.data_device, kind="block")
        elif self.raid is not None:
            device = HostDevice(path=self.raid.device, kind="block")
        elif self.device is not None:
            device = HostDevice(path=self.device, kind="block")
        elif f.device is not None:
            device = HostDevice(path=str(f.device), kind="block")
        elif self.host.drives:  # a nested host's first drive, an ssh host's first allowed device
            device = HostDevice(path=self.host.drives[0], kind="block")
        else:  # a prefilled file in the pool (prefilled here, so the host must be this machine)
            volume = f"{prefix}-device.raw"
            device = HostDevice(path=str(self.dir / "pool" / volume), kind="file", pool=prefix, volume=volume)
        size = f.disk_size_mib << 20
        # slices are numbered on each host's device; names across the fleet
        return HostPlan(prefix=prefix, fleet_dir=str(self.host_dir), disk=self.cfg.disk.model_dump(), device=device,
                        vms=[VmSlot(i, f"{prefix}-vm{i}", j * size, size) for j, i in enumerate(self.indices)],
                        host=self.host.descriptor(), guest_memory_mib=f.memory_mib, allow=list(self.cfg.raid.allow),
                        slice_bytes=size)

    def _hook_file(self, kind: str, text: str) -> Path:
        """A Terraform hook's input, in a file named by its content: a changed plan is a new file,
        so Terraform replaces the resource and the old one's teardown reads the old plan."""
        path = plan_path(self.dir, kind, text)
        write_atomic(path, text)
        return path

    def _tfvars(self, choice: accel.AccelChoice, backend: backends.Backend, plan: HostPlan) -> dict:
        f, img = self.cfg.fleet, self.image_dir
        on_host = host_images.kept_on(self.host, img)
        files = host_images.paths_on_host(img) if on_host else \
            {field: str(img / name) for field, name in host_images.files_of(img).items()}
        kernel, initrd = ("kernel", "initrd") if f.kernel == "cloud" else ("kernel_generic", "initrd_generic")
        image = {"rootfs": files["rootfs"], "kernel": files[kernel], "initrd": files[initrd], "on_host": on_host}
        # The backend's host side runs from Terraform (before the domains, after them on destroy).
        backend_file = self._hook_file("backend", plan.to_json())
        raid = {"create": "", "destroy": ""}
        if self.raid is not None:
            raid_file = self._hook_file("raid", self.raid.to_json())
            raid = {what: entry.command("resources", f"raid {what}", raid_file) for what in raid}
        ceph = self.store.hooks(self._hook_file) if self.store else {"create": "", "destroy": ""}
        return {
            "libvirt_uri": self.host.uri, "prefix": plan.prefix, "pool_dir": str(self.host_dir / "pool"),
            "image": image,
            "domain_type": choice.domain_type, "vcpus": f.vcpus, "memory_mib": f.memory_mib,
            "console_dir": str(self.host_dir / "consoles"), "start_vms": self._why_no_restore() is not None,
            "device_bytes": plan.device_bytes if plan.device.kind == "file" else 0,
            "raid": raid, "ceph": ceph,
            "backend": {"host_up": entry.command("backends", "host-up", backend_file),
                        "host_down": entry.command("backends", "host-down", backend_file),
                        "vms": [{"name": vm.name, "devices_xml": a.devices_xml,
                                 "domain_xml": a.domain_xml + owner_metadata(self.cfg.prefix)}
                                for vm, a in ((vm, backend.attach(plan, vm)) for vm in plan.vms)]},
        }

    def for_backend(self, name: str) -> "Testbed":
        """The same fleet served by another backend (raises ConfigError if the options do not fit)."""
        return Testbed(self.cfg.model_copy(update={"disk": self.cfg.disk.with_backend(name)}), self.host,
                       self.raid, self.device, self.run_scoped, self.indices if self.part else None)

    def backend_verdict(self, plan: HostPlan | None = None) -> str | None:
        """Why this host cannot serve the configured backend, or None."""
        backend = backends.get(self.cfg.disk.backend)
        if backend.local_host_only and not self.host.is_this_machine:
            return f"its host side runs on this machine only for now, not on the {self.host.name} host"
        return backend.preflight(self.host, plan or self.plan())

    def first_use(self, plan: HostPlan | None = None) -> None:
        """What the fleet's backend (and a cluster vtb makes under it) needs on the host beyond the
        main job's, installed (one apt run) or built on its first use, where the host lets vtb."""
        backend = backends.get(self.cfg.disk.backend)
        store = self.store.host_packages() if self.store else ()
        packages.ensure(self.host, (*store, *backend.host_packages), f"the {backend.name} backend")
        backend.first_use(self.host, plan or self.plan())

    # --- lifecycle -------------------------------------------------------------------------
    def preflight(self) -> tuple[backends.Backend, HostPlan]:
        """Every check before anything is made: what the host needs (the image, Terraform, libvirt),
        what the plan puts where (its device, its backend), and the user's device gate."""
        self._host_ready()
        backend = backends.get(self.cfg.disk.backend)
        self._fit_to_drive()
        plan = self.plan()
        self.first_use(plan)
        self._placement_refusal(backend, plan)
        # the fleet's disks on fleet.device (not an array's, nor a device a sweep hands over): checked
        # now, on its host, however long ago the config loaded
        gated = self.cfg.fleet.device is not None and self.raid is None and self.device is None
        if gated:
            self._user_device_gate(str(self.cfg.fleet.device))
        self._device_fits(plan)
        if not gated and self.host.drives_are_users and plan.device.path in self.host.drives:   # its first drive
            if reason := refuse_reason_on(self.host, plan.device.path, wipe_field="its own data"):
                raise Refusal(f"{self.host.label}: device {plan.device.path} refused: {reason}")
        return backend, plan

    @functools.cached_property
    def image_dir(self) -> Path:
        """The guest image the fleet boots (chosen once, for every step of one bring-up): the full
        one where the config asks for it or for the generic kernel (only it has one), where the host
        holds it already (a nested host's image carries it) or where the fleet runs it already (a
        fleet of fio's guests is served by it); else the main job's, the quicker to build and upload."""
        f, full = self.cfg.fleet, paths.FULL_IMAGE_DIR
        if f.image == "full" or f.kernel == "generic" or self.host.keeps_guest_image:
            return full
        if (key := host_images.recipe(full)) is None:
            return paths.IMAGE_DIR
        runs_it = self.record_path.exists() and json.loads(self.record_path.read_text()).get("image") == key
        if runs_it or (not self.host.is_this_machine and host_images.kept_on(self.host, full)):
            return full
        return paths.IMAGE_DIR

    def _host_ready(self) -> None:
        """The state dir, the built image (the full one built on its first use) and Terraform,
        libvirt answering, a Ceph plan whose OSDs fit."""
        if why := state_dir_problem(LocalHost(), str(self.cfg.state_dir), "state_dir"):
            raise Refusal(why)
        image = self.image_dir
        if image == paths.FULL_IMAGE_DIR and not (image / "rootfs.qcow2").exists():
            image_builds.built("guest-full", "the guest image of every workload (about a minute, once)")
        missing = [p for p in (image / "rootfs.qcow2", paths.TERRAFORM_CACHE / "cli.tfrc",
                               paths.TERRAFORM_CACHE / "bin" / "terraform") if not p.exists()]
        if missing:
            raise TestbedError(f"missing {', '.join(map(str, missing))}. Fix: run `make testbed up` "
                               "(it builds the guest image and the Terraform provider)")
        try:
            connect(self.host.uri).close()
        except libvirt.libvirtError as e:
            raise TestbedError(f"libvirt at {self.host.uri} is not reachable ({e.get_error_message()}). "
                               "Fix: run `make testbed up` (it starts libvirtd)") from None
        if self.store is not None and (reason := self.store.size_problem()):
            raise TestbedError(reason)

    def _placement_refusal(self, backend: backends.Backend, plan: HostPlan) -> None:
        """Where the plan puts the disks against what the backend and host take."""
        if self.store is not None and (self.raid or self.device or self.cfg.fleet.device):
            what = "raid.level" if self.raid else "fleet.device" if self.cfg.fleet.device else "the experiment's device"
            raise Refusal(f"backend {backend.name} keeps the fleet's disks in {self.store.what}, so {what} would go "
                          "unused. Fix: remove it, or choose another backend")
        if plan.device.kind == "file" and not self.host.is_this_machine:
            raise Refusal(f"a fleet on the {self.host.name} host needs a block device there (an array, "
                          "or one of its drives), not a file prefilled on this machine")
        if reason := self.backend_verdict(plan):
            raise Refusal(f"backend {backend.name} cannot run here: {reason}")
        if self.store is not None and (reason := self.store.refusal()):
            raise Refusal(reason)

    def _device_fits(self, plan: HostPlan) -> None:
        """A block device on another host holds the fleet's slices."""
        if plan.device.kind != "block" or self.host.is_this_machine or self.raid is not None:
            return
        have = size_bytes_on(self.host, plan.device.path)
        need = len(plan.vms) * (self.cfg.fleet.disk_size_mib << 20)
        if have < need:
            raise Refusal(f"{self.host.label}: {plan.device.path} has {have >> 20} MiB, and {len(plan.vms)} VM(s) "
                          f"x fleet.disk_size_mib={self.cfg.fleet.disk_size_mib} need {need >> 20} MiB. "
                          "Fix: lower fleet.disk_size_mib or the VM count")

    def _user_device_gate(self, device: str) -> None:
        """fleet.device, checked on its host just before use: on that host's allowlist (its devices,
        a nested host's drives, or raid.allow on this machine) and free there."""
        here = self.host.is_this_machine
        allow = list(self.cfg.raid.allow) if here else list(self.host.drives) or None
        field = "raid.allow" if here else f"that host's allowlist ({', '.join(allow or [])})"
        if reason := refuse_reason_on(self.host, device, allow_signature=self.cfg.fleet.wipe, wipe_field="fleet.wipe",
                                      allow=allow, allow_field=field):
            raise Refusal(f"{self.host.label}: fleet.device {device} refused: {reason}")

    def _fit_to_drive(self) -> None:
        """A fleet on its host's own drive (a nested host's are small) whose disk size the user left
        unset gets slices that fit that drive, rather than a refusal of the defaults."""
        f = self.cfg.fleet
        if ("disk_size_mib" in f.model_fields_set or not self.host.drives or self.store or self.raid
                or self.device or f.device):
            return
        drive = self.host.drives[0]
        probed = self.host.run(["blockdev", "--getsize64", drive], timeout=60, check=False)
        if probed.returncode != 0:
            return   # preflight's own size check says what is wrong with the drive
        have = int(probed.stdout or 0) >> 20
        fit = have // max(1, len(self.indices))
        if 16 <= fit < f.disk_size_mib:
            step(f"fleet.disk_size_mib: {fit} MiB a VM, so that {len(self.indices)} VMs fit on {drive} ({have} MiB) of "
                 f"{self.host.label} (set fleet.disk_size_mib to choose)")
            self.cfg = self.cfg.model_copy(update={"fleet": f.model_copy(update={"disk_size_mib": fit})})

    def accel(self) -> accel.AccelChoice:
        return accel.choose(self.cfg.fleet.accel, self.image_dir / "vmlinuz", self.host)   # the cloud kernel of either

    def up(self) -> TestbedRecord:
        backend, plan = self.preflight()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host.run(["mkdir", "-p", str(self.host_dir / "consoles")], timeout=60)  # QEMU creates the logs, not their directory
        choice = self.accel()
        step(f"accelerator: {choice.accel} ({choice.reason})")
        gc.register_state_dir(self.cfg.state_dir)
        if self.run_scoped:
            write_atomic(self.dir / "owner.json", json.dumps(owner()))
        for said in self.store.prepare(self.dir, self.cfg.prefix) if self.store else []:
            step(said)
        write_atomic(self.dir / "fleet.tfvars.json", json.dumps(self._tfvars(choice, backend, plan), indent=2))
        image = self.image_dir
        if host_images.kept_on(self.host, image):
            host_images.ensure(self.host, image)
        self._drop_stale_state()
        self._terraform("init", "-input=false", "-no-color")
        step(f"terraform apply: {len(plan.vms)} VM(s) named {self.cfg.prefix}-vm*" +
             (f" on {self.host.label}" if self.part else ""))
        t0 = time.monotonic()
        self._apply()
        page_cache.flush(self.host)  # the prefilled device is written back now, not during the first point
        vms = [VmInfo(vm.name, vm.offset, vm.size, backend.attach(plan, vm).locator,
                      str(self.host_dir / "consoles" / f"{vm.name}.log"), vm.index, self.host.name) for vm in plan.vms]
        views = {vm.name: json.dumps(backend.guest_view(plan, vm), sort_keys=True) for vm in plan.vms}
        started, ready, boot_restarts = {}, {}, {}
        try:
            if vms:   # none: a sweep measured on the host only wants the disk, not a VM
                started, ready, boot_restarts = self._started(vms, views, t0)
        except (AgentError, libvirt.libvirtError, vm_start.TemplateError) as e:
            raise TestbedError(f"{vm_start.message(e)}; {self._keep_consoles_and_undo()}") from None
        record = TestbedRecord(
            prefix=self.cfg.prefix, uri=self.host.uri, vms=vms, device_path=plan.device.path,
            device_kind=plan.device.kind, accel=accel.as_dict(choice),
            disk=backend.metadata(self.cfg.disk),
            fleet={"vms": len(vms), "vcpus": self.cfg.fleet.vcpus, "memory_mib": self.cfg.fleet.memory_mib,
                   "disk_size_mib": self.cfg.fleet.disk_size_mib, "kernel": self.cfg.fleet.kernel},
            image=host_images.recipe(image), ready_s=ready,
            host=self.host.descriptor(), raid=json.loads(self.raid.to_json()) if self.raid else None,
            ceph=self.store.metadata() if self.store else None,
            boot_restarts=boot_restarts,
            started=self._how_started([v.name for v in vms], started))
        write_atomic(self.record_path, json.dumps(asdict(record), indent=2))
        step(f"fleet ready: {', '.join(f'{n} {s:.1f}s' for n, s in ready.items())} after apply start" if ready else
             f"disk ready ({plan.device.path}), with no VM: measured on the host only")
        return record

    def _apply(self) -> None:
        """terraform apply; a failed one undone (its defined domains would block the next), except on
        a host that stopped answering, where undoing would wait as long again."""
        try:
            self._terraform("apply", "-auto-approve", "-input=false", "-no-color", *self._state_args())
        except TestbedError as e:
            if lost := self.host_not_answering():
                raise TestbedError(f"{e}\nThe fleet was left as it is: its host does not answer ({lost}). "
                                   "Fix: `harness testbed down` once it answers (a nested host is booted anew "
                                   "by `harness host nested up`)") from None
            if undo := self._undo():
                raise TestbedError(f"{e}{undo}") from None
            raise

    def _started(self, vms: list[VmInfo], views: dict[str, str], t0: float) -> tuple[dict, dict, dict]:
        """The VMs started and their agents answering: how each started, when it was ready, and its
        boot restarts. A restored guest that shows another's identity is booted afresh, once."""
        started = self._start(views)
        ready, boot_restarts = self._wait_agents([v.name for v in vms], t0)

        def restored(among) -> list[VmInfo]:
            return [v for v in vms if v.name in among and v.name in started and started[v.name].how == "restored"]
        if wrong := self._personalize(restored(started)):
            t_again = time.monotonic()
            started.update(self._start_afresh(wrong, started, views))
            again, restarts = self._wait_agents(list(wrong), t_again)
            ready.update(again)
            boot_restarts.update(restarts)
            if still := self._personalize(restored(wrong)):
                raise AgentError("; ".join(still.values()))
        return started, ready, boot_restarts

    def _drop_stale_state(self) -> None:
        """A Terraform state whose pool its host no longer has describes resources that went with
        that host (a nested host rebuilt, a libvirtd reset): refreshing it would fail on every
        volume, so it is set aside (kept as .stale) and what is left with the prefix is removed."""
        state = self.dir / "terraform.tfstate"
        if not state.exists() or not json.loads(state.read_text() or "{}").get("resources"):
            return
        conn = connect(self.host.uri)
        try:
            conn.storagePoolLookupByName(self.cfg.prefix)
            return
        except libvirt.libvirtError:
            pass
        finally:
            conn.close()
        warn(f"the fleet's Terraform state names pool {self.cfg.prefix}, which {self.host.uri} no longer has "
             "(its host was rebuilt or reset): starting from a clean state")
        state.replace(state.with_name("terraform.tfstate.stale"))
        gc.collect(self.cfg.prefix + "-", self.host)

    def _keep_consoles_and_undo(self) -> str:
        """After guests that never answered: their consoles kept where the teardown cannot take them,
        then the fleet undone, so the next `up` starts clean. Says where the consoles are."""
        dest = self.cfg.state_dir / "logs" / f"{self.cfg.prefix}-consoles-{time.strftime('%Y%m%d-%H%M%S')}"
        logs = guest_consoles.keep(self.host, self.host.uri, (self.cfg.prefix + "-",), dest)
        host_stopped = self.host.stopped()
        if undo := self._undo():
            return f"the consoles are kept in {dest}.{undo}"
        if host_stopped:
            return (f"{host_stopped}. The fleet's state was removed; the consoles are kept in {dest}. "
                    "Fix: retry (`harness testbed up` boots a new nested host); if it stops again, read its console")
        guest = next((t for n, t in logs.items() if n.startswith(self.cfg.prefix)), "")
        tail = guest_consoles.last_lines(guest, 15)
        return (f"the fleet was torn down. Its consoles are kept in {dest}" + (f"; the last lines:\n{tail}" if tail else "")
                + "\nFix: retry `harness testbed up`; if it fails again, read those consoles")

    def _why_no_restore(self) -> str | None:
        if not self.cfg.fleet.restore:
            return "fleet.restore is false"
        return self.host.no_restore

    def _start(self, guest_views: dict[str, str]) -> dict[str, vm_start.Started]:
        """Starts the stopped domains: restored where allowed. (Terraform started them when not.)"""
        why_not = self._why_no_restore()
        conn = connect(self.host.uri)
        try:
            image = f"{host_images.recipe(self.image_dir)} {self.cfg.fleet.kernel}"
            started = vm_start.start(self.host, conn, guest_views, image=image,
                                     work_dir=str(self.host_dir), restore=why_not)
        finally:
            conn.close()
        if started:
            restored = sum(st.how == "restored" for st in started.values())
            step(f"started {len(started)} VM(s): {restored} restored from a booted template, "
                 f"{len(started) - restored} booted")
        return started

    def _how_started(self, names: list[str], now: dict[str, vm_start.Started]) -> dict:
        """How each VM was started: by this bring-up; else (running already) as the last record says
        of the same domain; else booted by Terraform."""
        try:
            before = TestbedRecord.from_json(self.record_path.read_text()).started
        except (OSError, ValueError, TypeError):
            before = {}
        conn = connect(self.host.uri)
        try:
            uuids = {n: conn.lookupByName(n).UUIDString() for n in names}
        finally:
            conn.close()
        booted = asdict(vm_start.Started("booted", self._why_no_restore() or "started before this bring-up"))
        return {n: asdict(now[n]) if n in now else
                before[n] if before.get(n, {}).get("uuid") == uuids[n] else {**booted, "uuid": uuids[n]}
                for n in names}

    def _personalize(self, vms: list[VmInfo]) -> dict[str, str]:
        """Each restored guest made its own; the ones whose guest shows the restore to be wrong, with why."""
        if not vms:
            return {}

        def one(i: int) -> str | None:
            try:
                vm_start.personalize(agents[i], vms[i].slice_bytes, vms[i].locator)
            except vm_start.WrongRestore as e:
                return str(e)
            return None
        with guests(self.host.uri, [v.name for v in vms]) as agents:
            said = in_parallel(one, range(len(vms)))
        return {v.name: why for v, why in zip(vms, said) if why}

    def _start_afresh(self, wrong: dict[str, str], started: dict[str, vm_start.Started],
                      guest_views: dict[str, str]) -> dict[str, vm_start.Started]:
        """Restored guests that proved wrong: their template thrown away, each booted anew (the first
        saves a fitting template, which the others restore from), said as it happens."""
        for name, why in wrong.items():
            warn(f"{why}: its template ({started[name].template}) is thrown away and {name} boots anew")
        conn = connect(self.host.uri)
        try:
            for name in wrong:
                vm_start.boot_afresh(self.host, conn, name, started[name].template)
        finally:
            conn.close()
        again = self._start({n: guest_views[n] for n in wrong})
        for name, st in again.items():
            st.reason = st.reason or f"a first restore was wrong ({wrong[name]}): restored from a new template"
        return again

    def _wait_agents(self, names: list[str], t0: float) -> tuple[dict[str, float], dict[str, str]]:
        """Seconds from apply until each guest's agent answered, and the guests restarted on the way.
        A guest still running but silent after AGENT_TIMEOUT_S is restarted once: a KVM guest in a
        nested host under TCG can hang early in its boot, and boots on a second try. Its first
        console is kept, since the restart overwrites it."""
        conn = connect(self.host.uri)
        restarts: dict[str, str] = {}
        try:
            def wait(name: str) -> float:
                dom = conn.lookupByName(name)
                try:
                    GuestAgent(dom).wait_ready(AGENT_TIMEOUT_S)
                except AgentTimeout as e:
                    kept = self.cfg.state_dir / "logs" / f"{name}-boot-hang-{time.strftime('%Y%m%d-%H%M%S')}.log"
                    write_atomic(kept, guest_consoles.text(self.host, dom))
                    warn(f"{e}; restarting it once (its console is kept in {kept})")
                    restarts[name] = f"{e}; restarted (first console kept in {kept})"
                    restart(dom)
                    GuestAgent(dom).wait_ready(AGENT_TIMEOUT_S)
                return time.monotonic() - t0
            with ThreadPoolExecutor(len(names)) as pool, heartbeat(f"the guest agents of {', '.join(names)}"):
                return dict(zip(names, pool.map(wait, names))), restarts
        finally:
            conn.close()

    def _undo(self) -> str:
        """down() after a failed bring-up: "" when it went, else why not, to be said with the
        original error (never instead of it)."""
        try:
            self.down(quiet=True)
            return ""
        except TestbedError as e:
            return f"\nUndoing it failed too: {e}"

    def rebuilt(self) -> TestbedRecord:
        """The fleet destroyed and brought up anew: after a guest of it could not be restarted. A
        nested host that stopped answering goes with the fleet (down() removes it); a new one is
        booted in its place, on the same port, so that this host object (held by the run) reaches it."""
        self.down(quiet=True)
        if nested_l1.removed(self.host):
            nested_l1.up(self.cfg.nested_place, port=self.host.record.ssh_port)
        return self.up()

    def down(self, quiet: bool = False) -> list[str]:
        """terraform destroy, then remove anything left with this fleet's prefix, then the state.
        A nested host that stopped answering is removed instead, and its fleet and arrays with it."""
        removed, destroy_failed = self._destroyed(quiet)
        if removed is None:   # the host is still there: what Terraform left on it, and its arrays
            removed = self._collected(destroy_failed)
        # by the records in its folder, whatever backend the config names now (a local cluster
        # lives on this machine, not in the host)
        removed += resource_leftovers.removed_by_fleet_records(self.dir, self.cfg.state_dir)
        if self.dir.exists():
            shutil.rmtree(self.dir)
        return removed

    def _destroyed(self, quiet: bool) -> tuple[list[str] | None, str]:
        """terraform destroy, where there is state: (what went with a nested host removed because it
        stopped answering, else None; why the destroy failed, or "")."""
        if not ((self.dir / "terraform.tfstate").exists() and (self.dir / "fleet.tfvars.json").exists()):
            return None, ""
        if not quiet:
            step(f"terraform destroy: {self.cfg.prefix}")
        stopped: TestbedError | None = None   # Terraform stopped: its host missed its checks
        destroy_failed = ""
        try:
            done = self._terraform("destroy", "-auto-approve", "-input=false", "-no-color",
                                   *self._state_args(), check=False)
            if done.returncode != 0:
                destroy_failed = f"terraform destroy failed (exit {done.returncode}; log: {self.log})"
        except TestbedError as e:
            stopped = e
        if not (stopped or destroy_failed):
            return None, ""
        removed = nested_l1.removed_after_loss(self.host, self.host_not_answering)   # a hung or dead nested host goes
        if removed is None and stopped:
            raise stopped
        if removed is None:   # what it left is removed directly, then checked
            warn(f"{destroy_failed}; removing what it left directly")
        return removed, destroy_failed

    def _collected(self, destroy_failed: str) -> list[str]:
        """What Terraform left on the host with the fleet's prefix, and its arrays, removed; after a
        failed destroy also the backend's host side by its plan, and a check that nothing remains
        (else the state stays, so that `testbed down` can try again)."""
        # a cluster over the hosts outlives this part: the MultiHostFleet stops it after every part
        keep = self.store.kept_by_parts() if self.store else ()
        removed = gc.collect(self.cfg.prefix + "-", self.host, keep)
        # arrays whose plans are still here (a destroy that failed, a killed run), once their
        # guests are gone: stopped again, directly (one check each for those already gone)
        gone, left = destroy_arrays(sorted(self.dir.glob("raid-*.json")) if self.dir.exists() else [])
        removed += gone
        if destroy_failed:   # Terraform's teardown hook may not have run: the backend's host side by its plan
            undone, stuck = gc.undo_backends(sorted(self.dir.glob("backend-*.json")) if self.dir.exists() else [])
            removed += undone
            left += stuck
            left += gc.leftovers(self.cfg.prefix + "-", self.host, keep)
        if left:
            raise TestbedError(f"testbed down did not finish on {self.host.label}"
                               + (f": {destroy_failed}" if destroy_failed else "")
                               + ", and these remain: " + "; ".join(left)
                               + ". Fix: see the log, then run `harness testbed down` again")
        if destroy_failed:
            removed.append(f"({destroy_failed}; nothing of the fleet remains)")
        return removed

    def ensure(self) -> TestbedRecord:
        """The deployed testbed, re-provisioned first when the config asks for a different one
        (e.g. `--backend nvme` on a virtio-blk fleet)."""
        record = self.load()
        backend, plan = self.preflight()
        choice = self.accel()
        wanted = json.loads(json.dumps(self._tfvars(choice, backend, plan)))  # as written: lists, not tuples
        deployed = json.loads((self.dir / "fleet.tfvars.json").read_text())
        if wanted == deployed:
            return record
        changed = sorted(k for k in {*wanted, *deployed} if wanted.get(k) != deployed.get(k))
        what = (f"backend {record.disk['backend']} -> {backend.name}" if record.disk["backend"] != backend.name
                else ", ".join(changed))
        step(f"the deployed fleet differs from the config ({what}): re-provisioning")
        return self.up()

    @staticmethod
    def deployed_vms(cfg: Config) -> int:
        """How many VMs the fleet deployed under this config's name has, on all its hosts (0 when none)."""
        fleet = cfg.state_dir / cfg.fleet.name
        return sum(len(json.loads(p.read_text())["vms"])
                   for p in [fleet / "testbed.json", *fleet.glob("hosts/*/testbed.json")] if p.exists())

    def load(self) -> TestbedRecord:
        """The deployed testbed, checked to be running; a clear error when it is not."""
        if not self.record_path.exists():
            raise TestbedError(f"no testbed for fleet {self.cfg.fleet.name!r} under {self.cfg.state_dir}. "
                               "Fix: run `make testbed up` (or `harness testbed up` with the same config)")
        record = TestbedRecord.from_json(self.record_path.read_text())
        try:
            conn = connect(record.uri)
        except libvirt.libvirtError as e:
            raise TestbedError(f"libvirt is not reachable ({e.get_error_message()}). Fix: `make testbed up`") from None
        try:
            for vm in record.vms:
                try:
                    if not conn.lookupByName(vm.name).isActive():
                        raise TestbedError(f"{vm.name} is not running. Fix: `make testbed up`")
                except libvirt.libvirtError:
                    raise TestbedError(f"{vm.name} does not exist. Fix: `make testbed up`") from None
        finally:
            conn.close()
        return record
