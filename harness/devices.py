"""Safety checks for host block devices: the harness only uses a device that is plainly free."""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path


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


def size_bytes(dev: Path) -> int:
    """A block device's size (st_size is 0 for block devices)."""
    with open(dev, "rb") as f:
        return f.seek(0, os.SEEK_END)


def refuse_reason(dev: Path, allow_signature: bool = False) -> str | None:
    """Why `dev` must not be used, or None when it is free. Never writes to the device."""
    devs = _with_partitions(dev)
    if reason := _mounted(devs):
        return reason + "; unmount it or choose another device"
    holders = _sysfs(dev) / "holders"
    if holders.exists() and any(holders.iterdir()):
        users = ", ".join(p.name for p in holders.iterdir())
        return f"it is held by {users} (an md array, LVM or dm device); release it first"
    try:  # O_EXCL on a block device fails with EBUSY while anything in the kernel holds it
        os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
    except OSError as e:
        if e.errno == errno.EBUSY:
            return "it is in use (opened exclusively by the kernel or another program)"
        return f"cannot open it: {e.strerror}"
    if not allow_signature:
        out = subprocess.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE", str(dev)],
                             capture_output=True, text=True).stdout.split()
        if out:
            return (f"it carries a {'/'.join(sorted(set(out)))} signature; set fleet.wipe=true only if "
                    "its data may be destroyed")
    return None
