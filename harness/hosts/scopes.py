"""A command and everything it starts, kept in a cgroup of its own (as systemd's scopes do), so
that stopping it reaches all of it: fio's job processes make sessions of their own, which a
signal to the command's process group misses. Needs cgroup v2 (cgroup.kill, Linux 5.14) and
root; without them a command is stopped by its process group alone. A tool in vtb's sandbox
(guest-agents/confine.sh) moves to the sandbox's own cgroup: it dies with its runner (bubblewrap's
--die-with-parent ends its PID namespace), which the scope reaches."""
from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from harness.common.console import warn
from harness.common.pids import start_ticks

PARENT = "vtb"            # every scope sits under <cgroup2 mount>/vtb/<harness pid>-<its start time>-<n>
EMPTY_WAIT_S = 10         # for the kernel to finish the processes cgroup.kill ended
_numbers = itertools.count()


def cgroup2_mount() -> Path | None:
    """Where this machine mounts the cgroup v2 hierarchy (/sys/fs/cgroup, or .../unified on a hybrid one)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    found = [Path(f[1]) for f in (m.split() for m in mounts) if len(f) > 2 and f[2] == "cgroup2"]
    return next((p for p in found if (p / "cgroup.procs").exists()), None)


def _root() -> Path | None:
    if os.geteuid() != 0 or (mount := cgroup2_mount()) is None:
        return None
    root = mount / PARENT
    try:
        root.mkdir(exist_ok=True)
    except OSError:
        return None
    return root


class Scope:
    """One command's cgroup: made by `open`, joined by the command itself before it runs."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def open(cls) -> "Scope | None":
        if (root := _root()) is None:
            return None
        path = root / f"{os.getpid()}-{start_ticks(os.getpid())}-{next(_numbers)}"
        try:
            path.mkdir()
        except OSError:
            return None
        if not (path / "cgroup.kill").exists():   # a kernel before 5.14
            path.rmdir()
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """argv, run from inside the scope: the shell moves itself in, then becomes the command."""
        return ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh", str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def signal(self, sig: int) -> None:
        """sig to every process in the scope (a job's clones too, wherever their session is)."""
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> bool:
        """Every process in the scope killed; whether it emptied within EMPTY_WAIT_S."""
        try:
            (self.path / "cgroup.kill").write_text("1")
        except OSError:
            return not self.pids()
        deadline = time.monotonic() + EMPTY_WAIT_S
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.pids()

    def close(self) -> None:
        """The scope removed. A command that finished may leave what it started on purpose (a
        storage daemon that daemonized): that moves to the harness's own cgroup, as if never scoped."""
        if (home := _home()) is None:
            return
        deadline = time.monotonic() + EMPTY_WAIT_S
        while True:   # a process that forks while being moved leaves its child behind; an exiting one lingers
            for pid in self.pids():
                try:
                    (home / "cgroup.procs").write_text(str(pid))
                except OSError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    warn(f"command scope {self.path} did not empty within {EMPTY_WAIT_S} s (holding "
                         f"{' '.join(map(str, self.pids())) or 'exiting processes'}): `harness gc` removes it")
                    return
                time.sleep(0.02)


def _home() -> Path | None:
    """The cgroup v2 group this process is in."""
    mount = cgroup2_mount()
    try:
        line = next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    return mount / line[3:].lstrip("/") if mount else None


def collect() -> list[str]:
    """Scopes of harness processes that are gone (a SIGKILLed run): what is in them killed, each
    removed; says what it removed."""
    if (root := _root()) is None:
        return []
    removed = []
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        owner, _, rest = path.name.partition("-")
        started = rest.split("-")[0]
        if owner.isdigit() and started.isdigit() and start_ticks(int(owner)) == int(started):
            continue   # its harness still runs (the same process: a pid is reused, its start time not)
        scope = Scope(path)
        scope.kill()
        scope.close()
        removed.append(str(path))
    return removed
