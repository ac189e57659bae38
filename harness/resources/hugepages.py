"""Hugepages reserved for a fleet and given back afterwards, as run-perf applies and reverts a
host profile: `apply` records what the host had before it changes anything, `revert` puts it
back from that record (so gc can revert after a SIGKILL), and both are idempotent.

A reservation is 2 MiB pages added to /proc/sys/vm/nr_hugepages, plus a hugetlbfs mount of its
own (its path carries the fleet prefix, so gc's mount sweep finds it). Everything runs through
`host.run`, on whichever host the fleet's host side lives."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from harness.common.exits import StepFailed
from harness.resources.leftovers import Leftover, Scope

PAGE_MIB = 2
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"
RECORD = "hugepages.json"   # the record's name in a fleet's run dir (gc looks for it there)
HEADROOM_MIB = 1024   # memory the host keeps for everything else (QEMU itself, page cache, the harness)


class HugepageError(StepFailed):
    pass


@dataclass(frozen=True)
class HugepagePlan:
    pages: int        # 2 MiB pages this fleet adds
    mount: str        # its own hugetlbfs mount point
    record: str       # where apply writes what the host had before (revert reads it)

    @classmethod
    def for_mib(cls, mib: int, mount: str, record: str) -> "HugepagePlan":
        return cls(math.ceil(mib / PAGE_MIB), mount, record)


def _read(host, path: str) -> str:
    return host.run(["cat", path], timeout=30).stdout.decode().strip()


def meminfo(host) -> dict[str, int]:
    """/proc/meminfo's figures (kB, or pages for the HugePages_ counts)."""
    return {k.strip(): int(v.split()[0]) for k, _, v in (l.partition(":") for l in _read(host, "/proc/meminfo").splitlines())}


def refusal(host, plan: HugepagePlan, what: str) -> str | None:
    """Why the host cannot give this many hugepages, in one sentence naming what to change (None: it can).
    Pages already reserved and free count; the rest must come out of available memory."""
    info = meminfo(host)
    free_pages = info.get("HugePages_Free", 0) if info.get("Hugepagesize", 2048) == PAGE_MIB * 1024 else 0
    need_mib = max(0, plan.pages - free_pages) * PAGE_MIB
    avail_mib = info.get("MemAvailable", 0) // 1024
    if need_mib > avail_mib - HEADROOM_MIB:
        return (f"{what} needs {plan.pages * PAGE_MIB} MiB of 2 MiB hugepages, and {host.label} has "
                f"{avail_mib} MiB available ({HEADROOM_MIB} MiB kept for everything else). "
                "Fix: lower fleet.vms or fleet.memory_mib")
    return None


def libvirt_cannot_use(host) -> str | None:
    """libvirt gives guests hugepages only from a hugetlbfs it saw mounted when libvirtd started
    (systemd mounts /dev/hugepages; scripts/libvirtd.sh does where there is no systemd). A mount
    under a vtb- path is a fleet's own and does not count."""
    mounts = _read(host, "/proc/mounts").splitlines()
    if not any(len(f) > 2 and f[2] == "hugetlbfs" and "vtb-" not in f[1] for f in map(str.split, mounts)):
        return (f"{host.label} has no hugetlbfs mounted, and libvirt gives guests hugepages only from one it saw "
                "when libvirtd started. Fix: run `make testbed up` (it mounts /dev/hugepages and restarts the "
                "libvirtd it started), or mount hugetlbfs on /dev/hugepages and restart libvirtd")
    return None


def _write_record(host, plan: HugepagePlan, record: dict) -> None:
    host.run(["sh", "-c", 'cat > "$1.tmp" && mv "$1.tmp" "$1"', "sh", plan.record], input=json.dumps(record).encode(),
             timeout=30)


def _set_pages(host, n: int) -> int:
    host.run(["sh", "-c", f'echo {int(n)} > {NR_HUGEPAGES}'], timeout=120)
    return int(_read(host, NR_HUGEPAGES))


def applied(host, plan: HugepagePlan) -> bool:
    return host.run(["test", "-e", plan.record], check=False, timeout=30).returncode == 0


def apply(host, plan: HugepagePlan) -> str:
    """Reserves the plan's pages on top of what is reserved, and mounts its hugetlbfs. Refuses (and
    changes nothing) when the kernel cannot reserve them all."""
    if applied(host, plan):
        return f"hugepages: {plan.pages} already reserved ({plan.record})"
    before = int(_read(host, NR_HUGEPAGES))
    host.run(["mkdir", "-p", plan.mount], timeout=30)
    record = {"nr_hugepages_before": before, **asdict(plan)}
    _write_record(host, plan, record)
    got = _set_pages(host, before + plan.pages)
    if got < before + plan.pages:
        revert(host, plan)
        raise HugepageError(f"the kernel reserved {got - before} of {plan.pages} hugepages (memory too fragmented "
                            "or in use). Fix: free memory, or lower fleet.vms or fleet.memory_mib")
    host.run(["mount", "-t", "hugetlbfs", "-o", f"pagesize={PAGE_MIB}M", "nodev", plan.mount], timeout=60)
    return f"hugepages: {plan.pages} x {PAGE_MIB} MiB reserved (nr_hugepages {before} -> {got}), hugetlbfs on {plan.mount}"


def top_up(host, plan: HugepagePlan, free_pages: int) -> str:
    """Reserves more pages until `free_pages` are free (a process that took its share, e.g. DPDK,
    may take more than it was told to), adding them to the record that revert gives back."""
    short = free_pages - meminfo(host).get("HugePages_Free", 0)
    if short <= 0:
        return f"hugepages: {free_pages} free"
    record = json.loads(_read(host, plan.record))
    before = int(_read(host, NR_HUGEPAGES))
    record["pages"] += short   # recorded before raised, as apply does: a kill in between leaks nothing
    _write_record(host, plan, record)
    got = _set_pages(host, before + short) - before
    if got < short:
        record["pages"] -= short - max(got, 0)
        _write_record(host, plan, record)
        raise HugepageError(f"the kernel reserved {got} of the {short} more hugepages needed (memory too fragmented "
                            "or in use). Fix: free memory, or lower fleet.vms or fleet.memory_mib")
    return f"hugepages: {short} more reserved, so that {free_pages} are free"


def revert(host, plan: HugepagePlan) -> str:
    """Unmounts the plan's hugetlbfs and gives its pages back (nr_hugepages less what apply added,
    which is the value before apply unless someone else changed it since). Safe to repeat."""
    if host.run(["mountpoint", "-q", plan.mount], check=False, timeout=30).returncode == 0:
        host.run(["umount", plan.mount], check=False, timeout=60)
    host.run(["rmdir", plan.mount], check=False, timeout=30)
    if not applied(host, plan):
        return "hugepages: nothing to give back"
    record = json.loads(_read(host, plan.record))
    now = int(_read(host, NR_HUGEPAGES))
    target = max(record["nr_hugepages_before"], now - record["pages"])
    got = _set_pages(host, target)
    host.run(["rm", "-f", plan.record], timeout=30)
    return f"hugepages: given back (nr_hugepages {now} -> {got})"


def revert_recorded(host, record_path: str) -> str:
    """Reverts from a record alone (gc after a SIGKILL: no plan file at hand)."""
    plan = json.loads(_read(host, record_path))
    return revert(host, HugepagePlan(plan["pages"], plan["mount"], plan["record"]))


def _reserved_by_dead_fleets(s: Scope) -> list[str]:
    """Given back from the record in each dead fleet's run dir, after its target and hugetlbfs
    mount are gone (gc removes processes and mounts first)."""
    return [revert_recorded(s.host, str(record)) for d in s.state_dirs
            for record in (d.glob(f"*/*-run/{RECORD}") if d.is_dir() else [])
            if record.parent.name.startswith(s.prefix) and not record.parent.name.startswith(s.keep)]


LEFTOVERS = (Leftover("hugepages an SPDK target reserved", _reserved_by_dead_fleets),)
