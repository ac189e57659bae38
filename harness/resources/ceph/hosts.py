"""A Ceph cluster over a fleet's hosts (ceph.mode = "hosts"): the mon and the mgr on the first
host, and each host one storage node, its OSDs on devices of that host's allowlist (its [[hosts]]
devices, in order, checked free there just before use), every daemon bound to its host's address
on the network the hosts share. The steps are local mode's
(harness/resources/ceph/bootstrap.py), run over each host's own SSH: what a user's KVM servers take.

create is idempotent and refuses a bad plan before making anything; destroy stops, on each host,
only the daemons whose pid files the plan's dir there holds, erases the BlueStore labels of the
devices its OSDs' records there name (so that the device gate takes them again), and removes that
dir. The hosts' networks, packages and everything else on them are never touched."""
from __future__ import annotations

import time
from functools import partial
from typing import Callable, ContextManager

from harness.common.console import step
from harness.hosts import from_descriptor
from harness.libvirt.agent import in_parallel
from harness.resources.ceph import links
from harness.resources.ceph.bootstrap import PACKAGES, CephError, CephRefusal, build, complete, log_tails, missing_tools, remove
from harness.resources.ceph.plan import CephPlan, refusals
from harness.resources.devices import refuse_reason_on, size_bytes_on

__all__ = ["CephError", "create", "destroy", "node_links"]


def _hosts(plan: CephPlan) -> list:
    return [from_descriptor(d) for d in plan.hosts]


def _address_problem(host, address: str) -> str | None:
    """Why the host cannot serve a node at `address` (none of its interfaces has it), or None."""
    out = host.run(["ip", "-4", "-o", "addr", "show"], timeout=60, check=False).stdout.decode(errors="replace")
    if f" {address}/" not in out:
        return (f"{host.label} has no interface with the address {address}: set its cluster_address in [[hosts]] "
                "to one of its own addresses on the network the hosts share")
    return None


def _mon_port_problem(host, plan: CephPlan) -> str | None:
    """Why the mon cannot listen at its address: another cluster's mon has its ports there."""
    out = host.run(["ss", "-Hltn"], timeout=60, check=False).stdout.decode(errors="replace")
    taken = [port for port in (3300, 6789) for line in out.splitlines()
             if any(f"{a}:{port}" in line.split()[3:4] for a in (plan.mon_address, "0.0.0.0", "*", "[::]"))]
    if taken:
        return (f"{host.label}: port {taken[0]} at {plan.mon_address} is taken (another Ceph cluster's mon, such as "
                "another fleet's on these hosts). Fix: `harness testbed down` the fleet whose cluster it is, then run again")
    return None


def _device_problems(hosts: list, plan: CephPlan) -> list[str]:
    """Why an OSD's device may not be used: off its host's allowlist, in use or holding data (the
    device gate, on that host), or smaller than the plan's OSD size."""
    problems = []
    for i, dev in enumerate(plan.osd_devices):
        host = hosts[plan.osd_node(i) - 1]
        if reason := refuse_reason_on(host, dev, allow_signature=plan.wipe, wipe_field="fleet.wipe",
                                      allow=list(host.drives), allow_field=f"{host.label}'s devices in [[hosts]]"):
            problems.append(f"{host.label}: osd.{i}'s device {dev} refused: {reason}")
            continue
        have = size_bytes_on(host, dev) >> 20
        if have < plan.osd_size_mib:
            problems.append(f"{host.label}: osd.{i}'s device {dev} has {have} MiB, and each OSD needs {plan.osd_size_mib} "
                            "MiB for the fleet's images and BlueStore's own use. Fix: put a larger device at that place "
                            "in its [[hosts]] devices (OSD j takes the j-th), or lower the fleet's disk sizes")
    return problems


def create(plan: CephPlan) -> str:
    hosts = _hosts(plan)
    problems = refusals(plan)
    for k, host in enumerate(hosts, 1):
        if missing := missing_tools(host, ("ip", "ss")):
            problems.append(f"{', '.join(missing)} missing on {host.label}: install {' '.join(PACKAGES)} iproute2 there")
        elif why := _address_problem(host, plan.node_address(k)):
            problems.append(why)
    if problems:
        raise CephRefusal("the Ceph plan is refused, nothing was made:\n" + "\n".join(f"  {p}" for p in problems))
    mon = hosts[0]
    if complete(mon, plan):
        return f"ceph {plan.name}: already up ({plan.osd_count} OSDs on {plan.nodes} hosts)"
    step(f"ceph {plan.name}: mon and mgr on {mon.label}, a storage node on each of "
         f"{', '.join(h.name for h in hosts)}")
    removed = [r for h in hosts for r in remove(h, plan)]   # half made (a killed create), or another plan's
    if removed:
        step(f"ceph {plan.name}: removed what an earlier attempt left: {', '.join(removed)}")
    if problems := [p for p in (_mon_port_problem(mon, plan), *_device_problems(hosts, plan)) if p]:
        raise CephRefusal("the Ceph plan is refused, nothing was made:\n" + "\n".join(f"  {p}" for p in problems))
    t0 = time.monotonic()
    try:
        build(plan, mon, lambda k: (hosts[k - 1], []), hosts)
    except BaseException as e:   # nothing half made is left behind; what the daemons said is kept
        said = "".join(log_tails(h, plan) for h in hosts)
        step(destroy(plan))
        if isinstance(e, CephError):
            raise CephError(f"{e}{said}") from None
        raise
    return f"ceph {plan.name}: {plan.osd_count} OSDs on {plan.nodes} hosts, all PGs active+clean in " \
           f"{time.monotonic() - t0:.0f} s"


def destroy(plan: CephPlan) -> str:
    """Stops the plan's daemons on every host at once (TERM, then KILL) and removes its dir there.
    A host that does not answer is named, and the others are still cleaned."""
    def on(host) -> list[str]:
        try:
            return remove(host, plan)
        except Exception as e:  # noqa: BLE001 - the other hosts are still cleaned
            return [f"(not removed on {host.label}: {e})"]
    removed = [said for saids in in_parallel(on, _hosts(plan)) for said in saids]   # a Ctrl-C stops all
    return f"ceph {plan.name}: removed {', '.join(removed) or 'nothing (already gone)'}"


SAMPLE_EVERY_S = 1.0   # a reading is a command over each host's ssh: a second apart


def _interface(host, address: str) -> str:
    """The host's interface that holds the node's address."""
    out = host.run(["ip", "-4", "-o", "addr", "show"], timeout=60, check=False).stdout.decode(errors="replace")
    for line in out.splitlines():   # "2: eth0    inet 10.214.0.11/24 brd ..."
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == address:
            return fields[1]
    raise CephError(f"{host.label} has no interface with the Ceph address {address} any more")


def _speed_mbit(host, iface: str) -> int:
    """The interface's speed as its driver says it, 0 where it says none (a virtio NIC)."""
    said = host.run(["cat", f"/sys/class/net/{iface}/speed"], timeout=30, check=False).stdout.decode(errors="replace")
    return max(int(said.strip()), 0) if said.strip().lstrip("-").isdigit() else 0


def _counters(host, iface: str) -> dict[str, int] | None:
    stats = f"/sys/class/net/{iface}/statistics"
    done = host.run(["cat", f"{stats}/rx_bytes", f"{stats}/tx_bytes"], timeout=10, check=False)
    values = done.stdout.split()
    if done.returncode != 0 or len(values) != 2 or not all(v.isdigit() for v in values):
        return None   # a reading missed; the point's figures come from the others
    return {"rx_bytes": int(values[0]), "tx_bytes": int(values[1])}


def node_links(plan: CephPlan) -> Callable[[], ContextManager]:
    """What observes the storage nodes' links around a point: node k's host's interface on the
    network the cluster uses (found once, here), its use against its speed where its driver says
    one. A storage node's host is a client too, so its link carries its client traffic as well."""
    ifaces = {k: (host, _interface(host, plan.node_address(k))) for k, host in enumerate(_hosts(plan), 1)}
    return partial(links.observed, {k: partial(_counters, h, i) for k, (h, i) in ifaces.items()},
                   {k: _speed_mbit(h, i) for k, (h, i) in ifaces.items()}, SAMPLE_EVERY_S)
