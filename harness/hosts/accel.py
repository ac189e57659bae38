"""KVM or TCG, decided by booting a guest kernel under KVM, not by looking at /dev/kvm.

On some hosts /dev/kvm opens but stock kernels hang under it (or `-cpu host` fails), so the only
honest test is a boot: the probe kernel must reach its root-mount panic within the time limit.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.common import paths
from harness.common.exits import StepFailed
from harness.common.files import write_atomic
from harness.hosts import Host, LocalHost

PROBE_NAME = f"{paths.PREFIX}accel-probe"
# The probe kernel reaches its root-mount panic in about 2 s even under TCG here (checked, 2 cores)
# and in well under 1 s under a working KVM: one that needs five times TCG's time is not one to
# use. A broken KVM hangs (a core spinning) until this bound, on every fresh host boot.
PROBE_TIMEOUT_S = 10
NESTED_PROBE_TIMEOUT_S = 90      # a nested KVM boots about 6x slower than an L0 TCG guest
CACHE_DIR = paths.CACHE / "accel"   # shared by every state dir: the key says which host and boot
BOOT_ID = "/proc/sys/kernel/random/boot_id"   # new at every boot of a host
HOST_KERNEL = "/vmlinuz"         # on a nested host: its own kernel, the same Debian cloud kernel
# A kernel that got this far ran its whole early boot under KVM.
BOOTED_MARKERS = ("Kernel panic", "VFS: Unable to mount root", "VFS: Cannot open root device")


@dataclass(frozen=True)
class AccelChoice:
    accel: str          # "kvm" or "tcg"
    domain_type: str    # libvirt <domain type=...>: "kvm" or "qemu"
    reason: str


class AccelError(StepFailed):
    pass


def probe_kvm(kernel: str, timeout: float = PROBE_TIMEOUT_S, host: Host = LocalHost()) -> tuple[bool, str]:
    """Boots `kernel` (a path on `host`) under KVM with no root disk. (True, detail) if it reached its panic."""
    if host.run(["test", "-r", "/dev/kvm", "-a", "-w", "/dev/kvm"], check=False, timeout=60).returncode != 0:
        return False, "/dev/kvm is missing or not accessible"
    argv = ["qemu-system-x86_64", "-name", PROBE_NAME, "-accel", "kvm", "-m", "256",  # the CPU model the fleet domains get
            # gc's record of a probe left running: unguessable (probes run side by side), where any user may write
            "-pidfile", f"/tmp/{PROBE_NAME}.{uuid.uuid4().hex}.pid",
            "-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio", "-kernel", str(kernel),
            # quiet: each console byte is an exit (in a nested host the full log cost about 10 s)
            "-append", "console=ttyS0 panic=-1 root=/dev/vtb-no-root quiet"]
    start = time.monotonic()
    try:
        out = host.run(argv, timeout=timeout, check=False)
        text = (out.stdout + out.stderr).decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace")
        booted = any(m in text for m in BOOTED_MARKERS)
        last = _last_words(text)
        return booted, ("reached root mount" if booted else
                        f"no kernel boot under KVM within {timeout:.0f} s (the kernel, booted quiet, printed no error)"
                        if not last else f"the kernel did not reach its root-mount panic in {timeout:.0f} s: {last}")
    elapsed = time.monotonic() - start
    if any(m in text for m in BOOTED_MARKERS):
        return True, f"a guest kernel booted under KVM in {elapsed:.1f} s"
    return False, f"QEMU with KVM failed: {_last_words(text) or f'exit code {out.returncode}'}"


def _last_words(text: str) -> str:
    """The last line of the probe's output that says something: its terminal control sequences
    (QEMU's and the firmware's, which a quiet kernel leaves alone on the console) removed."""
    lines = [re.sub(r"\x1b(\[[0-9;?]*[A-Za-z]|.)", "", line).strip() for line in text.splitlines()]
    return next((line[:200] for line in reversed(lines) if re.search(r"[A-Za-z]{2}", line)), "")


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


def choose(setting: str, kernel: Path, host: Host = LocalHost()) -> AccelChoice:
    """The accelerator for guests on `host`. Probes once per (probe kernel, QEMU, host kernel, boot of
    the host), whichever view of the host asks (a nested host, the same L1 driven over ssh, another
    state dir); the answer is cached under CACHE_DIR. The boot is part of the key because KVM can
    break in one boot of a host and work in the next (a nested host's L1 whose KVM locked up is
    booted anew, and must be probed anew); a boot id is random per boot, so it also tells hosts apart.
    `kernel` is the guest kernel here; a nested or ssh host boots its own."""
    if setting == "tcg":
        return decide(setting, None)
    local = host.is_this_machine
    probe_kernel = str(kernel) if local else HOST_KERNEL
    facts = host.run(["sh", "-c", f"qemu-system-x86_64 --version; uname -r; cat {BOOT_ID}; "
                                  f"sha256sum -- {probe_kernel} 2>&1"], check=False, timeout=60).stdout
    key = hashlib.sha256(f"local={local}\n".encode() + facts).hexdigest()[:16]
    cache = CACHE_DIR / f"accel-{key}.json"
    if cache.exists():
        probe = tuple(json.loads(cache.read_text())["probe"])
    else:
        probe = probe_kvm(probe_kernel, PROBE_TIMEOUT_S if local else NESTED_PROBE_TIMEOUT_S, host)
        write_atomic(cache, json.dumps({"probe": probe}))
    return decide(setting, probe)  # type: ignore[arg-type]


def as_dict(choice: AccelChoice) -> dict:
    return asdict(choice)
