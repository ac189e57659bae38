"""A run's scratch devices on this machine: a loop device over a prefilled file (in a state dir,
or in /dev/shm for RAM), and the kernel's brd RAM disk. Each is named or recorded so that
`harness gc` removes it after the run was killed (LEFTOVERS)."""
from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.common import bounded
from harness.common.console import warn
from harness.common.exits import StepFailed
from harness.common.files import write_atomic
from harness.resources.leftovers import Leftover, Scope

SCRATCH_SUFFIX = ".scratch.raw"    # a file made for one run (a loop's backing file)
BRD_RECORD_SUFFIX = ".brd-loaded"  # written before the brd module is loaded (only when it was not loaded)
RAM = Path("/dev/shm")


@contextmanager
def loop_over_scratch_file(folder: Path, name: str, size: int) -> Iterator[str]:
    """A file of random data (a zeroed one is read without I/O) behind a direct-I/O loop device;
    both removed afterwards. The name is predictable (in /dev/shm, a folder anyone can write), so
    the file is made anew, exclusively and without following a link, before dd writes into it."""
    path = folder / f"{name}{SCRATCH_SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and (not path.is_file() or path.stat().st_uid != os.geteuid())):
        raise StepFailed(f"{path} exists and is not a file vtb left (a link, or another user's): not written. "
                         "Fix: remove it, or find who made it")
    path.unlink(missing_ok=True)   # a killed run's own file
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=1M", f"count={size >> 20}", "conv=fsync,notrunc",
                    "status=none"], check=True, timeout=bounded.write_bound_s(size))
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(path)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.strip()
    try:
        yield dev
    finally:
        # gc in the fleet's teardown may have done it
        subprocess.run(["losetup", "-d", dev], capture_output=True, check=False, timeout=60)
        path.unlink(missing_ok=True)


@contextmanager
def ram_disk(state_dir: Path, name: str, size: int) -> Iterator[str | None]:
    """/dev/ram0 of `size` bytes, the brd module loaded for it and unloaded after; None (said, with
    the fix) when brd is loaded already (its disks may be someone else's) or this kernel lacks it."""
    if Path("/sys/module/brd").exists():
        warn("device brd skipped: the brd module is loaded already, and its disks may be someone "
             "else's. Fix: unload it (rmmod brd), or profile tmpfs")
        yield None
        return
    record = state_dir / f"{name}{BRD_RECORD_SUFFIX}"   # before: gc unloads it after a kill
    write_atomic(record, "brd\n")
    loaded = subprocess.run(["modprobe", "brd", "rd_nr=1", f"rd_size={size >> 10}"], capture_output=True,
                            text=True, check=False, timeout=60) if shutil.which("modprobe") else None
    if loaded is None or loaded.returncode != 0:
        record.unlink(missing_ok=True)
        why = loaded.stderr.strip() if loaded is not None else "no modprobe here"
        warn(f"device brd skipped: this kernel has no brd RAM disk ({why}). Fix: profile tmpfs, which is RAM too")
        yield None
        return
    try:
        yield "/dev/ram0"
    finally:
        if subprocess.run(["rmmod", "brd"], check=False, timeout=60).returncode == 0:
            record.unlink(missing_ok=True)


def _scratch_files(s: Scope) -> list[str]:
    """Scratch files left in the state dirs and in RAM, after their loops are gone."""
    removed = []
    for d in [*s.state_dirs, RAM]:
        for f in d.glob(f"{s.prefix}*{SCRATCH_SUFFIX}") if d.is_dir() else []:
            if not f.name.startswith(s.keep) and f.lstat().st_uid == 0:   # /dev/shm is anyone's to name files in
                f.unlink(missing_ok=True)
                removed.append(f"scratch file {f}")
    return removed


def _brd(s: Scope) -> list[str]:
    """The brd module a killed run loaded, unloaded by its record (a brd vtb did not load has none)."""
    removed = []
    for d in () if s.elsewhere else s.state_dirs:   # a brd is only ever this machine's
        for record in d.glob(f"{s.prefix}*{BRD_RECORD_SUFFIX}") if d.is_dir() else []:
            if record.name.startswith(s.keep):
                continue
            if Path("/sys/module/brd").exists():
                if subprocess.run(["rmmod", "brd"], capture_output=True, timeout=60).returncode != 0:
                    removed.append(f"(brd, loaded by {record.name}, is in use: left loaded)")
                    continue
                removed.append("module brd")
            record.unlink(missing_ok=True)
    return removed


LEFTOVERS = (Leftover("scratch files", _scratch_files),
             Leftover("the brd module", _brd, by_record_only=True))
