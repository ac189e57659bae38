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


def harness_rev() -> str:
    """The checkout's git revision, `-dirty` when a tracked file is modified (what samples record)."""
    rev = _first_line(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = _first_line(["git", "status", "--porcelain", "--untracked-files=no"]) not in ("unknown", "")
    return rev + ("-dirty" if dirty else "")


# What collect asks the host, in one command (each a round trip of about a second to a nested or
# ssh host): each probe's exit status and first line of output, one probe per line.
PROBES = {
    "host_kernel": "uname -r",
    "host_cmdline": "cat /proc/cmdline",   # e.g. a nested host's kvm_amd.npt=0
    "qemu_version": "qemu-system-x86_64 --version",
    "host_fio_version": "fio --version",
    "cpu_model": "sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo",
    "host_cpus": "nproc",
}
_PROBE_SCRIPT = "".join(f'o=$({cmd} 2>&1); printf "%s\\t%s\\n" $? "$(printf %s "$o" | head -n 1)"\n'
                        for cmd in PROBES.values())


def probed(stdout: str) -> dict[str, str]:
    """Each probe's first line, or 'unknown' where it failed, printed nothing or is missing."""
    lines = stdout.splitlines()
    out = {}
    for i, key in enumerate(PROBES):
        status, _, text = lines[i].partition("\t") if i < len(lines) else ("", "", "")
        out[key] = text.strip() if status == "0" and text.strip() else "unknown"
    return out


def _probe(host: Host) -> dict[str, str]:
    try:
        out = host.run(["sh", "-c", _PROBE_SCRIPT], timeout=30, check=False)
        return probed(out.stdout.decode(errors="replace"))
    except (OSError, subprocess.TimeoutExpired):
        return probed("")


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
    probes = _probe(host)
    return {
        "accel": accel["accel"],
        "accel_reason": accel["reason"],
        "host": host.name,
        "l0_accel": host.l0_accel,
        **probes,
        "qemu_version": probes["qemu_version"].removeprefix("QEMU emulator version "),
        "libvirt_version": libvirt_version(host.uri),
        "harness_rev": harness_rev(),
    }
