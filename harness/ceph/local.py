"""A Ceph cluster made on a host from Debian's packages, with no cephadm and no containers: one
mon and one mgr on a bridge, and N storage nodes, each a network namespace with its OSDs on
BlueStore files under the plan's dir and its own (optionally capped) veth link.

create is idempotent (a cluster that answers is left as it is) and refuses a bad plan before
making anything; destroy removes what the plan names: its daemons by their pid files, its
namespaces, links and bridge, and its dir. Nothing else is touched."""
from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

from harness.ceph.plan import (CephPlan, conf, counters_at, crush_commands, daemon_keys, link_utilisation, pool_commands,
                               refusals)
from harness.console import step

PACKAGES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-common")
HEALTHY_WITHIN_S = 300
STOP_GRACE_S = 20


class CephError(RuntimeError):
    pass


def _run(host, argv: list[str], what: str, timeout: float = 120, env: dict | None = None) -> str:
    try:
        out = host.run(argv, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CephError(f"{what}: `{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    if out.returncode != 0:
        raise CephError(f"{what}: `{' '.join(argv)}` exited {out.returncode}: "
                        f"{out.stderr.decode(errors='replace').strip()[-400:]}")
    return out.stdout.decode(errors="replace")


def _ceph(host, plan: CephPlan, args: list[str], what: str, timeout: float = 60) -> str:
    return _run(host, ["ceph", "-c", f"{plan.dir}/ceph.conf", "--connect-timeout", "20", *args], what, timeout)


def missing_tools(host) -> list[str]:
    tools = ("ceph", "ceph-mon", "ceph-mgr", "ceph-osd", "ceph-authtool", "monmaptool", "ip", "tc")
    out = host.run(["sh", "-c", "for t in \"$@\"; do command -v $t >/dev/null || echo $t; done", "-", *tools],
                   check=False)
    return out.stdout.decode().split()


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


def complete(host, plan: CephPlan) -> bool:
    """The plan's cluster is there, whole and ready: every OSD up and in, every PG active+clean."""
    if not Path(plan.dir, "plan.json").exists() or Path(plan.dir, "plan.json").read_text() != plan.to_json():
        return False
    try:
        st = status(host, plan)
    except (CephError, json.JSONDecodeError):
        return False
    osds = st.get("osdmap", {})
    return unhealthy(st) is None and osds.get("num_up_osds") == osds.get("num_in_osds") == plan.osd_count


def create(host, plan: CephPlan) -> str:
    problems = refusals(plan)
    if missing := missing_tools(host):
        problems.append(f"{', '.join(missing)} missing on {host.label}: install {' '.join(PACKAGES)} "
                        "(scripts/host-packages.sh does)")
    elif clash := _subnet_in_use(host, plan):
        problems.append(clash)
    if problems:
        raise CephError("the Ceph plan is refused, nothing was made:\n" + "\n".join(f"  {p}" for p in problems))
    if complete(host, plan):
        return f"ceph {plan.name}: already up ({plan.osd_count} OSDs on {plan.nodes} nodes)"
    if Path(plan.dir).exists():   # half made (killed during create) or made from another plan: start over
        step(destroy(host, plan))
    t0 = time.monotonic()
    try:
        _make(host, plan)
    except BaseException as e:   # nothing half made is left behind; what the daemons said is kept
        said = _log_tails(plan)
        step(destroy(host, plan))
        if isinstance(e, CephError):
            raise CephError(f"{e}{said}") from None
        raise
    return f"ceph {plan.name}: {plan.osd_count} OSDs on {plan.nodes} nodes, all PGs active+clean in " \
           f"{time.monotonic() - t0:.0f} s"


def _make(host, plan: CephPlan) -> None:
    d = Path(plan.dir)
    for sub in ("run", "log", "mon", "mgr", "osd"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    fsid = str(uuid.uuid4())
    (d / "ceph.conf").write_text(conf(plan, fsid))
    _network(host, plan)
    _monitor(host, plan, fsid)
    for i in range(plan.osd_count):
        _osd(host, plan, i)
    for n in range(1, plan.nodes + 1):
        for args in crush_commands(plan, n) + pool_commands(plan, n):
            _ceph(host, plan, args, f"pool for {n} node(s)")
    wait_healthy(host, plan)
    (d / "plan.json").write_text(plan.to_json())   # last: its presence says the cluster was made whole


def _log_tails(plan: CephPlan, lines: int = 5) -> str:
    tails = []
    for log in sorted(Path(plan.dir, "log").glob("*.log")):
        try:
            text = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        tails.append(f"--- {log.name}\n" + "\n".join(text))
    return ("\n" + "\n".join(tails))[-2000:] if tails else ""


def _network(host, plan: CephPlan) -> None:
    """The bridge (the mon's address on it), and per node a namespace joined to it by a veth."""
    _run(host, ["ip", "link", "add", plan.bridge, "type", "bridge"], "the cluster bridge")
    _run(host, ["ip", "link", "set", plan.bridge, "alias", plan.name], "the bridge's alias (gc finds it by it)")
    _run(host, ["ip", "addr", "add", f"{plan.mon_address}/{plan.prefix_len}", "dev", plan.bridge], "the bridge address")
    _run(host, ["ip", "link", "set", plan.bridge, "up"], "the bridge")
    for k in range(1, plan.nodes + 1):
        ns, veth = plan.node_name(k), plan.veth(k)
        _run(host, ["ip", "netns", "add", ns], f"node {k}'s namespace")
        _run(host, ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns], f"node {k}'s link")
        _run(host, ["ip", "link", "set", veth, "alias", ns], f"node {k}'s link alias (gc finds it by it)")
        _run(host, ["ip", "link", "set", veth, "master", plan.bridge, "up"], f"node {k}'s link")
        inside = ["ip", "netns", "exec", ns]
        _run(host, [*inside, "ip", "addr", "add", f"{plan.node_address(k)}/{plan.prefix_len}", "dev", "eth0"],
             f"node {k}'s address")
        _run(host, [*inside, "ip", "link", "set", "eth0", "up"], f"node {k}'s link")
        _run(host, [*inside, "ip", "link", "set", "lo", "up"], f"node {k}'s loopback")
        if plan.link_mbit:   # both ways: writes reach the node through the veth, reads leave through eth0
            tbf = ["tbf", "rate", f"{plan.link_mbit}mbit", "burst", "256kb", "latency", "20ms"]
            _run(host, ["tc", "qdisc", "add", "dev", veth, "root", *tbf], f"node {k}'s link cap")
            _run(host, [*inside, "tc", "qdisc", "add", "dev", "eth0", "root", *tbf], f"node {k}'s link cap")


def _monitor(host, plan: CephPlan, fsid: str) -> None:
    d, cfg = plan.dir, f"{plan.dir}/ceph.conf"
    keyring = f"{d}/keyring"
    _run(host, ["ceph-authtool", "--create-keyring", keyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"],
         "the mon keyring")
    for entity, caps in daemon_keys(plan):
        cap_args = [a for service, cap in zip(caps[::2], caps[1::2]) for a in ("--cap", service, cap)]
        _run(host, ["ceph-authtool", keyring, "--gen-key", "-n", entity, *cap_args], f"the {entity} key")
    _run(host, ["monmaptool", "--create", "--fsid", fsid, "--addv", "a",
                f"[v2:{plan.mon_address}:3300,v1:{plan.mon_address}:6789]", f"{d}/monmap"], "the monmap")
    _run(host, ["ceph-mon", "-c", cfg, "--mkfs", "-i", "a", "--monmap", f"{d}/monmap", "--keyring", keyring], "mon mkfs")
    _run(host, ["ceph-mon", "-c", cfg, "-i", "a"], "starting the mon")
    Path(d, "mgr", "ceph-x").mkdir(parents=True, exist_ok=True)
    _run(host, ["ceph-mgr", "-c", cfg, "-i", "x"], "starting the mgr")
    step(f"  ceph {plan.name}: mon and mgr up on {plan.mon_address}")


def _osd(host, plan: CephPlan, i: int) -> None:
    k, cfg = plan.osd_node(i), f"{plan.dir}/ceph.conf"
    osd_uuid = str(uuid.uuid4())
    got = _ceph(host, plan, ["osd", "new", osd_uuid, str(i)], f"osd.{i}").strip()
    if got != str(i):
        raise CephError(f"osd.{i}: the mon gave id {got}: the cluster has OSDs vtb did not make")
    Path(plan.dir, "osd", f"ceph-{i}").mkdir(parents=True, exist_ok=True)
    inside = ["ip", "netns", "exec", plan.node_name(k)]
    _run(host, [*inside, "ceph-osd", "-c", cfg, "-i", str(i), "--mkfs", "--osd-uuid", osd_uuid], f"osd.{i} mkfs", 300)
    _run(host, [*inside, "ceph-osd", "-c", cfg, "-i", str(i)], f"starting osd.{i}", 120)
    step(f"  ceph {plan.name}: osd.{i} up on node {k} ({plan.node_address(k)})")


def status(host, plan: CephPlan) -> dict:
    return json.loads(_ceph(host, plan, ["status", "-f", "json"], "ceph status"))


def unhealthy(st: dict) -> str | None:
    """Why the cluster is not ready for a measurement, or None: health, and every PG active+clean
    (HEALTH_OK can come before the PGs are)."""
    health = st.get("health", {}).get("status")
    pgmap = st.get("pgmap", {})
    total = pgmap.get("num_pgs", 0)
    clean = sum(s["count"] for s in pgmap.get("pgs_by_state", []) if s["state_name"] == "active+clean")
    if health != "HEALTH_OK":
        return f"health {health}: {', '.join(st.get('health', {}).get('checks', {})) or 'no checks listed'}"
    if clean < total:
        return f"{clean} of {total} PGs active+clean"
    return None


def wait_healthy(host, plan: CephPlan, within_s: float = HEALTHY_WITHIN_S) -> None:
    deadline, why = time.monotonic() + within_s, "no status yet"
    while time.monotonic() < deadline:
        try:
            why = unhealthy(status(host, plan))
        except (CephError, json.JSONDecodeError) as e:
            why = str(e)
        if why is None:
            return
        time.sleep(2)
    raise CephError(f"ceph {plan.name} not ready within {within_s:.0f} s: {why} (logs: {plan.dir}/log)")


def _pids(plan: CephPlan) -> dict[str, int]:
    found = {}
    for f in Path(plan.dir, "run").glob("*.pid"):
        try:
            found[f.stem] = int(f.read_text().strip())
        except (OSError, ValueError):
            continue
    return found


def destroy(host, plan: CephPlan) -> str:
    """Stops the plan's daemons (TERM, then KILL), removes its namespaces, links, bridge and dir."""
    removed = []
    pids = {name: pid for name, pid in _pids(plan).items() if _is_ceph(pid)}
    for sig in ("TERM", "KILL"):
        alive = [pid for pid in pids.values() if _is_ceph(pid)]
        if not alive:
            break
        host.run(["kill", f"-{sig}", *map(str, alive)], check=False)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(_is_ceph(p) for p in alive):
            time.sleep(0.5)
    removed += [f"ceph daemon {name} (pid {pid})" for name, pid in pids.items()]
    for k in range(1, 6):
        if host.run(["ip", "netns", "del", plan.node_name(k)], check=False).returncode == 0:
            removed.append(f"namespace {plan.node_name(k)}")
        if host.run(["ip", "link", "del", plan.veth(k)], check=False).returncode == 0:
            removed.append(f"link {plan.veth(k)}")
    if host.run(["ip", "link", "del", plan.bridge], check=False).returncode == 0:
        removed.append(f"bridge {plan.bridge}")
    if Path(plan.dir).exists():
        shutil.rmtree(plan.dir)
        removed.append(f"files {plan.dir}")
    return f"ceph {plan.name}: removed {', '.join(removed) or 'nothing (already gone)'}"


def _is_ceph(pid: int) -> bool:
    """The pid is a ceph daemon still (a pid file can outlive its process, and pids are reused).
    Reads this machine's /proc: local mode only."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip().startswith("ceph-")
    except OSError:
        return False



NETWORK_BOUND = 0.9   # a link above this share of its cap during a point: the network was the bottleneck


def set_link_rate(host, plan: CephPlan, mbit: int) -> None:
    """Caps every node's link both ways at `mbit` (0 = uncapped), in place: no daemon restarts."""
    for k in range(1, plan.nodes + 1):
        for inside, dev in (([], plan.veth(k)), (["ip", "netns", "exec", plan.node_name(k)], "eth0")):
            host.run([*inside, "tc", "qdisc", "del", "dev", dev, "root"], check=False, timeout=30)
            if mbit:
                _run(host, [*inside, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
                            "burst", "256kb", "latency", "20ms"], f"node {k}'s link cap", 30)


def _counters(dev: str) -> dict[str, int]:
    """The link's byte counters, read from this machine's sysfs (the local cluster's links are here;
    a file read, so sampling them costs the measurement nothing like a process per reading)."""
    stats = Path("/sys/class/net", dev, "statistics")
    return {k: int((stats / k).read_text()) for k in ("rx_bytes", "tx_bytes")}


SAMPLE_EVERY_S = 0.25
MIN_WINDOW_S = 0.5   # a measured window shorter than this falls back to the whole call


@contextlib.contextmanager
def links_observed(plan: CephPlan, nodes: int, link_mbit: int) -> Iterator:
    """Around a point: each of the first `nodes` node links' byte counters, read every SAMPLE_EVERY_S.
    Yields the function the pipeline calls with fio's measured window (this machine's clock, or
    None): each link's use over that window (over the whole call without one), and whether any
    capped link ran above NETWORK_BOUND of its cap (network-bound)."""
    devs = {k: plan.veth(k) for k in range(1, nodes + 1)}
    series: dict[int, list] = {k: [] for k in devs}
    stop = threading.Event()

    def sample() -> None:
        now = time.time()
        for k, d in devs.items():
            series[k].append((now, _counters(d)))

    def keep_sampling() -> None:
        while not stop.wait(SAMPLE_EVERY_S):
            sample()
    sample()
    sampler = threading.Thread(target=keep_sampling, name="link-counters", daemon=True)
    sampler.start()

    def use(window: tuple[float, float] | None) -> dict:
        first, last = series[1][0][0], series[1][-1][0]
        t0, t1 = (max(window[0], first), min(window[1], last)) if window else (first, last)
        over = "fio's measured window"
        if t1 - t0 < MIN_WINDOW_S:
            t0, t1, over = first, last, "the whole call"
        uses = {k: link_utilisation(counters_at(s, t0), counters_at(s, t1), t1 - t0, link_mbit) for k, s in series.items()}
        observed = {f"link_n{k}_{d}_mbit_s": u[f"{d}_mbit_s"] for k, u in uses.items() for d in ("rx", "tx")}
        peak = max((u["utilisation"] for u in uses.values() if u["utilisation"] is not None), default=None)
        return {**observed, "link_mbit": link_mbit, "link_peak_utilisation": peak, "link_window_s": round(t1 - t0, 2),
                "link_window": over, "network_bound": peak is not None and peak > NETWORK_BOUND}
    try:
        yield use
    finally:
        stop.set()
        sampler.join()
        sample()
