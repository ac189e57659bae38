"""One schema for everything a user can set. Errors name the field and say how to fix it."""
from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness import paths

FIX = "fix"  # key in a field's json_schema_extra: how to repair a bad value


def _each(ok, message: str) -> AfterValidator:
    """A list whose every element must pass `ok`; the message names the rule."""
    def check(values: list) -> list:
        if not all(ok(v) for v in values):
            raise ValueError(message)
        return values
    return AfterValidator(check)


def _known_backends(names: list[str]) -> list[str]:
    from harness import backends
    for n in names:
        backends.get(n)  # raises ValueError naming the choices
    return names


BlockSize = Annotated[str, Field(pattern=r"^[1-9][0-9]*[kKmM]?$")]
PositiveInts = Annotated[list[int], _each(lambda n: n >= 1, "every value must be >= 1")]
VmCounts = Annotated[list[int], _each(lambda n: n >= 1, "every VM count must be >= 1")]
BackendNames = Annotated[list[str], AfterValidator(_known_backends)]


class ConfigError(Exception):
    """A bad config: the message names the field and the fix. Raised before anything is provisioned."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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

    @field_validator("device")
    @classmethod
    def _device_exists(cls, v: Path | None) -> Path | None:
        if v is None:
            return v
        if not v.exists():
            raise ValueError(f"{v} does not exist")
        if not stat.S_ISBLK(v.stat().st_mode):
            raise ValueError(f"{v} is not a block device")
        return v

    @model_validator(mode="after")
    def _device_safe(self) -> "FleetConfig":
        if self.device is not None:
            from harness.devices import refuse_reason, size_bytes
            reason = refuse_reason(self.device, allow_signature=self.wipe, wipe_field="fleet.wipe")
            if reason:
                raise ValueError(f"device {self.device} refused: {reason}")
            if size_bytes(self.device) < self.vms * self.disk_size_mib << 20:
                raise ValueError(f"device {self.device} ({size_bytes(self.device) >> 20} MiB) is smaller than "
                                 f"fleet.vms x fleet.disk_size_mib ({self.vms} x {self.disk_size_mib} MiB); "
                                 "lower one of them")
        return self


class DiskConfig(Section):
    backend: str = Field("virtio-blk", description="how the VM's data disk is served; `harness backend list` "
                         "shows them all")
    cache: Literal["none", "writeback", "writethrough", "directsync", "unsafe"] = Field(
        "none", description="QEMU cache mode of the data disk")
    aio: Literal["native", "io_uring", "threads"] = Field("native", description="QEMU aio mode of the data disk")
    iothreads: int = Field(1, ge=0, le=16, description="iothreads serving the data disk (0 = main loop)")
    num_queues: int = Field(1, ge=1, le=64, description="virtqueues (or NVMe I/O queue pairs) of the data disk")
    qsd_per: Literal["vm", "device"] = Field("vm", description="vhost-user-blk-qsd: one qemu-storage-daemon per "
                                             "VM or one per host device")
    pci_address: str | None = Field(None, pattern=r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$",
                                    description="vfio: the NVMe controller to pass through, e.g. 0000:01:00.0")
    spdk_socket: str = Field("/var/tmp/spdk.sock", description="vhost-user-blk-spdk: SPDK's JSON-RPC socket")
    spdk_vhost_dir: str = Field("/var/tmp", description="vhost-user-blk-spdk: the directory SPDK's -S names")

    @model_validator(mode="after")
    def _backend_accepts(self) -> "DiskConfig":
        from harness import backends
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

    def with_backend(self, name: str) -> "DiskConfig":
        """This disk config for another backend, keeping only the options that backend takes."""
        from harness import backends
        keep = backends.get(name).options
        try:
            return DiskConfig.model_validate({"backend": name,
                                              **{k: getattr(self, k) for k in self.model_fields_set & keep}})
        except ValidationError as e:
            raise ConfigError("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())) from None


class FioJobConfig(Section):
    rw: Literal["randread", "randwrite", "read", "write", "randrw", "rw"] = Field(
        "randread", description="fio access pattern")
    bs: BlockSize = Field("4k", description="block size, e.g. 4k or 128k")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth per fio job")
    numjobs: int = Field(1, ge=1, le=256, description="fio jobs per VM (and per host slot)")
    ioengine: Literal["libaio", "io_uring", "psync", "null"] = Field("libaio", description="fio ioengine")
    direct: bool = Field(True, description="O_DIRECT I/O")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    rate_iops: int = Field(0, ge=0, description="fio rate limit in IOPS per job (0 = none)")


class VmScalingConfig(Section):
    vm_counts: Annotated[VmCounts, AfterValidator(lambda v: sorted(set(v)))] = Field(
        [1, 2, 4], min_length=1, description="VM counts to sweep; capped by fleet.vms")
    job: FioJobConfig = FioJobConfig()


class _SweepSection(Section):
    """Shared by the experiments that compare backends against the host on one device."""
    backends: BackendNames = Field([], description="backends to compare; empty = disk.backend")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    ioengine: Literal["libaio", "io_uring", "psync"] = Field("libaio", description="fio ioengine")

    def job(self, **fields) -> FioJobConfig:
        return FioJobConfig(**{"runtime_s": self.runtime_s, "ramp_s": self.ramp_s, "ioengine": self.ioengine, **fields})


class LatencyConfig(_SweepSection):
    patterns: list[Literal["randread", "randwrite", "read", "write"]] = Field(
        ["randread", "randwrite", "read", "write"], min_length=1, description="access patterns at QD1")
    bs: BlockSize = Field("4k", description="block size")


class IopsConfig(_SweepSection):
    rw: Literal["randread", "randwrite", "randrw"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="block size")
    numjobs: PositiveInts = Field([1, 4], min_length=1, description="fio jobs per point (swept)")
    iodepth: PositiveInts = Field([16, 64], min_length=1, description="queue depth per job (swept)")


class BandwidthConfig(_SweepSection):
    patterns: list[Literal["read", "write"]] = Field(["read", "write"], min_length=1,
                                                     description="sequential patterns")
    bs: BlockSize = Field("128k", description="block size")
    numjobs: int = Field(4, ge=1, le=256, description="fio jobs")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth per job")


class LatencyCurveConfig(_SweepSection):
    rw: Literal["randread", "randwrite"] = Field("randread", description="access pattern")
    bs: BlockSize = Field("4k", description="block size")
    iodepth: int = Field(16, ge=1, le=4096, description="queue depth (enough to saturate)")
    fractions: Annotated[list[float], _each(lambda f: 0 < f <= 1, "fractions must be in (0, 1]"),
                         AfterValidator(sorted)] = Field(
        [0.1, 0.25, 0.5, 0.75, 0.9, 1.0], min_length=2,
        description="rate_iops steps as fractions of the unthrottled IOPS")
    threshold_pct: float = Field(20, gt=0, description="mark where mean latency has grown this many % over "
                                                       "its value at the lowest rate")


class BreakdownConfig(_SweepSection):
    rw: Literal["randread", "randwrite"] = Field("randread", description="access pattern (QD1)")
    bs: BlockSize = Field("4k", description="block size")


class BackendsConfig(Section):
    backends: BackendNames = Field([], description="backends for `harness run backends`; empty = every one")


class MysqlConfig(Section):
    """Sweeps one axis at a time around the base point (the first value of each list)."""
    tests: list[Literal["oltp_read_only", "oltp_write_only", "oltp_read_write"]] = Field(
        ["oltp_read_only", "oltp_read_write"], min_length=1, description="sysbench OLTP tests")
    threads: Annotated[list[int], _each(lambda t: 1 <= t <= 64, "client threads must be between 1 and 64")] = Field(
        [16], min_length=1, description="sysbench client threads (1-64)")
    page_sizes: list[Literal["4k", "8k", "16k", "32k", "64k"]] = Field(["16k"], min_length=1,
                                                                        description="innodb_page_size values")
    buffer_pool_fractions: Annotated[list[float], _each(
        lambda f: 0.03 <= f <= 0.5, "buffer pool fractions must be between 0.03 and 0.5 of the data size")] = Field(
        [0.1], min_length=1, description="InnoDB buffer pool as a fraction of the data (0.03-0.5)")
    compression: list[Literal[0, 4, 8]] = Field([0], min_length=1,
                                                description="ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE (0 = none)")
    vm_counts: VmCounts = Field([1], min_length=1, description="VMs sharing the device (aggregate TPS)")
    tables: int = Field(4, ge=1, le=1024, description="sysbench tables")
    table_size: int = Field(10000, ge=100, description="rows per table")
    runtime_s: int = Field(30, ge=1, le=86400, description="sysbench run seconds per point")
    filesystem: Literal["ext4", "xfs"] = Field("ext4", description="filesystem made on the data disk")


class RepeatConfig(Section):
    """Repeats run in rounds over all the points, in a seeded shuffled order (see harness/pipeline.py)."""
    count: int = Field(3, ge=1, le=1000, description="repeats of every point (the minimum when adaptive)")
    adaptive: bool = Field(False, description="repeat until the 95% CI half-width is within target_rel_ci "
                                              "of the mean, or max_count")
    target_rel_ci: float = Field(0.05, gt=0, le=1, description="adaptive target: CI half-width / mean")
    max_count: int = Field(10, ge=1, le=1000, description="adaptive cap on repeats")
    drop_caches: bool = Field(False, description="drop the page cache (host and guests) before every repeat")
    seed: int | None = Field(None, ge=0, description="seed of the shuffled order of each round (unset = a new "
                                                     "one per run; every sample records the seed used)")
    noisy_cv: float = Field(0.10, gt=0, description="flag a point noisy when the CV of its repeats is above this")
    noisy_busy_pct: float = Field(25, gt=0, le=100, description="flag a point noisy when work other than its own "
                                                                "used more than this % of the host's CPU during it")

    @model_validator(mode="after")
    def _cap(self) -> "RepeatConfig":
        if self.adaptive and self.max_count < max(self.count, 2):
            raise ValueError(f"repeat.max_count={self.max_count} must be at least repeat.count and 2 "
                             "when adaptive; raise repeat.max_count")
        return self


class SettleConfig(Section):
    """The quiet host each point waits for (bounded): see harness/conditions.py."""
    max_wait_s: float = Field(60, ge=0, le=3600, description="longest wait for the host to settle before a point; "
                                                             "a point that starts unsettled is flagged")
    busy_pct: float = Field(15, gt=0, le=100, description="settled: host CPU busy + iowait under this % of all "
                                                         "CPUs over one second")
    dirty_mib: float = Field(64, gt=0, description="settled: dirty + writeback memory under this many MiB")
    window_s: float = Field(1.0, ge=0.1, le=60, description="the window the host must be quiet over")


class HostConfig(Section):
    kind: Literal["local", "nested"] = Field(
        "local", description="where arrays, the physical baseline and the fleet run: this machine, or a nested "
                             "host (an L1 VM with emulated NVMe drives, for machines without md; `harness host "
                             "nested up` boots it)")


class NestedConfig(Section):
    drives: int = Field(4, ge=1, le=8, description="emulated drives of the nested host")
    drive_mib: int = Field(256, ge=64, description="size of each drive in MiB (files prefilled with random data)")
    drive_model: Literal["nvme", "virtio-blk"] = Field("nvme", description="how the drives are emulated")
    memory_mib: int = Field(3072, ge=1024, description="memory of the nested host (its L2 fleet lives in it)")
    vcpus: int = Field(2, ge=1, le=64, description="vCPUs of the nested host")


RaidLevel = Literal[0, 1, 5, 6, 10]
def _power_of_two(kib: int) -> int:
    if kib & (kib - 1):
        raise ValueError("a chunk size must be a power of two KiB")
    return kib


ChunkKib = Annotated[int, Field(ge=4, le=65536), AfterValidator(_power_of_two)]
Filesystem = Literal["ext4", "xfs", "btrfs", "f2fs", "nilfs2"]


class RaidConfig(Section):
    """The host array under the fleet (`testbed up`), and the member devices the RAID experiments use."""
    level: RaidLevel | None = Field(None, description="RAID level of the array `testbed up` builds under the "
                                                      "fleet (unset = no array)")
    members: list[str] = Field([], description="member devices, on the host (empty on a nested host = its drives)")
    allow: list[str] = Field([], description="the allowlist: the only devices the harness may touch (a nested "
                                             "host's own drives are always allowed)",
                             json_schema_extra={FIX: "list every member device here, e.g. raid.allow=[\"/dev/nvme1n1\"]"})
    wipe: bool = Field(False, description="allow members that carry a partition table or filesystem signature "
                                          "(they are wiped)")
    chunk_kib: ChunkKib = Field(512, description="chunk (stripe unit) in KiB, a power of two")
    filesystem: Filesystem | None = Field(None, description="make this filesystem on the array and mount it")
    mount_options: str = Field("", description="mount options for raid.filesystem")
    wait_resync: bool = Field(True, description="wait for the initial resync before measuring")

    @model_validator(mode="after")
    def _fits(self) -> "RaidConfig":
        from harness.analysis.raid_model import member_count_problem
        if self.level is not None and self.members and (p := member_count_problem(self.level, len(self.members))):
            raise ValueError(f"raid.members: {p}; list more devices in raid.members or choose another raid.level")
        outside = [m for m in self.members if self.allow and m not in self.allow]
        if outside:
            raise ValueError(f"raid.members: {', '.join(outside)} not in raid.allow; add "
                             f"{'it' if len(outside) == 1 else 'them'} there only if the harness may destroy "
                             "the data")
        return self


class _RaidSweepSection(Section):
    """Shared by the RAID experiments: the fio points run on each array, on the host and in a VM."""
    patterns: list[Literal["read", "write", "randread", "randwrite"]] = Field(
        ["read", "write", "randread", "randwrite"], min_length=1, description="fio access patterns")
    direct: list[bool] = Field([True, False], min_length=1, description="direct (O_DIRECT) and/or buffered I/O")
    bs: BlockSize = Field("128k", description="block size (the studies use 512k)")
    numjobs: int = Field(4, ge=1, le=256, description="fio jobs (the studies use 64)")
    iodepth: int = Field(1, ge=1, le=4096, description="queue depth per job")
    runtime_s: int = Field(10, ge=1, le=86400, description="measured seconds per point")
    ramp_s: int = Field(2, ge=0, le=3600, description="unmeasured warm-up seconds per point")
    size_mib: int = Field(128, ge=16, description="the region fio works on (host and VM alike); must fit "
                                                  "the smallest array")
    ve: bool = Field(True, description="also measure inside a VM whose disk is the array (PE and VE side by side)")


class RaidLevelsConfig(_RaidSweepSection):
    levels: list[RaidLevel] = Field([0, 1, 5, 10], min_length=1, description="RAID levels to sweep")
    member_counts: PositiveInts = Field([4], min_length=1, description="member counts to sweep")

    @model_validator(mode="after")
    def _some_setup_valid(self) -> "RaidLevelsConfig":
        """Rejected before anything boots when no level x member count can be built."""
        from harness.analysis.raid_model import member_count_problem
        problems = [member_count_problem(lv, n) for lv in self.levels for n in self.member_counts]
        if all(problems):
            raise ValueError(f"no RAID level in levels={self.levels} can be built with member_counts="
                             f"{self.member_counts} ({problems[0]}); add a member count that fits a level, "
                             "or a level that fits a count")
        return self


class StripeSizeConfig(_RaidSweepSection):
    levels: list[RaidLevel] = Field([0, 5], min_length=1, description="RAID levels to sweep")
    members: int = Field(4, ge=2, le=64, description="member devices per array")
    chunks_kib: list[ChunkKib] = Field([64, 128, 256, 512, 1024], min_length=1, description="chunk sizes to sweep")

    @model_validator(mode="after")
    def _some_level_valid(self) -> "StripeSizeConfig":
        from harness.analysis.raid_model import member_count_problem
        problems = [member_count_problem(lv, self.members) for lv in self.levels]
        if all(problems):
            raise ValueError(f"no RAID level in levels={self.levels} can be built with members={self.members} "
                             f"({problems[0]}); raise members or choose another level")
        return self


class FilesystemsConfig(_RaidSweepSection):
    filesystems: list[Filesystem] = Field(["ext4", "xfs", "btrfs", "f2fs", "nilfs2"], min_length=1,
                                          description="filesystems to compare")
    level: RaidLevel = Field(0, description="RAID level of the array (compared with a single device)")
    members: int = Field(4, ge=2, le=64, description="member devices of the array")


class Config(Section):
    state_dir: Path = Field(paths.DEFAULT_STATE_DIR, description="where the testbed keeps its state and disks")
    results_dir: Path = Field(paths.DEFAULT_RESULTS_DIR, description="where runs are written")
    host: HostConfig = HostConfig()
    nested: NestedConfig = NestedConfig()
    raid: RaidConfig = RaidConfig()
    raid_levels: RaidLevelsConfig = RaidLevelsConfig()
    stripe_size: StripeSizeConfig = StripeSizeConfig()
    filesystems: FilesystemsConfig = FilesystemsConfig()
    fleet: FleetConfig = FleetConfig()
    disk: DiskConfig = DiskConfig()
    vm_scaling: VmScalingConfig = VmScalingConfig()
    latency: LatencyConfig = LatencyConfig()
    iops: IopsConfig = IopsConfig()
    bandwidth: BandwidthConfig = BandwidthConfig()
    latency_curve: LatencyCurveConfig = LatencyCurveConfig()
    breakdown: BreakdownConfig = BreakdownConfig()
    backends: BackendsConfig = BackendsConfig()
    mysql: MysqlConfig = MysqlConfig()
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

    @property
    def prefix(self) -> str:
        return f"{paths.PREFIX}{self.fleet.name}"


def _field_info(loc: tuple) -> Any:
    """The pydantic FieldInfo at a dotted location, for its description and fix hint."""
    model: Any = Config
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            break
        info = fields[part]
        model = info.annotation
    return info


def describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if isinstance(p, str))
        field = ".".join(loc) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            lines.append(f"{field}: unknown key. Fix: remove it or check its spelling (see README, Configuration)")
            continue
        info = _field_info(loc)
        fix = ""
        if info is not None:
            extra = info.json_schema_extra or {}
            fix = extra.get(FIX) or f"set {field} ({info.description})" if info.description else ""
        got = f" (got {e['input']!r})" if not isinstance(e.get("input"), dict) else ""
        head = "" if msg.startswith(f"{field}.") else f"{field}: "  # the message already names a sub-field
        lines.append(f"{head}{msg}{got}." + (f" Fix: {fix}." if fix else ""))
    return "invalid configuration:\n  " + "\n  ".join(lines)


def parse_override(item: str) -> tuple[list[str], Any]:
    """'a.b=value' -> (['a','b'], value). Values are JSON where they parse (numbers, lists, booleans)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set fleet.vms=2")
    key, raw = item.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip().split("."), value


def merge(data: dict, keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        node = data.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {'.'.join(keys)}: {k} is not a section")
        data = node
    data[keys[-1]] = value


def load(path: Path | None = None, overrides: list[str] = ()) -> Config:
    """Config file (TOML; default ./harness.toml if present) plus KEY=VALUE overrides."""
    data: dict = {}
    if path is None and Path("harness.toml").exists():
        path = Path("harness.toml")
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist. Fix: pass an existing file to --config") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    for item in overrides:
        merge(data, *parse_override(item))
    if "VTB_STATE_DIR" in os.environ:
        data.setdefault("state_dir", os.environ["VTB_STATE_DIR"])
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(describe(e)) from None
