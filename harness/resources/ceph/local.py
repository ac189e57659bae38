"""A Ceph cluster made on a host from Debian's packages, with no cephadm and no containers: one
mon and one mgr on a bridge, and N storage nodes, each a network namespace with its OSDs on
BlueStore files under the plan's dir and its own (optionally capped) veth link.

create is idempotent (a cluster that answers is left as it is) and refuses a bad plan before
making anything; destroy removes what the plan names: its daemons by their pid files, its
namespaces, links and bridge, and its dir. Nothing else is touched."""
from __future__ import annotations

import ipaddress
import json
import time
from functools import partial
from pathlib import Path
from typing import ContextManager

from harness.common.console import step
from harness.resources.ceph import links
from harness.resources.ceph.bootstrap import (
    PACKAGES,
    CephError,
    CephRefusal,
    build,
    complete,
    log_tails,
    missing_tools,
    remove,
    run,
)
from harness.resources.ceph.plan import CephPlan, refusals

__all__ = ["CephError", "create", "destroy", "links_observed", "set_link_rate"]


def _subnet_in_use(host, plan: CephPlan) -> str | None:
    """Another interface here with an address in the plan's subnet: the cluster would cut it off."""
    out = host.run(["ip", "-j", "-4", "addr"], check=False, timeout=30).stdout.decode(errors="replace")
    net = ipaddress.ip_network(plan.subnet)
    for link in json.loads(out or "[]"):
        if link.get("ifname") == plan.bridge:
            continue
        for a in link.get("addr_info", []):
            if ipaddress.ip_address(a["local"]) in net:
                return (f"ceph.subnet={plan.subnet}: {link['ifname']} already has {a['local']} in it; choose "
                        "another private subnet")
    return None


def create(host, plan: CephPlan) -> str:
    problems = refusals(plan)
    if missing := missing_tools(host, ("ip", "tc")):
        problems.append(f"{', '.join(missing)} missing on {host.label}: install {' '.join(PACKAGES)} "
                        "(harness doctor --install does; a fleet on this machine installs them on first use)")
    elif clash := _subnet_in_use(host, plan):
        problems.append(clash)
    if problems:
        raise CephRefusal("the Ceph plan is refused, nothing was made:\n" + "\n".join(f"  {p}" for p in problems))
    if complete(host, plan):
        return f"ceph {plan.name}: already up ({plan.osd_count} OSDs on {plan.nodes} nodes)"
    if Path(plan.dir).exists():   # half made (killed during create) or made from another plan: start over
        step(destroy(host, plan))
    t0 = time.monotonic()
    try:
        _network(host, plan)
        build(plan, host, lambda k: (host, ["ip", "netns", "exec", plan.node_name(k)]), [host])
    except BaseException as e:   # nothing half made is left behind; what the daemons said is kept
        said = log_tails(host, plan)
        step(destroy(host, plan))
        if isinstance(e, CephError):
            raise CephError(f"{e}{said}") from None
        raise
    return f"ceph {plan.name}: {plan.osd_count} OSDs on {plan.nodes} nodes, all PGs active+clean in " \
           f"{time.monotonic() - t0:.0f} s"


def _network(host, plan: CephPlan) -> None:
    """The bridge (the mon's address on it), and per node a namespace joined to it by a veth."""
    run(host, ["ip", "link", "add", plan.bridge, "type", "bridge"], "the cluster bridge")
    run(host, ["ip", "link", "set", plan.bridge, "alias", plan.name], "the bridge's alias (gc finds it by it)")
    run(host, ["ip", "addr", "add", f"{plan.mon_address}/{plan.prefix_len}", "dev", plan.bridge], "the bridge address")
    run(host, ["ip", "link", "set", plan.bridge, "up"], "the bridge")
    for k in range(1, plan.nodes + 1):
        ns, veth = plan.node_name(k), plan.veth(k)
        run(host, ["ip", "netns", "add", ns], f"node {k}'s namespace")
        run(host, ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns], f"node {k}'s link")
        run(host, ["ip", "link", "set", veth, "alias", ns], f"node {k}'s link alias (gc finds it by it)")
        run(host, ["ip", "link", "set", veth, "master", plan.bridge, "up"], f"node {k}'s link")
        inside = ["ip", "netns", "exec", ns]
        run(host, [*inside, "ip", "addr", "add", f"{plan.node_address(k)}/{plan.prefix_len}", "dev", "eth0"],
             f"node {k}'s address")
        run(host, [*inside, "ip", "link", "set", "eth0", "up"], f"node {k}'s link")
        run(host, [*inside, "ip", "link", "set", "lo", "up"], f"node {k}'s loopback")
        if plan.link_mbit:   # both ways: writes reach the node through the veth, reads leave through eth0
            tbf = ["tbf", "rate", f"{plan.link_mbit}mbit", "burst", "256kb", "latency", "20ms"]
            run(host, ["tc", "qdisc", "add", "dev", veth, "root", *tbf], f"node {k}'s link cap")
            run(host, [*inside, "tc", "qdisc", "add", "dev", "eth0", "root", *tbf], f"node {k}'s link cap")


def destroy(host, plan: CephPlan) -> str:
    """Stops the plan's daemons (TERM, then KILL), removes its namespaces, links, bridge and dir."""
    removed = remove(host, plan)
    for k in range(1, 6):
        if host.run(["ip", "netns", "del", plan.node_name(k)], check=False, timeout=60).returncode == 0:
            removed.append(f"namespace {plan.node_name(k)}")
        if host.run(["ip", "link", "del", plan.veth(k)], check=False, timeout=60).returncode == 0:
            removed.append(f"link {plan.veth(k)}")
    if host.run(["ip", "link", "del", plan.bridge], check=False, timeout=60).returncode == 0:
        removed.append(f"bridge {plan.bridge}")
    return f"ceph {plan.name}: removed {', '.join(removed) or 'nothing (already gone)'}"


def set_link_rate(host, plan: CephPlan, mbit: int) -> None:
    """Caps every node's link both ways at `mbit` (0 = uncapped), in place: no daemon restarts."""
    for k in range(1, plan.nodes + 1):
        for inside, dev in (([], plan.veth(k)), (["ip", "netns", "exec", plan.node_name(k)], "eth0")):
            host.run([*inside, "tc", "qdisc", "del", "dev", dev, "root"], check=False, timeout=30)
            if mbit:
                run(host, [*inside, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
                            "burst", "256kb", "latency", "20ms"], f"node {k}'s link cap", 30)


def _counters(dev: str) -> dict[str, int]:
    """The link's byte counters, read from this machine's sysfs (the local cluster's links are here;
    a file read, so sampling them costs the measurement nothing like a process per reading)."""
    stats = Path("/sys/class/net", dev, "statistics")
    return {k: int((stats / k).read_text()) for k in ("rx_bytes", "tx_bytes")}


SAMPLE_EVERY_S = 0.25


def links_observed(plan: CephPlan, nodes: int, link_mbit: int) -> ContextManager:
    """Around a point: each of the first `nodes` node links' use (harness/resources/ceph/links.py),
    against its cap (`link_mbit`; 0 = uncapped, no share)."""
    devs = {k: plan.veth(k) for k in range(1, nodes + 1)}
    return links.observed({k: partial(_counters, d) for k, d in devs.items()}, {k: link_mbit for k in devs},
                          SAMPLE_EVERY_S)
