"""The conditions a point is measured under: a quiet host before it (a bounded settle wait), the
fleet VMs that take no part in it suspended, and the host's CPU use over it (busy, steal, and the
CPU time of each participating QEMU and storage daemon). Every sample records these."""
from __future__ import annotations

import subprocess
from contextlib import contextmanager
from dataclasses import dataclass

import libvirt

from harness.common import bounded
from harness.libvirt.libvirt_conn import DOMAIN_CALL_S, Unanswered, domain_call
from harness.libvirt.libvirt_xml import owner_of
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


def _listed(conn: libvirt.virConnect, flags: int) -> list[libvirt.virDomain]:
    return bounded.call(lambda: conn.listAllDomains(flags), "the list of domains from libvirtd",
                        DOMAIN_CALL_S["suspend"], "libvirtd is not answering", error=Unanswered)


def _ours(dom: libvirt.virDomain) -> bool:
    """The domain records that vtb defined it (libvirt_xml.owner_metadata): a user's `vtb-` one is left alone."""
    return owner_of(domain_call(dom, "XMLDesc", 0)) is not None


@contextmanager
def suspended(conn: libvirt.virConnect, prefixes: tuple[str, ...], keep: set[str]):
    """Suspends every running domain of vtb's (its owner record) whose name starts with one of
    `prefixes` and is not in `keep`, and resumes them afterwards, whatever happens in between. A
    suspend that does not return within its bound raises bounded.Unanswered naming the guest (the
    others are resumed)."""
    paused = []
    try:
        for dom in _listed(conn, libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING):
            if dom.name().startswith(prefixes) and dom.name() not in keep and _ours(dom):
                domain_call(dom, "suspend")
                paused.append(dom)
        yield [d.name() for d in paused]
    finally:
        for dom in paused:
            try:
                domain_call(dom, "resume")
            except libvirt.libvirtError:   # libvirt_conn.Unanswered too
                pass  # destroyed meanwhile, or stuck: the next point's suspend or `harness gc` finds it


def resume_paused(conn: libvirt.virConnect, prefixes: tuple[str, ...]) -> list[str]:
    """Resumes domains a killed run left suspended (a SIGKILL skips `suspended`'s resume): those of
    the prefixes that record vtb defined them (a user's paused `vtb-` domain stays as it is)."""
    resumed = []
    for dom in _listed(conn, libvirt.VIR_CONNECT_LIST_DOMAINS_PAUSED):
        if dom.name().startswith(prefixes) and _ours(dom):
            domain_call(dom, "resume")
            resumed.append(dom.name())
    return resumed


FLUSH_S = 600   # writing back the dirty pages of a prefill, at the slowest disk vtb expects


def flush(host) -> None:
    """Writes dirty pages back now (after a prefill), so the first point does not pay for it."""
    try:
        with bounded.heartbeat(f"the page cache of {host.label} to be written back (sync)", FLUSH_S):
            host.run(["sync"], timeout=FLUSH_S, check=False)
    except subprocess.TimeoutExpired:
        pass
