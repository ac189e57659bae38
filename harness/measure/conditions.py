"""The conditions a point is measured under: a quiet host before it (a bounded settle wait) and
the host's CPU use over it (busy, steal, and the CPU time of each participating QEMU and storage
daemon); the fleet VMs that take no part in it are suspended by harness/libvirt/pausing.py. Every
sample records these."""
from __future__ import annotations

from dataclasses import dataclass

from harness.measure import hoststat


@dataclass(frozen=True)
class Load:
    """Host CPU use between two snapshots, in % of all CPUs, and dirty + writeback memory at the end."""
    busy_pct: float
    iowait_pct: float
    steal_pct: float
    dirty_mib: float
    seconds: float

    @classmethod
    def between(cls, a: dict, b: dict) -> "Load":
        return cls(**hoststat.load_between(a, b))


@dataclass(frozen=True)
class Settled:
    wait_s: float
    timed_out: bool
    last: Load              # the last window looked at: quiet, or the state when the bound expired
    exempt_busy_pct: float  # of it, the polling storage daemons' share (not counted against quiet)
    snapshot: dict          # hoststat.snapshot of the `then` patterns as the wait ended


def settle(host, cfg, exempt: list[tuple[str, str]] = (), then: list[tuple[str, str]] = ()) -> Settled:
    """A bounded wait for a quiet host ([settle]; hoststat.wait_quiet, run on the host itself); the
    CPU of `exempt` processes (a storage daemon that polls by design) is not counted as busy. Ends
    with a snapshot of the `then` processes: the start of the point's conditions."""
    got = hoststat.wait_quiet_on(host, cfg.max_wait_s, cfg.busy_pct, cfg.dirty_mib, cfg.window_s, list(exempt),
                                 list(then))
    return Settled(got["wait_s"], got["timed_out"], Load(**got["last"]), got["exempt_busy_pct"], got["snapshot"])


def qemu_pattern(vm: str) -> str:
    """What a guest's QEMU command line carries (libvirt names it with `-name guest=NAME,...`)."""
    return f"guest={vm},"


@dataclass(frozen=True)
class Usage:
    """CPU use over a point: the host's, and per participating process group (label)."""
    load: Load
    cpu_s: dict[str, float]       # label -> CPU seconds (user + system) used during the point

    def metadata(self) -> dict:
        ncpu_s = max(self.load.seconds, 1e-9)
        return {"host_busy_pct": round(self.load.busy_pct, 1), "host_iowait_pct": round(self.load.iowait_pct, 1),
                "host_steal_pct": round(self.load.steal_pct, 1),
                **{f"{label}_cpu_s": round(s, 3) for label, s in sorted(self.cpu_s.items())},
                **{f"{label}_cpu_pct": round(100 * s / ncpu_s, 1) for label, s in sorted(self.cpu_s.items())}}


def usage_between(a: dict, b: dict, labels: list[str]) -> Usage:
    """Processes that exist at both ends count (a process that started or ended within the point
    is not measured here: host fio reports its own CPU use). Every label gets a figure, 0 when
    no process of it ran."""
    cpu_s = dict.fromkeys(labels, 0.0)
    for pid, p in b["procs"].items():
        if pid in a["procs"]:
            cpu_s[p["label"]] = cpu_s.get(p["label"], 0.0) + (p["ticks"] - a["procs"][pid]["ticks"]) / b["clk_tck"]
    return Usage(Load.between(a, b), cpu_s)
