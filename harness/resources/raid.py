"""Host software RAID: mdadm arrays created and destroyed on the testbed host (this machine or a
nested host) by Terraform's hooks, through `python -m harness.resources raid create|destroy PLAN`.

Safety first: only allowlisted member devices, each checked on the host (not mounted, not held
by another array, not the system disk, no signature unless wipe is set). Destroy stops the array
and zeroes only the superblocks this array wrote. Both are idempotent.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import Field, model_validator

from harness.analysis.raid_model import member_count_problem
from harness.common.bounded import write_bound_s
from harness.common.exits import StepFailed
from harness.common.paths import safe_path
from harness.common.schema import FIX, ChunkKib, Filesystem, RaidLevel, Section
from harness.resources import leftovers
from harness.resources.devices import on_allowlist, refuse_reason_on

# mkfs per filesystem: forced (the array is ours) and without lazy init, whose background
# writes would run during the measurement.
MKFS = {
    "ext4": ["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
    "xfs": ["mkfs.xfs", "-f", "-q"],
    "btrfs": ["mkfs.btrfs", "-f", "-q"],
    "f2fs": ["mkfs.f2fs", "-f", "-q"],
    "nilfs2": ["mkfs.nilfs2", "-f", "-q"],
}

# The smallest filesystem each mkfs makes, where that bites at the harness's sizes (checked:
# mkfs.xfs of xfsprogs 6.1 refuses 299 MiB and takes 300; mkfs.nilfs2 2.2.9 refuses 128, takes 132).
MIN_FS_MIB = {"xfs": 300, "nilfs2": 132}


def mkfs_size_problem(fs: str, size_mib: int, field: str) -> str | None:
    """Why mkfs would refuse `fs` on `size_mib` (a settings error naming `field`), or None."""
    need = MIN_FS_MIB.get(fs, 0)
    return f"{field}={size_mib} is below the {need} MiB mkfs.{fs} needs; raise it to {need}" if size_mib < need else None


class RaidError(StepFailed):
    pass


def _allowed(device: str, allow: list[str]) -> bool:
    """On the allowlist: the same disk where both names resolve here (a by-id entry and its sdX
    name), else the same string (a remote host's names mean nothing here; its testbed checks there)."""
    if device in allow:
        return True
    return Path(device).is_block_device() and on_allowlist(Path(device), allow)


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
        if self.level is not None and self.members and (p := member_count_problem(self.level, len(self.members))):
            raise ValueError(f"raid.members: {p}; list more devices in raid.members or choose another raid.level")
        outside = [m for m in self.members if self.allow and not _allowed(m, self.allow)]
        if outside:
            raise ValueError(f"raid.members: {', '.join(outside)} not in raid.allow; add "
                             f"{'it' if len(outside) == 1 else 'them'} there only if the harness may destroy "
                             "the data")
        return self


@dataclass(frozen=True)
class RaidPlan:
    name: str                      # the array is /dev/md/<name>; carries the fleet prefix for gc
    level: int
    members: list[str]
    chunk_kib: int
    allow: list[str]               # the user's allowlist: nothing else is ever touched
    wipe: bool = False
    wait_resync: bool = True       # resync I/O would run during the measurement
    filesystem: str | None = None
    mount_options: str = ""
    mountpoint: str | None = None
    data_file_bytes: int = 0       # with a filesystem: the fleet's device is a prefilled file on it, behind a loop device
    host: dict = field(default_factory=lambda: {"kind": "local", "uri": "qemu:///system"})

    @property
    def device(self) -> str:
        return f"/dev/md/{self.name}"

    @property
    def data_file(self) -> str:
        return f"{self.mountpoint}/{self.name}-data.raw"

    @property
    def data_device(self) -> str:
        """A stable name for the loop device over the data file (libvirt's provider cannot carry a
        plain file disk outside a pool, and a block device keeps every backend working)."""
        return f"/dev/{self.name}-data"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RaidPlan":
        """The plan, every field checked first (gc reads plans back from disk and acts as root on
        what they name): ValueError naming the first that is not what vtb writes."""
        from harness.hosts import descriptor_problem  # hosts' kinds import much that a plan's users do not need
        plan = cls(**json.loads(text))
        checks = [
            (re.fullmatch(r"vtb-[a-z0-9][a-z0-9-]*", plan.name), f"name {plan.name!r} is not a vtb- name"),
            (all(safe_path(m) for m in [*plan.members, *plan.allow]), "members/allow: an entry is not an absolute path "
                                                                         "without '..'"),
            (all(type(n) is int and n >= 0 for n in (plan.level, plan.chunk_kib, plan.data_file_bytes)),
             "level, chunk_kib or data_file_bytes is not a whole number"),
            (plan.filesystem is None or re.fullmatch(r"[a-z0-9]+", plan.filesystem), "filesystem is not a name"),
            (re.fullmatch(r"(?!-)\S*", plan.mount_options), "mount_options is not one option list"),
            (plan.mountpoint is None or safe_path(plan.mountpoint), "mountpoint is not an absolute path without '..'"),
        ]
        if why := next((said for ok, said in checks if not ok), None) or descriptor_problem(plan.host):
            raise ValueError(why)
        return plan


def refusals(host, plan: RaidPlan) -> list[str]:
    """Every reason the plan must not run, each naming the device (empty = safe)."""
    problems = []
    if p := member_count_problem(plan.level, len(plan.members)):
        problems.append(f"raid.level/raid.members: {p}")
    if len(set(plan.members)) != len(plan.members):
        problems.append("raid.members: a device is listed twice")
    return problems + device_refusals(host, plan.members, plan.allow, plan.wipe)


def device_refusals(host, devices: list[str], allow: list[str], wipe: bool) -> list[str]:
    """Why each device must not be touched: not allowlisted, or unsafe on the host (devices.py)."""
    problems = []
    for dev in devices:
        if reason := refuse_reason_on(host, dev, allow_signature=wipe, wipe_field="raid.wipe", allow=allow,
                                      allow_field="the allowlist (raid.allow)"):
            problems.append(f"{dev}: {reason}")
    return problems


def _md_node(host, plan: RaidPlan) -> str | None:
    """The kernel node (/dev/mdN) of our array when it is assembled, found by its name."""
    script = ("for m in $(awk '/^md/ {print $1}' /proc/mdstat); do "
              "echo \"$m $(mdadm --detail --export /dev/$m | sed -n 's/^MD_NAME=//p')\"; done")
    for line in host.run(["sh", "-c", script], check=False, timeout=60).stdout.decode().splitlines():
        node, _, name = line.partition(" ")
        if name == f"vtb:{plan.name}":
            return f"/dev/{node}"
    return None


def _detail(host, plan: RaidPlan) -> str | None:
    """mdadm --detail of our array, or None when it is not assembled. Also makes sure the stable
    name /dev/md/<name> exists: without udev (a nested host) mdadm does not create it."""
    node = _md_node(host, plan)
    if node is None:
        return None
    _run(host, ["sh", "-c", 'mkdir -p /dev/md && ln -sfn "$1" "$2"', "sh", node, plan.device], f"link {plan.device}")
    return host.run(["mdadm", "--detail", node], timeout=60).stdout.decode()


def _run(host, argv: list[str], what: str, timeout: float = 600) -> None:
    out = host.run(argv, check=False, timeout=timeout)
    if out.returncode != 0:
        raise RaidError(f"{what} failed (exit {out.returncode}): "
                        f"{(out.stderr or out.stdout).decode(errors='replace').strip()[-600:]}")


def create(host, plan: RaidPlan) -> str:
    """Creates (or finds) the array; returns what it did, in one line."""
    if detail := _detail(host, plan):
        if f"raid{plan.level}" in detail and all(m in detail for m in plan.members):
            return f"{plan.device}: already assembled (RAID {plan.level}, {len(plan.members)} members)"
        raise RaidError(f"{plan.device} exists with a different layout. Fix: remove it first (`python -m "
                        "harness.resources raid destroy` with its plan file)")
    if problems := refusals(host, plan):
        raise RaidError("refusing to create the array:\n  " + "\n  ".join(problems))
    if plan.wipe:
        for dev in plan.members:
            _run(host, ["wipefs", "--all", "--quiet", dev], f"wipefs {dev}")
    chunk = [] if plan.level == 1 else [f"--chunk={plan.chunk_kib}K"]
    _run(host, ["mdadm", "--create", plan.device, "--run", "--metadata=1.2", f"--level={plan.level}",
                f"--raid-devices={len(plan.members)}", *chunk, "--homehost=vtb", *plan.members],
         f"mdadm --create {plan.device}")
    if _detail(host, plan) is None:
        raise RaidError(f"mdadm --create {plan.device} succeeded but the array is not assembled")
    if plan.wait_resync:
        host.run(["mdadm", "--wait", plan.device], check=False, timeout=3600)  # exit 1 = nothing to wait for
    if plan.filesystem:
        _run(host, [*MKFS[plan.filesystem], plan.device], f"mkfs {plan.filesystem} on {plan.device}")
        _run(host, ["mkdir", "-p", plan.mountpoint], f"mkdir {plan.mountpoint}")
        opts = ["-o", plan.mount_options] if plan.mount_options else []
        _run(host, ["mount", "-t", plan.filesystem, *opts, plan.device, plan.mountpoint], f"mount {plan.device}")
        if plan.data_file_bytes:  # prefilled: a sparse file is read without I/O
            _run(host, ["dd", "if=/dev/urandom", f"of={plan.data_file}", "bs=1M",
                        f"count={-(-plan.data_file_bytes // (1 << 20))}", "conv=fsync", "status=none"],
                 f"prefill {plan.data_file}", write_bound_s(plan.data_file_bytes))
            script = 'modprobe -q loop; ln -sfn "$(losetup --find --show --direct-io=on "$1")" "$2"'
            _run(host, ["sh", "-c", f"set -e; {script}", "sh", plan.data_file, plan.data_device],
                 f"loop device over {plan.data_file}")
    return f"{plan.device}: created RAID {plan.level} on {len(plan.members)} members, chunk {plan.chunk_kib} KiB"


def destroy(host, plan: RaidPlan) -> str:
    """Unmounts and stops the array, then zeroes the superblocks it wrote (members that carry
    this array's name only). Safe to repeat, and after a crash."""
    done = []
    if plan.data_file_bytes and host.run(["test", "-L", plan.data_device], check=False, timeout=60).returncode == 0:
        _run(host, ["sh", "-c", 'losetup -d "$(readlink -f "$1")" && rm -f "$1"', "sh", plan.data_device],
             f"detach {plan.data_device}")
        done.append("detached the data file")
    if plan.mountpoint and host.run(["mountpoint", "-q", plan.mountpoint], check=False, timeout=60).returncode == 0:
        _run(host, ["umount", plan.mountpoint], f"umount {plan.mountpoint}")
        done.append("unmounted")
    if (node := _md_node(host, plan)) is not None:
        _run(host, ["mdadm", "--stop", node], f"mdadm --stop {node} ({plan.device})")
        done.append("stopped")
    host.run(["rm", "-f", plan.device], check=False, timeout=60)
    zeroed = []
    for dev in plan.members:
        examine = host.run(["mdadm", "--examine", dev], check=False, timeout=60).stdout.decode()
        if f"Name : vtb:{plan.name}" in examine:
            _run(host, ["mdadm", "--zero-superblock", dev], f"mdadm --zero-superblock {dev}")
            zeroed.append(dev)
    if zeroed:
        done.append(f"zeroed the superblock on {' '.join(zeroed)}")
    return f"{plan.device}: {', '.join(done) or 'nothing to do'}"


def md_support(host) -> str | None:
    """None when the host kernel can build md arrays, else why not."""
    out = host.run(["cat", "/proc/mdstat"], check=False, timeout=60)
    if out.returncode != 0:
        return ("this host's kernel has no md (software RAID) support (/proc/mdstat is missing). "
                "Fix: set host.kind=nested to use a nested host (an L1 VM with emulated NVMe drives whose "
                "kernel has md), e.g. --set host.kind=nested, after `harness host nested up`")
    return None


def members_and_allowlist(r: RaidConfig, host) -> tuple[list[str], list[str]]:
    """The member devices and the allowlist: [raid]'s, plus a nested host's own drives (the
    harness created them, so they are always allowed and are the default members)."""
    drives = list(host.drives)
    return (list(r.members) or drives), list(dict.fromkeys([*r.allow, *drives]))


def under_fleet(r: RaidConfig, host, name: str, mountpoint: Path, data_file_bytes: int) -> RaidPlan | None:
    """The array [raid] asks `testbed up` to build under the user's fleet, or None: named `name`,
    with a filesystem mounted at `mountpoint` holding the fleet's data file of `data_file_bytes`."""
    if r.level is None:
        return None
    members, allow = members_and_allowlist(r, host)
    fs = {"filesystem": r.filesystem, "mount_options": r.mount_options, "mountpoint": str(mountpoint),
          "data_file_bytes": data_file_bytes} if r.filesystem else {}
    return RaidPlan(name=name, level=r.level, members=members, chunk_kib=r.chunk_kib, allow=allow,
                    wipe=r.wipe, wait_resync=r.wait_resync, host=host.descriptor(), **fs)


def destroy_arrays(plan_files: list[Path]) -> tuple[list[str], list[str]]:
    """The md arrays these plans describe (each plan is written before its array is made), stopped
    on their hosts, each plan removed once its array is gone: what went, and what could not."""
    def destroyed(host, plan: RaidPlan) -> str | None:
        result = destroy(host, plan)
        return None if "nothing to do" in result else f"array {result}"
    return leftovers.undo_by_plans(plan_files, RaidPlan.from_json, lambda plan: f"array {plan.device}", destroyed)


def _arrays_of_dead_fleets(s: leftovers.Scope) -> list[str]:
    """Arrays a killed run left on a host (this machine, a nested or an ssh host), found by their
    plans, not by their names on the host."""
    plans, notes = leftovers.recorded_plans(s, "raid", "name")
    done, stuck = destroy_arrays(plans)
    return done + stuck + notes


LEFTOVERS = (leftovers.Leftover("md arrays", _arrays_of_dead_fleets, by_record_only=True),)
