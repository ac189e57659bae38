"""A snapshot of a host's load: CPU ticks by kind, dirty and writeback memory, and the CPU time of
the processes whose command line matches a pattern (QEMU of named guests, storage daemons).

Standard library only: `snapshot_on` runs this very file with python3 on a remote host (a nested
host), so one reader serves every host. On this machine it is called in-process."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _cpu() -> dict[str, int]:
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    return dict(zip(CPU_FIELDS, map(int, first[1:1 + len(CPU_FIELDS)])))


def _memory_kib() -> dict[str, int]:
    found = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Dirty", "Writeback"):
            found[key.lower()] = int(rest.split()[0])
    return found


def _matching(patterns: list[tuple[str, str]]) -> dict[str, dict]:
    """{pid: {label, exe, ticks}} for processes whose command line contains a pattern's text;
    patterns are (label, text) pairs, and a label may repeat. A process matching several
    patterns counts under the first."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        label = next((lab for lab, text in patterns if text in argv), None)
        if label is None:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        found[proc.name] = {"label": label, "exe": os.path.basename(argv.split(" ", 1)[0]),
                            "ticks": int(fields[11]) + int(fields[12])}  # utime + stime
    return found


def snapshot(patterns: list[tuple[str, str]] = ()) -> dict:
    return {"t": time.monotonic(), "cpu": _cpu(), "ncpu": os.cpu_count() or 1,
            "clk_tck": os.sysconf("SC_CLK_TCK"), **_memory_kib(), "procs": _matching(patterns)}


BUSY = ("user", "nice", "system", "irq", "softirq", "steal")


def load_between(a: dict, b: dict) -> dict:
    """CPU use between two snapshots in % of all CPUs, and dirty + writeback MiB at the end."""
    delta = {k: b["cpu"][k] - a["cpu"][k] for k in b["cpu"]}
    total = sum(delta.values()) or 1
    return {"busy_pct": 100 * sum(delta[k] for k in BUSY) / total, "iowait_pct": 100 * delta["iowait"] / total,
            "steal_pct": 100 * delta["steal"] / total,
            "dirty_mib": (b.get("dirty", 0) + b.get("writeback", 0)) / 1024, "seconds": b["t"] - a["t"]}


def _ticks_of(a: dict, b: dict) -> int:
    """CPU ticks the processes present in both snapshots used between them."""
    return sum(p["ticks"] - a["procs"][pid]["ticks"] for pid, p in b["procs"].items() if pid in a["procs"])


def wait_quiet(max_wait_s: float, busy_pct: float, dirty_mib: float, window_s: float = 1.0,
               exempt: list = (), then: list = ()) -> dict:
    """Waits, at most max_wait_s, for one window_s window with CPU busy + iowait under busy_pct and
    dirty + writeback under dirty_mib; dirty data is flushed first. The CPU of processes matching
    `exempt` ((label, text) patterns: a storage daemon that polls a core by design) is not counted.
    Returns the wait, whether the bound expired, the last window's load (busy as measured, the
    exempt share beside it), and a snapshot of the `then` patterns taken as it ends: the start of
    the point that follows, without another process on a remote host. Runs on the host itself,
    in one process."""
    t0 = time.monotonic()
    before = snapshot(exempt)
    if (before.get("dirty", 0) + before.get("writeback", 0)) / 1024 > dirty_mib:
        os.sync()
        before = snapshot(exempt)
    while True:
        time.sleep(window_s)
        after = snapshot(exempt)
        load = load_between(before, after)
        total_ticks = sum(after["cpu"].values()) - sum(before["cpu"].values()) or 1
        exempt_pct = 100 * _ticks_of(before, after) / total_ticks
        quiet = load["busy_pct"] - exempt_pct + load["iowait_pct"] < busy_pct and load["dirty_mib"] < dirty_mib
        waited = time.monotonic() - t0
        if quiet or waited >= max_wait_s:
            return {"wait_s": round(waited, 2), "timed_out": not quiet, "last": load,
                    "exempt_busy_pct": round(exempt_pct, 1), "snapshot": snapshot(then)}
        before = after


def _on(host, timeout: float, call: str, *args) -> dict:
    """A function of this file called on `host`: in-process here, through python3 elsewhere."""
    if host.is_this_machine:
        return globals()[call](*args)
    script = Path(__file__).read_text() + f"\nimport sys\nprint(json.dumps({call}(*json.loads(sys.argv[1]))))\n"
    return json.loads(host.run(["python3", "-c", script, json.dumps(list(args))], timeout=timeout).stdout.decode())


def snapshot_on(host, patterns: list[tuple[str, str]] = ()) -> dict:
    return _on(host, 60, "snapshot", list(patterns))


def wait_quiet_on(host, max_wait_s: float, busy_pct: float, dirty_mib: float, window_s: float = 1.0,
                  exempt: list = (), then: list = ()) -> dict:
    return _on(host, 60 + max_wait_s, "wait_quiet", max_wait_s, busy_pct, dirty_mib, window_s, list(exempt),
               list(then))
