"""Safety checks for host block devices: the harness only uses a device that is plainly free.

Standard library only: `refuse_reason_on` runs this very file with python3 on whichever host
holds the device (this machine or a nested host), so there is one set of rules everywhere."""
from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

SHORT_S = 60   # a probe of one device (wipefs, this file run on the device's host)


def _sysfs(dev: Path) -> Path:
    return Path("/sys/class/block") / dev.resolve().name


def _with_partitions(dev: Path) -> list[str]:
    """/dev paths of the device and its partitions."""
    name = dev.resolve().name
    parts = [p.name for p in _sysfs(dev).iterdir() if p.name.startswith(name) and (p / "partition").exists()] \
        if _sysfs(dev).exists() else []
    return [f"/dev/{n}" for n in [name, *parts]]


def _mounted(devs: list[str]) -> str | None:
    real = {os.path.realpath(d) for d in devs}
    for line in Path("/proc/mounts").read_text().splitlines():
        src, target = line.split()[:2]
        if src.startswith("/dev/") and os.path.realpath(src) in real:
            return f"{src} is mounted on {target}"
    for line in Path("/proc/swaps").read_text().splitlines()[1:]:
        if os.path.realpath(line.split()[0]) in real:
            return f"{line.split()[0]} is in use as swap"
    return None


def _whole_disks(name: str) -> set[str]:
    """The whole disks under a block device: its parent if a partition, its members if md/dm."""
    node = (Path("/sys/class/block") / name).resolve()
    if (node / "partition").exists():
        return _whole_disks(node.parent.name)
    slaves = list((node / "slaves").iterdir()) if (node / "slaves").exists() else []
    return set().union(*(_whole_disks(s.name) for s in slaves)) if slaves else {node.name}


def _system_disks() -> dict[str, str]:
    """Whole disk -> the system mount point it backs (/ and /boot)."""
    found: dict[str, str] = {}
    for target in ("/boot/efi", "/boot", "/"):
        if target != "/" and not os.path.ismount(target):
            continue
        names = set()
        st_dev = os.stat(target).st_dev
        sysdev = Path(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}")
        if sysdev.exists():
            names.add(sysdev.resolve().name)
        for line in Path("/proc/mounts").read_text().splitlines():  # btrfs and friends: by mount source
            src, mnt = line.split()[:2]
            if mnt == target and src.startswith("/dev/") and os.path.exists(src):
                names.add(Path(os.path.realpath(src)).name)
        for n in names:
            for disk in _whole_disks(n):
                found.setdefault(disk, target)
    return found


def size_bytes(dev: Path) -> int:
    """A block device's size (st_size is 0 for block devices)."""
    with open(dev, "rb") as f:
        return f.seek(0, os.SEEK_END)


def on_allowlist(dev: Path, allow: list[str]) -> bool:
    """`dev` is one of the allowlist's disks, compared as the devices both name now (their device
    numbers), not as strings: an entry by /dev/disk/by-id (WWN or serial) keeps meaning its disk
    when sdX names move, and a by-id path and its sdX name are the same disk."""
    rdev = os.stat(dev).st_rdev
    return any(os.path.exists(a) and Path(a).is_block_device() and os.stat(a).st_rdev == rdev for a in allow)


def refuse_reason(dev: Path, allow_signature: bool = False, wipe_field: str = "wipe",
                  allow: list[str] | None = None, allow_field: str = "the allowlist") -> str | None:
    """Why `dev` must not be used, or None when it is free (and on `allow`, when given). Never
    writes to the device."""
    if not dev.exists():
        return "it does not exist"
    if not dev.is_block_device():
        return "it is not a block device"
    if allow is not None and not on_allowlist(dev, allow):
        return f"not on {allow_field}; add it there only if the harness may destroy its data"
    system = _system_disks()
    for disk in _whole_disks(dev.resolve().name):
        if disk in system:
            return f"it is (or is on) the host's system disk {disk}, which holds {system[disk]}; never use it"
    devs = _with_partitions(dev)
    if reason := _mounted(devs):
        return reason + "; unmount it or choose another device"
    holders = _sysfs(dev) / "holders"
    if holders.exists() and any(holders.iterdir()):
        users = ", ".join(p.name for p in holders.iterdir())
        return f"it is held by {users} (a member of another md array, or LVM/dm); release it first"
    try:  # O_EXCL on a block device fails with EBUSY while anything in the kernel holds it
        os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
    except OSError as e:
        if e.errno == errno.EBUSY:
            return "it is in use (opened exclusively by the kernel or another program)"
        return f"cannot open it: {e.strerror}"
    if not allow_signature:   # a probe that fails is a refusal: its empty output is not "no signature"
        try:
            probe = subprocess.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE", str(dev)],
                                   capture_output=True, text=True, timeout=SHORT_S)
        except FileNotFoundError:
            return "wipefs is not installed here, so its signatures cannot be checked; install util-linux"
        except subprocess.TimeoutExpired:
            return f"wipefs did not read its signatures within {SHORT_S} s; check the device's health"
        if probe.returncode != 0:
            return (f"wipefs could not read its signatures ({probe.stderr.strip() or f'exit status {probe.returncode}'})"
                    "; a device that cannot be checked is not used")
        if out := probe.stdout.split():
            return (f"it carries a {'/'.join(sorted(set(out)))} signature (partition table or filesystem); "
                    f"set {wipe_field}=true only if its data may be destroyed")
    return None


def size_bytes_on(host, dev: str) -> int:
    """A block device's size on `host` (where the device is), by blockdev."""
    return int(host.run(["blockdev", "--getsize64", dev], timeout=SHORT_S).stdout or 0)


def refuse_reason_on(host, dev: str, allow_signature: bool = False, wipe_field: str = "wipe",
                     allow: list[str] | None = None, allow_field: str = "the allowlist") -> str | None:
    """refuse_reason, evaluated on `host` (where the device is, and where its allowlist's names mean
    something)."""
    call = ("\nimport json, sys\nprint(refuse_reason(Path(sys.argv[1]), sys.argv[2] == '1', sys.argv[3], "
            "json.loads(sys.argv[4]), sys.argv[5]) or '')\n")
    out = host.run(["python3", "-c", Path(__file__).read_text() + call, dev, str(int(allow_signature)), wipe_field,
                    json.dumps(allow), allow_field], timeout=SHORT_S)
    return out.stdout.decode().strip() or None
