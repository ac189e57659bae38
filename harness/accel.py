"""KVM or TCG, decided by booting a guest kernel under KVM, not by looking at /dev/kvm.

On some hosts /dev/kvm opens but stock kernels hang under it (or `-cpu host` fails), so the only
honest test is a boot: the probe kernel must reach its root-mount panic within the time limit.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import paths

PROBE_NAME = f"{paths.PREFIX}accel-probe"  # so `harness gc` can find a probe left running
PROBE_TIMEOUT_S = 20
# A kernel that got this far ran its whole early boot under KVM.
BOOTED_MARKERS = ("Kernel panic", "VFS: Unable to mount root", "VFS: Cannot open root device")


@dataclass(frozen=True)
class AccelChoice:
    accel: str          # "kvm" or "tcg"
    domain_type: str    # libvirt <domain type=...>: "kvm" or "qemu"
    reason: str


class AccelError(RuntimeError):
    pass


def probe_kvm(kernel: Path, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Boots `kernel` under KVM with no root disk. (True, detail) if it reached its panic."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is missing or not accessible"
    argv = ["qemu-system-x86_64", "-name", PROBE_NAME, "-accel", "kvm", "-m", "256",  # the CPU model the fleet domains get
            "-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-kernel", str(kernel),
            "-append", "console=ttyS0 panic=-1 root=/dev/vtb-no-root"]
    start = time.monotonic()
    try:
        out = subprocess.run(argv, capture_output=True, timeout=timeout, text=True, errors="replace")
        text = out.stdout + out.stderr
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        booted = any(m in text for m in BOOTED_MARKERS)
        return booted, ("reached root mount" if booted else
                        f"no kernel boot under KVM within {timeout:.0f} s (kernel printed nothing)"
                        if "Linux version" not in text else f"kernel started but did not finish booting in {timeout:.0f} s")
    elapsed = time.monotonic() - start
    if any(m in text for m in BOOTED_MARKERS):
        return True, f"a guest kernel booted under KVM in {elapsed:.1f} s"
    last = text.strip().splitlines()[-1] if text.strip() else f"exit code {out.returncode}"
    return False, f"QEMU with KVM failed: {last[:200]}"


def decide(setting: str, probe: tuple[bool, str] | None) -> AccelChoice:
    """The accelerator for a config setting ('auto'|'kvm'|'tcg') and a probe result."""
    if setting == "tcg":
        return AccelChoice("tcg", "qemu", "TCG requested in the config (fleet.accel=tcg)")
    ok, detail = probe if probe else (False, "not probed")
    if ok:
        return AccelChoice("kvm", "kvm", f"KVM probe passed: {detail}")
    if setting == "kvm":
        raise AccelError(f"fleet.accel=kvm but KVM does not work here: {detail}. "
                         "Fix: set fleet.accel=auto (falls back to TCG) or fix KVM on this host")
    return AccelChoice("tcg", "qemu", f"KVM probe failed, using TCG: {detail}")


def choose(setting: str, kernel: Path, cache_dir: Path) -> AccelChoice:
    """Probes once per (kernel, QEMU, host kernel); the answer is cached under the state dir."""
    if setting == "tcg":
        return decide(setting, None)
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(kernel.read_bytes() + qemu.encode() + os.uname().release.encode()).hexdigest()[:16]
    cache = cache_dir / f"accel-{key}.json"
    if cache.exists():
        probe = tuple(json.loads(cache.read_text())["probe"])
    else:
        probe = probe_kvm(kernel)
        cache_dir.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"probe": probe}))
    return decide(setting, probe)  # type: ignore[arg-type]


def as_dict(choice: AccelChoice) -> dict:
    return asdict(choice)
