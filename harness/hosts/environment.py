"""A host's environment, as every sample records it: accelerator, kernel, tool versions, CPU model,
the harness's git revision."""
from __future__ import annotations

import subprocess

import libvirt

from harness.common import paths
from harness.hosts import Host, LocalHost
from harness.libvirt.libvirt_conn import connect


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=paths.REPO)
        return (out.stdout or out.stderr).strip().splitlines()[0] if out.returncode == 0 else "unknown"
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "unknown"


def _on_host(host: Host, argv: list[str]) -> str:
    """First line of a command's output on the host, or 'unknown'."""
    try:
        out = host.run(argv, timeout=30, check=False)
        text = (out.stdout or out.stderr).decode(errors="replace").strip()
        return text.splitlines()[0] if out.returncode == 0 and text else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def libvirt_version(uri: str) -> str:
    try:
        conn = connect(uri)
        v = conn.getLibVersion()
        conn.close()
        return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"
    except libvirt.libvirtError:
        return "unknown"


def collect(accel: dict, host: Host = LocalHost()) -> dict:
    """The environment of the testbed host (for a nested host: the L1's kernel and tools, and
    the accelerator the L1 itself runs under)."""
    rev = _first_line(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = _first_line(["git", "status", "--porcelain", "--untracked-files=no"]) not in ("unknown", "")
    return {
        "accel": accel["accel"],
        "accel_reason": accel["reason"],
        "host": host.name,
        "l0_accel": host.l0_accel,
        "host_kernel": _on_host(host, ["uname", "-r"]),
        "host_cmdline": _on_host(host, ["cat", "/proc/cmdline"]),  # e.g. a nested host's kvm_amd.npt=0
        "qemu_version": _on_host(host, ["qemu-system-x86_64", "--version"]).removeprefix("QEMU emulator version "),
        "libvirt_version": libvirt_version(host.uri),
        "host_fio_version": _on_host(host, ["fio", "--version"]),
        "cpu_model": _on_host(host, ["sh", "-c", "sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1"]),
        "host_cpus": _on_host(host, ["nproc"]),
        "harness_rev": rev + ("-dirty" if dirty else ""),
    }
