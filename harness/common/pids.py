"""A pid proved by record. A pid names a process only while that process lives: once it exits, or
after a reboot, the same number may be anyone's. So vtb keeps a pid with the boot it was seen in
(/proc/sys/kernel/random/boot_id) and its process's start time (field 22 of /proc/<pid>/stat), and
acts on it only while both still match: its runs and sessions (results.store, hosts.sessions), the
storage daemons that write pid files of their own (a proof beside each: backends.base), and the
processes gc kills.

Standard library only: `on` runs this very file with python3 on whichever host the process is on
(this machine, a nested or an ssh host), so the rules are the same everywhere."""
from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PROOF_SUFFIX = ".proof"   # beside a pid file: the proof of the process it named when the daemon started


def boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return "unknown"


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks after boot) of a process, or None when there is none."""
    try:
        fields = Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()   # its name may hold ")"
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError, TypeError):
        return None


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks after boot): tells a live process from a reused pid."""
    return None if (s := _stat(pid)) is None else s[1]


def proof(pid: int) -> dict | None:
    """What later proves that `pid` is still this process; None when no process has that pid."""
    start = start_ticks(pid)
    return None if start is None else {"pid": pid, "boot_id": boot_id(), "start": start}


def proven(record: dict) -> bool:
    """The process a proof names still runs and is the one it was taken of (same boot, same start),
    not a zombie (killed, not yet reaped)."""
    s = _stat(record.get("pid"))
    return s is not None and s[0] != "Z" and record.get("boot_id") == boot_id() and s[1] == record.get("start")


def signal_proven(record: dict, sig: int) -> bool:
    """`sig` to the process a proof names, only while it is that process; whether it was sent. The
    pidfd is taken before the check, so the pid cannot pass to another process in between."""
    try:
        fd = os.pidfd_open(int(record["pid"]))
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):   # python3 < 3.9 or a kernel < 5.3: checked, then signalled by pid
        fd = None
    try:
        if not proven(record):
            return False
        if fd is None:
            os.kill(int(record["pid"]), sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def signal_each(records: list[dict], sig: int) -> list[bool]:
    return [signal_proven(r, sig) for r in records]


def proofs(pids: list[int]) -> list[dict | None]:
    return [proof(p) for p in pids]


# --- a daemon's own pid file, and its proof beside it ---------------------------------------
def _proof_file(pidfile: str) -> Path:
    return Path(pidfile + PROOF_SUFFIX)


def _pid_in(pidfile: str) -> int | None:
    try:
        text = Path(pidfile).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() else None


def record(pidfile: str, within_s: float = 10) -> bool:
    """Keeps the proof of the daemon that wrote `pidfile` (called right after it started: one that
    forks writes it a moment after its parent returns, so it is waited for, within the bound).
    False when the file names no running process by then."""
    deadline = time.monotonic() + within_s
    while (pid := _pid_in(pidfile)) is None or (taken := proof(pid)) is None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    tmp = _proof_file(pidfile).with_name(f".{_proof_file(pidfile).name}.{os.getpid()}")
    tmp.write_text(json.dumps(taken))
    tmp.replace(_proof_file(pidfile))
    return True


def recorded(pidfile: str) -> dict | None:
    """The proof beside the pid file while the pid file names its process and that process runs;
    else None (no proof: a daemon vtb did not start, or started before proofs; another boot; a pid
    that is another process's now)."""
    try:
        taken = json.loads(_proof_file(pidfile).read_text())
    except (OSError, ValueError):
        return None
    return taken if isinstance(taken, dict) and taken.get("pid") == _pid_in(pidfile) and proven(taken) else None


def alive(pidfile: str) -> bool:
    return recorded(pidfile) is not None


def stop(pidfile: str, grace_s: float, *also_remove: str) -> None:
    """TERM to the daemon its pid file names while the proof holds, KILL after the grace if it
    still does; then removes the pid file, its proof and `also_remove` (its sockets). Safe to repeat.
    A live process the pid file names with no proof (a daemon of a vtb before proofs) is neither
    signalled nor forgotten: its files stay, for gc's process rule, which knows vtb's daemons by them."""
    taken = recorded(pidfile)
    if taken is None and (pid := _pid_in(pidfile)) and Path(f"/proc/{pid}").exists():
        return
    if taken is not None and signal_proven(taken, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while proven(taken) and time.monotonic() < deadline:
            time.sleep(0.1)
        signal_proven(taken, signal.SIGKILL)
    for path in (pidfile, str(_proof_file(pidfile)), *also_remove):
        Path(path).unlink(missing_ok=True)


def on(host, call: str, *args, timeout: float = 60):
    """A function of this file called on `host` (through host.run: its own /proc), with JSON
    arguments; its JSON result."""
    script = Path(__file__).read_text() + f"\nimport sys\nprint(json.dumps({call}(*json.loads(sys.argv[1]))))\n"
    return json.loads(host.run(["python3", "-c", script, json.dumps(list(args))], timeout=timeout).stdout.decode())


# --- who writes a run or a session record ---------------------------------------------------
def owner() -> dict:
    """Who is writing a run: enough to tell later whether it is still alive."""
    return {**proof(os.getpid()), "host": socket.gethostname()}


def owner_alive(who: dict) -> bool:
    """Whether the process an owner() record names still runs (another machine's: assumed so)."""
    if who.get("host") != socket.gethostname():
        return True
    return proven(who)
