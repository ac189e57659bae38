"""The testbed: guest image + Terraform-provisioned fleet on a host. Brings it up, describes it, tears it down."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import libvirt

from harness import accel, backends, gc, paths
from harness.agent import GuestAgent
from harness.config import Config
from harness.console import step
from harness.hosts import LocalHost
from harness.store import write_atomic

AGENT_TIMEOUT_S = 180


class TestbedError(RuntimeError):
    pass


@dataclass
class VmInfo:
    name: str
    slice_offset: int
    slice_bytes: int
    serial: str
    console_log: str


@dataclass
class TestbedRecord:
    """What `up` deployed; `run` measures against this, not against today's config."""
    prefix: str
    uri: str
    vms: list[VmInfo]
    device_path: str
    device_kind: str            # "file" (created, prefilled) or "block" (user-named)
    accel: dict
    disk: dict                  # backend metadata
    fleet: dict
    image: str
    ready_s: dict = field(default_factory=dict)  # seconds from apply to agent answer, per VM

    @classmethod
    def from_json(cls, text: str) -> "TestbedRecord":
        d = json.loads(text)
        d["vms"] = [VmInfo(**v) for v in d["vms"]]
        return cls(**d)


class Testbed:
    def __init__(self, cfg: Config, host: LocalHost | None = None):
        self.cfg = cfg
        self.host = host or LocalHost()
        self.dir = cfg.state_dir / cfg.fleet.name
        self.record_path = self.dir / "testbed.json"

    # --- Terraform -------------------------------------------------------------------------
    def _terraform(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        tf = paths.TERRAFORM_CACHE / "bin" / "terraform"
        env = {**os.environ, "TF_CLI_CONFIG_FILE": str(paths.TERRAFORM_CACHE / "cli.tfrc"),
               "TF_DATA_DIR": str(self.dir / ".terraform"), "TF_IN_AUTOMATION": "1", "TF_INPUT": "0",
               "CHECKPOINT_DISABLE": "1"}
        proc = subprocess.run([str(tf), f"-chdir={paths.TERRAFORM_DIR}", *args], env=env,
                              capture_output=True, text=True)
        with open(self.dir / "terraform.log", "a") as log:
            log.write(f"$ terraform {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
        if check and proc.returncode != 0:
            err = "\n".join(l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("╵"))
            raise TestbedError(f"terraform {args[0]} failed (log: {self.dir / 'terraform.log'}):\n{err[-1500:]}")
        return proc

    def _state_args(self) -> list[str]:
        return [f"-state={self.dir / 'terraform.tfstate'}", f"-var-file={self.dir / 'fleet.tfvars.json'}"]

    def _tfvars(self, choice: accel.AccelChoice, backend: backends.Backend) -> dict:
        f, img = self.cfg.fleet, paths.IMAGE_DIR
        return {
            "libvirt_uri": self.host.uri, "prefix": self.cfg.prefix, "pool_dir": str(self.dir / "pool"),
            "image": {"rootfs": str(img / "rootfs.qcow2"), "kernel": str(img / "vmlinuz"),
                      "initrd": str(img / "initrd.img")},
            "domain_type": choice.domain_type, "vms": f.vms, "vcpus": f.vcpus, "memory_mib": f.memory_mib,
            "console_dir": str(self.dir / "consoles"),
            "data": {"path": str(f.device or ""), "is_block": f.device is not None,
                     "slice_bytes": f.disk_size_mib * 1024 * 1024, **backend.terraform_data(self.cfg.disk)},
        }

    # --- lifecycle -------------------------------------------------------------------------
    def preflight(self) -> backends.Backend:
        missing = [p for p in (paths.IMAGE_DIR / "rootfs.qcow2", paths.TERRAFORM_CACHE / "cli.tfrc",
                               paths.TERRAFORM_CACHE / "bin" / "terraform") if not p.exists()]
        if missing:
            raise TestbedError(f"missing {', '.join(map(str, missing))}. Fix: run `make testbed up` "
                               "(it builds the guest image and the Terraform provider)")
        try:
            libvirt.open(self.host.uri).close()
        except libvirt.libvirtError as e:
            raise TestbedError(f"libvirt at {self.host.uri} is not reachable ({e.get_error_message()}). "
                               "Fix: run `make testbed up` (it starts libvirtd)") from None
        backend = backends.get(self.cfg.disk.backend)
        if reason := backend.preflight(self.host):
            raise TestbedError(f"backend {backend.name} cannot run here: {reason}")
        if self.cfg.fleet.device is not None and self.cfg.fleet.device.stat().st_size < \
                self.cfg.fleet.vms * self.cfg.fleet.disk_size_mib * 1024 * 1024:
            raise TestbedError(f"fleet.device {self.cfg.fleet.device} is smaller than fleet.vms x "
                               "fleet.disk_size_mib. Fix: lower one of them")
        return backend

    def up(self) -> TestbedRecord:
        backend = self.preflight()
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "consoles").mkdir(exist_ok=True)
        choice = accel.choose(self.cfg.fleet.accel, paths.IMAGE_DIR / "vmlinuz", self.cfg.state_dir)
        step(f"accelerator: [bold]{choice.accel}[/bold] ({choice.reason})")
        write_atomic(self.dir / "fleet.tfvars.json", json.dumps(self._tfvars(choice, backend), indent=2))
        self._terraform("init", "-input=false", "-no-color")
        step(f"terraform apply: {self.cfg.fleet.vms} VM(s) named {self.cfg.prefix}-vm*")
        t0 = time.monotonic()
        try:
            self._terraform("apply", "-auto-approve", "-input=false", "-no-color", *self._state_args())
        except TestbedError:
            # A failed create leaves defined domains that block the next apply: undo it all.
            self.down(quiet=True)
            raise
        out = json.loads(self._terraform("output", "-json", f"-state={self.dir / 'terraform.tfstate'}").stdout)
        vms = [VmInfo(**v) for v in out["vms"]["value"]]
        ready = self._wait_agents([v.name for v in vms], t0)
        record = TestbedRecord(
            prefix=self.cfg.prefix, uri=self.host.uri, vms=vms, device_path=out["device_path"]["value"],
            device_kind="block" if self.cfg.fleet.device else "file", accel=accel.as_dict(choice),
            disk=backend.metadata(self.cfg.disk),
            fleet={"vms": self.cfg.fleet.vms, "vcpus": self.cfg.fleet.vcpus,
                   "memory_mib": self.cfg.fleet.memory_mib, "disk_size_mib": self.cfg.fleet.disk_size_mib},
            image=(paths.IMAGE_DIR / "recipe.sha").read_text().strip(), ready_s=ready)
        write_atomic(self.record_path, json.dumps(asdict(record), indent=2))
        step(f"fleet ready: {', '.join(f'{n} {s:.1f}s' for n, s in ready.items())} after apply start")
        return record

    def _wait_agents(self, names: list[str], t0: float) -> dict[str, float]:
        conn = libvirt.open(self.host.uri)
        try:
            def wait(name: str) -> float:
                GuestAgent(conn.lookupByName(name)).wait_ready(AGENT_TIMEOUT_S)
                return time.monotonic() - t0
            with ThreadPoolExecutor(len(names)) as pool:
                return dict(zip(names, pool.map(wait, names)))
        finally:
            conn.close()

    def down(self, quiet: bool = False) -> list[str]:
        """terraform destroy, then remove anything left with this fleet's prefix, then the state."""
        if (self.dir / "terraform.tfstate").exists() and (self.dir / "fleet.tfvars.json").exists():
            if not quiet:
                step(f"terraform destroy: {self.cfg.prefix}")
            self._terraform("destroy", "-auto-approve", "-input=false", "-no-color", *self._state_args(),
                            check=False)
        removed = gc.collect(self.cfg.prefix + "-", self.host.uri)
        if self.dir.exists():
            shutil.rmtree(self.dir)
        return removed

    def load(self) -> TestbedRecord:
        """The deployed testbed, checked to be running; a clear error when it is not."""
        if not self.record_path.exists():
            raise TestbedError(f"no testbed for fleet {self.cfg.fleet.name!r} under {self.cfg.state_dir}. "
                               "Fix: run `make testbed up` (or `harness testbed up` with the same config)")
        record = TestbedRecord.from_json(self.record_path.read_text())
        try:
            conn = libvirt.open(record.uri)
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
