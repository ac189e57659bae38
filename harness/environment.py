"""The environment every sample records: accelerator, host kernel, tool versions, CPU model, git revision."""
from __future__ import annotations

import os
import subprocess

import libvirt

from harness import paths


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=paths.REPO)
        return (out.stdout or out.stderr).strip().splitlines()[0] if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "unknown"


def _cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def libvirt_version(uri: str) -> str:
    try:
        conn = libvirt.open(uri)
        v = conn.getLibVersion()
        conn.close()
        return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"
    except libvirt.libvirtError:
        return "unknown"


def collect(accel: dict, uri: str = paths.LIBVIRT_URI) -> dict:
    rev = _first_line(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = _first_line(["git", "status", "--porcelain", "--untracked-files=no"]) not in ("unknown", "")
    return {
        "accel": accel["accel"],
        "accel_reason": accel["reason"],
        "host_kernel": os.uname().release,
        "qemu_version": _first_line(["qemu-system-x86_64", "--version"]).removeprefix("QEMU emulator version "),
        "libvirt_version": libvirt_version(uri),
        "host_fio_version": _first_line(["fio", "--version"]),
        "cpu_model": _cpu_model(),
        "harness_rev": rev + ("-dirty" if dirty else ""),
    }
