"""The core settings: the fleet, its disk, the host, the array, repeats and settling. Each
experiment's settings live in its own module, each backend's own [disk] fields in its module;
harness/engine/settings.py assembles them with these into the whole config and loads it."""
from __future__ import annotations

import ipaddress
import stat
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, create_model, field_validator, model_validator

from harness import backends
from harness.common import paths
from harness.common.schema import FIX, ConfigError, FolderPath, Section, StatePath
from harness.hosts import Placement
from harness.resources.ceph.plan import CephConfig, CephFleet, hosts_mode_problem
from harness.resources.nested_l1 import NestedConfig, NestedPlace
from harness.resources.raid import RaidConfig

__all__ = ["Config", "ConfigError", "DiskConfig", "FleetConfig", "RaidConfig", "RemoteHostConfig", "RepeatConfig",
           "SettleConfig"]


def checked_here(info: ValidationInfo) -> bool:
    """Whether fleet.device is a disk of this machine, to check as the config loads: not when the
    fleet lands on a nested or [[hosts]] host (the testbed checks it there, before use)."""
    return (info.context or {}).get("fleet_here", True)


def validation_context(data: dict) -> dict:
    """What the config's validators need to know of the raw config (see checked_here)."""
    host = data.get("host")
    kind = host.get("kind", "local") if isinstance(host, dict) else "local"   # a malformed one: its own error
    return {"fleet_here": not data.get("hosts") and kind == "local"}


class FleetConfig(Section):
    name: str = Field("default", pattern=r"^[a-z0-9][a-z0-9-]{0,19}$",
                      description="fleet name; resources are named vtb-<name>-*",
                      json_schema_extra={FIX: "use 1-20 lowercase letters, digits or dashes"})
    vms: int = Field(2, ge=1, le=64, description="number of VMs in the fleet")
    vcpus: int = Field(1, ge=1, le=64, description="vCPUs per VM")
    memory_mib: int = Field(512, ge=256, description="memory per VM in MiB")
    disk_size_mib: int = Field(256, ge=16, description="each VM's data disk (its slice of the host device) in MiB")
    device: Path | None = Field(None, description="a host block device to carve the data disks from; "
                                "unset = a prefilled file under state_dir",
                                json_schema_extra={FIX: "name an existing, unmounted, unused block device, or unset it"})
    wipe: bool = Field(False, description="allow using a device that carries a partition table or filesystem signature")
    accel: Literal["auto", "kvm", "tcg"] = Field("auto", description="accelerator; auto probes KVM by booting a guest")
    kernel: Literal["cloud", "generic"] = Field("cloud", description="the guest kernel: Debian's cloud kernel boots "
                                                "fastest; the generic one has f2fs and nilfs2 (it is in the full image)")
    image: Literal["fio", "full"] = Field("fio", description="the guest image: `fio`, the main job's (the cloud kernel, "
                                          "fio and the guest agent); `full`, also every other workload's tools and the "
                                          "generic kernel (built on its first use, about a minute). An experiment whose "
                                          "guests need it asks for it; a host that holds it already (a nested host) runs it")
    restore: bool = Field(True, description="start VMs from a booted guest saved once per VM shape (a libvirt save "
                          "image, cached) instead of booting each; a VM whose restore is refused boots, with the reason")

    @field_validator("device")
    @classmethod
    def _device_exists(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        if v is None or not checked_here(info):
            return v
        if not v.exists():
            raise ValueError(f"{v} does not exist")
        if not stat.S_ISBLK(v.stat().st_mode):
            raise ValueError(f"{v} is not a block device")
        return v

    @model_validator(mode="after")
    def _device_safe(self, info: ValidationInfo) -> "FleetConfig":
        if self.device is not None and checked_here(info):
            from harness.resources.devices import refuse_reason, size_bytes
            reason = refuse_reason(self.device, allow_signature=self.wipe, wipe_field="fleet.wipe")
            if reason:
                raise ValueError(f"device {self.device} refused: {reason}")
            if size_bytes(self.device) < self.vms * self.disk_size_mib << 20:
                raise ValueError(f"device {self.device} ({size_bytes(self.device) >> 20} MiB) is smaller than "
                                 f"fleet.vms x fleet.disk_size_mib ({self.vms} x {self.disk_size_mib} MiB); "
                                 "lower one of them")
        return self


class SharedDiskConfig(Section):
    """The [disk] fields several backends share; each backend adds its own (backend.Options)."""
    backend: str = Field("virtio-blk", description="how the VM's data disk is served; `harness backend list` "
                         "shows them all")
    cache: Literal["none", "writeback", "writethrough", "directsync", "unsafe"] = Field(
        "none", description="QEMU cache mode of the data disk")
    aio: Literal["native", "io_uring", "threads"] = Field("native", description="QEMU aio mode of the data disk")
    iothreads: int = Field(1, ge=0, le=16, description="iothreads serving the data disk (0 = main loop)")
    num_queues: int = Field(1, ge=1, le=64, description="virtqueues (or NVMe I/O queue pairs) of the data disk")

    @model_validator(mode="after")
    def _backend_accepts(self) -> "SharedDiskConfig":
        try:
            backend = backends.get(self.backend)
        except ValueError as e:
            raise ValueError(f"disk.backend: {e}") from None
        unsupported = sorted(self.model_fields_set - backend.options - {"backend"})
        if unsupported:
            raise ValueError(f"{', '.join('disk.' + f for f in unsupported)}: not supported by {backend.name} "
                             f"(it takes {', '.join(sorted(backend.options)) or 'no options'}); remove "
                             f"{'it' if len(unsupported) == 1 else 'them'} or choose another disk.backend")
        if {"cache", "aio"} <= backend.options and self.aio == "native" and self.cache not in ("none", "directsync"):
            raise ValueError(f"aio=native needs cache=none or directsync (got cache={self.cache}); "
                             "set disk.cache=none or disk.aio=io_uring")
        if reason := backend.check(self):
            raise ValueError(reason)
        return self

    def with_backend(self, name: str) -> "SharedDiskConfig":
        """This disk config for another backend, keeping only the options that backend takes."""
        keep = backends.get(name).options
        try:
            return type(self).model_validate({"backend": name,
                                              **{k: getattr(self, k) for k in self.model_fields_set & keep}})
        except ValidationError as e:
            raise ConfigError("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())) from None


# The [disk] section: the shared fields and every backend's own.
DiskConfig = create_model("DiskConfig", __base__=SharedDiskConfig, __module__=__name__, **backends.option_fields())


class RepeatConfig(Section):
    """Repeats run in rounds over all the points, in a seeded shuffled order (see harness/measure/pipeline.py)."""
    count: int = Field(3, ge=1, le=1000, description="repeats of every point (the minimum when adaptive)")
    adaptive: bool = Field(False, description="repeat until the 95% CI half-width is within target_rel_ci "
                                              "of the mean, or max_count")
    target_rel_ci: float = Field(0.05, gt=0, le=1, description="adaptive target: CI half-width / mean")
    max_count: int = Field(10, ge=1, le=1000, description="adaptive cap on repeats (also with precision)")
    precision: float | None = Field(None, gt=0, le=1, description="add shuffled rounds (up to max_count) to the "
                                    "points whose VE/PE ratio's 95% CI is wider than ± this, relative (0.1 = ±10%); "
                                    "it stops on the interval's width, never on p (`--precision 10%`)")
    budget_s: float | None = Field(None, gt=0, description="with precision: no round is added once the run has "
                                   "taken this many seconds (`--budget 30m`)")
    drop_caches: bool = Field(False, description="drop the page cache (host and guests) before every repeat")
    seed: int | None = Field(None, ge=0, description="seed of the shuffled order of each round (unset = a new "
                                                     "one per run; every sample records the seed used)")
    noisy_cv: float = Field(0.10, gt=0, description="flag a point noisy when the CV of its repeats is above this")
    noisy_busy_pct: float = Field(25, gt=0, le=100, description="flag a point noisy when work other than its own "
                                                                "used more than this % of the host's CPU during it")

    @model_validator(mode="after")
    def _cap(self) -> "RepeatConfig":
        if (self.adaptive or self.precision) and self.max_count < max(self.count, 2):
            raise ValueError(f"repeat.max_count={self.max_count} must be at least repeat.count and 2 "
                             "when adaptive or with a precision; raise repeat.max_count")
        if self.budget_s is not None and self.precision is None:   # it would bound nothing
            raise ValueError("repeat.budget_s bounds the rounds repeat.precision adds, and no precision is set: set "
                             "repeat.precision too (--precision 10% --budget 30m), or leave the budget out")
        return self


class SettleConfig(Section):
    """The quiet host each point waits for (bounded): see harness/measure/conditions.py."""
    # short: what a point's conditions were is recorded, and a disturbed point flagged, rather than
    # waited out (waits of 36-45 s before single points cost the main job a quarter of its time)
    max_wait_s: float = Field(15, ge=0, le=3600, description="longest wait for the host to settle before a point; "
                                                             "a point that starts unsettled is flagged")
    busy_pct: float = Field(15, gt=0, le=100, description="settled: host CPU busy + iowait under this % of all "
                                                         "CPUs over the window")
    dirty_mib: float = Field(64, gt=0, description="settled: dirty + writeback memory under this many MiB")
    window_s: float = Field(0.5, ge=0.1, le=60, description="the window the host must be quiet over")


class HostConfig(Section):
    kind: Literal["local", "nested"] = Field(
        "local", description="where arrays, the physical baseline and the fleet run: this machine, or a nested "
                             "host (an L1 VM with emulated NVMe drives, for machines without md; `harness host "
                             "nested up` boots it)")


class RemoteHostConfig(Section):
    """One of the machines a fleet spans ([[hosts]]), driven over SSH (see README, "Your own KVM servers")."""
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,15}$", description="its name in samples, tables and state",
                      json_schema_extra={FIX: "use 1-16 lowercase letters, digits or dashes"})
    kind: Literal["ssh"] = Field("ssh", description="how it is reached: ssh (OpenSSH in BatchMode, key authentication; "
                                                     "libvirt over qemu+ssh)")
    ssh: str = Field(pattern=r"^([a-z_][a-z0-9_.-]*@)?[A-Za-z0-9.:-]+$", description="user@address (user: root "
                     "unless given); it must accept the key without a password",
                     json_schema_extra={FIX: "write it as user@address, e.g. root@10.0.0.5"})
    port: int = Field(22, ge=1, le=65535, description="its sshd port")
    identity: Path | None = Field(None, description="private key file here (unset = ssh's defaults)",
                                  json_schema_extra={FIX: "name an existing private key file, or unset it"})
    known_hosts: Path | None = Field(None, description="a known_hosts file with its host key (unset = "
                                                       "~/.ssh/known_hosts); the key is checked, never accepted blindly",
                                     json_schema_extra={FIX: "name an existing known_hosts file, or unset it"})
    state_dir: StatePath = Field(Path("/var/tmp/vtb"), description="where fleets keep their pools and consoles on it",
                                 json_schema_extra={FIX: "choose another folder, e.g. /var/tmp/vtb"})
    devices: list[str] = Field(min_length=1, description="block devices on it the harness may use (its allowlist); "
                               "the fleet's data disks are carved from the first",
                               json_schema_extra={FIX: "list at least one device, e.g. devices=[\"/dev/nvme1n1\"]"})
    vms: int | None = Field(None, ge=0, le=64, description="VMs placed on it (unset = a round-robin share)")
    cluster_address: str = Field("", description="its address on the network the hosts share (ceph.mode = \"hosts\" "
                                 "binds its daemons there; empty = its ssh address)",
                                 json_schema_extra={FIX: "give an IPv4 address of the host, e.g. 10.0.1.5"})

    @field_validator("cluster_address")
    @classmethod
    def _address(cls, v: str) -> str:
        if v:
            ipaddress.IPv4Address(v)
        return v

    @field_validator("identity", "known_hosts")
    @classmethod
    def _file_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not v.is_file():
            raise ValueError(f"{v} does not exist")
        return v


class Config(Section):
    state_dir: StatePath = Field(paths.DEFAULT_STATE_DIR, description="where the testbed keeps its state and disks",
                                 json_schema_extra={FIX: f"choose another folder, e.g. {paths.DEFAULT_STATE_DIR}"})
    results_dir: FolderPath = Field(paths.DEFAULT_RESULTS_DIR, description="where runs are written")
    host: HostConfig = HostConfig()
    hosts: list[RemoteHostConfig] = Field([], description="remote hosts the fleet spans ([[hosts]] tables); "
                                          "empty = the one host of [host]")
    nested: NestedConfig = NestedConfig()
    raid: RaidConfig = RaidConfig()
    ceph: CephConfig = CephConfig()
    fleet: FleetConfig = FleetConfig()
    disk: DiskConfig = DiskConfig()
    repeat: RepeatConfig = RepeatConfig()
    settle: SettleConfig = SettleConfig()

    @model_validator(mode="after")
    def _fleet_fits_host(self) -> "Config":
        need = self.fleet.vms * self.fleet.memory_mib
        avail = paths.mem_available_mib()
        if need > avail * 0.8:
            raise ValueError(f"fleet.vms={self.fleet.vms} x fleet.memory_mib={self.fleet.memory_mib} needs "
                             f"{need} MiB but the host has {avail} MiB available; lower fleet.vms or fleet.memory_mib")
        return self

    @model_validator(mode="after")
    def _hosts_fit(self) -> "Config":
        names = [h.name for h in self.hosts]
        if dup := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"hosts: the name {', '.join(dup)} is used twice; give every [[hosts]] its own name")
        if self.hosts and "kind" in self.host.model_fields_set and self.host.kind != "local":
            raise ValueError(f"host.kind={self.host.kind} and [[hosts]] both name where the fleet runs; "
                             "remove one of them")
        if self.hosts:
            from harness.hosts.placement import PlacementError, place
            try:
                place(self.fleet.vms, [(h.name, h.vms) for h in self.hosts])
            except PlacementError as e:
                raise ValueError(f"hosts: {e}") from None
        if why := hosts_mode_problem(self.ceph, self.hosts):
            raise ValueError(why)
        return self

    @property
    def prefix(self) -> str:
        return f"{paths.PREFIX}{self.fleet.name}"

    @property
    def placement(self) -> Placement:
        """The hosts' settings: where the fleet is."""
        return Placement(self.host.kind, tuple(self.hosts), self.state_dir)

    @property
    def nested_place(self) -> NestedPlace:
        """The nested hosts' settings: [nested], where they live, the accelerator asked for."""
        return NestedPlace(self.nested, self.state_dir, self.fleet.accel)

    @property
    def ceph_fleet(self) -> CephFleet:
        """A Ceph cluster's settings under the fleet: [ceph], and what it needs of the fleet."""
        f = self.fleet
        return CephFleet(self.ceph, self.prefix, f.name, f.vms, f.disk_size_mib, f.wipe, tuple(self.hosts),
                         self.state_dir)
