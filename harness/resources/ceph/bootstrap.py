"""Bringing up a cluster's daemons from Debian's packages, with no cephadm and no containers, on
whichever hosts the plan puts them: the mon and the mgr, then each OSD on its storage node, the
pools, and the wait until every PG is active+clean. Where a node runs (a network namespace here,
or a host of [[hosts]]) is the caller's: harness/resources/ceph/local.py and harness/resources/ceph/hosts.py.

Every command and file goes through a host's `run`, so the same steps serve this machine and
a user's servers; the daemons are stopped by the pid files in the plan's dir, and only those."""
from __future__ import annotations

import json
import shlex
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from harness.common.bounded import heartbeat
from harness.common.console import step
from harness.common.exits import BringUpFailed
from harness.common.schema import Refusal
from harness.resources.ceph.plan import CephPlan, conf, crush_commands, daemon_keys, pool_commands

PACKAGES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-common")
TOOLS = ("ceph", "ceph-mon", "ceph-mgr", "ceph-osd", "ceph-authtool", "monmaptool")
HEALTHY_WITHIN_S = 300
STOP_GRACE_S = 20

# Where storage node k's OSDs run: the host, and the words its commands start with there
NodeRunner = Callable[[int], tuple[object, list[str]]]


class CephError(BringUpFailed):
    pass


class CephRefusal(CephError, Refusal):
    """A Ceph plan refused before anything is made (bad input, or what its hosts lack)."""


def run(host, argv: list[str], what: str, timeout: float = 120, input: bytes | None = None) -> str:
    try:
        out = host.run(argv, input=input, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CephError(f"{what}: `{' '.join(argv)}` did not finish within {timeout:.0f} s") from None
    if out.returncode != 0:
        raise CephError(f"{what}: `{' '.join(argv)}` exited {out.returncode}: "
                        f"{out.stderr.decode(errors='replace').strip()[-400:]}")
    return out.stdout.decode(errors="replace")


def ceph(host, plan: CephPlan, args: list[str], what: str, timeout: float = 60) -> str:
    return run(host, ["ceph", "-c", f"{plan.dir}/ceph.conf", "--connect-timeout", "20", *args], what, timeout)


def ceph_session(host, plan: CephPlan, commands: list[list[str]], what: str) -> None:
    """Several mon commands, in order, through one `ceph` process (its interactive mode reads them
    from stdin): one client start instead of one each, which is most of their cost on a slow host.
    That mode exits 0 whatever a command said, so its "Error ..." lines are what fail it."""
    argv = ["ceph", "-c", f"{plan.dir}/ceph.conf", "--connect-timeout", "20"]
    timeout = 60 + 30 * len(commands)
    script = "".join(shlex.join(args) + "\n" for args in commands).encode()
    try:
        out = host.run(argv, input=script, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CephError(f"{what}: {len(commands)} ceph commands did not finish within {timeout} s") from None
    said = out.stderr.decode(errors="replace")
    errors = [line for line in said.splitlines() if line.lower().startswith("error")]   # also "error handling ..."
    if out.returncode != 0 or errors:
        raise CephError(f"{what}: `ceph` exited {out.returncode} on {len(commands)} commands: "
                        f"{'; '.join(errors) or said.strip()[-400:]}")


def write(host, path: str, text: str) -> None:
    """Atomically, readable by root only (the keyring among these files holds every key)."""
    run(host, ["sh", "-c", 'umask 077 && cat > "$1.tmp" && mv "$1.tmp" "$1"', "-", path], f"writing {path}", 60,
        text.encode())


def read(host, path: str) -> str | None:
    out = host.run(["cat", path], timeout=60, check=False)
    return out.stdout.decode(errors="replace") if out.returncode == 0 else None


def missing_tools(host, extra: tuple[str, ...] = ()) -> list[str]:
    out = host.run(["sh", "-c", "for t in \"$@\"; do command -v $t >/dev/null || echo $t; done", "-", *TOOLS, *extra],
                   check=False, timeout=60)
    return out.stdout.decode().split()


def complete(mon, plan: CephPlan) -> bool:
    """The plan's cluster is there, whole and ready: every OSD up and in, every PG active+clean."""
    if read(mon, f"{plan.dir}/plan.json") != plan.to_json():
        return False
    try:
        st = status(mon, plan)
    except (CephError, json.JSONDecodeError):
        return False
    osds = st.get("osdmap", {})
    return unhealthy(st) is None and osds.get("num_up_osds") == osds.get("num_in_osds") == plan.osd_count


def build(plan: CephPlan, mon, node: NodeRunner, hosts: list) -> None:
    """The whole cluster: the plan's dir and conf on every host, the mon and the mgr on `mon`, each
    OSD where `node` runs it, the pools per node count; then waits for health. plan.json is written
    last: its presence says the cluster was made whole."""
    fsid = str(uuid.uuid4())
    for h in hosts:
        run(h, ["mkdir", "-p", *(f"{plan.dir}/{sub}" for sub in ("run", "log", "mon", "mgr/ceph-x", "osd"))],
            f"the cluster's folder on {h.label}")
        # keys and daemon data for root only; the folder itself is passable, and its ceph.conf
        # (no secret in it) readable, for a QEMU that does not run as root (cephx off)
        run(h, ["chmod", "0700", *(f"{plan.dir}/{sub}" for sub in ("run", "log", "mon", "mgr", "osd"))],
            f"making the cluster's data on {h.label} private")
        run(h, ["chmod", "0711", plan.dir], f"the cluster's folder on {h.label}")
        write(h, f"{plan.dir}/ceph.conf", conf(plan, fsid))
        run(h, ["chmod", "0644", f"{plan.dir}/ceph.conf"], f"the cluster's conf on {h.label}")
    with heartbeat(f"ceph {plan.name}: the mon and the mgr on {mon.label}"):
        _monitor(mon, plan, fsid)
    keyring = read(mon, f"{plan.dir}/keyring") or ""
    for h in hosts:   # every daemon's and the admin's key (cephx), for the OSDs and the clients there
        if h is not mon:
            write(h, f"{plan.dir}/keyring", keyring)
    uuids = [str(uuid.uuid4()) for _ in range(plan.osd_count)]
    # each osd.i registered under its own id (an id another OSD holds is an error), in one client start
    ceph_session(mon, plan, [["osd", "new", u, str(i)] for i, u in enumerate(uuids)], "registering the OSDs")
    # every OSD's mkfs at once, each where its node runs: seconds of CPU each (tens in a TCG host)
    with heartbeat(f"ceph {plan.name}: {plan.osd_count} OSD(s)"), ThreadPoolExecutor(plan.osd_count) as pool:
        list(pool.map(lambda i: _osd(node, plan, i, uuids[i]), range(plan.osd_count)))
    counts = plan.pool_counts
    step(f"  ceph {plan.name}: a CRUSH rule and a pool over the first {', '.join(map(str, counts))} node(s)")
    with heartbeat(f"ceph {plan.name}: the pools"):
        ceph_session(mon, plan, [args for n in counts for args in crush_commands(plan, n) + pool_commands(plan, n)],
                     "the pools")
    wait_healthy(mon, plan)
    write(mon, f"{plan.dir}/plan.json", plan.to_json())


def _monitor(host, plan: CephPlan, fsid: str) -> None:
    d, cfg = plan.dir, f"{plan.dir}/ceph.conf"
    keyring = f"{d}/keyring"
    run(host, ["ceph-authtool", "--create-keyring", keyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"],
        "the mon keyring")
    run(host, ["chmod", "0600", keyring], "making the keyring private")
    for entity, caps in daemon_keys(plan):
        cap_args = [a for service, cap in zip(caps[::2], caps[1::2]) for a in ("--cap", service, cap)]
        run(host, ["ceph-authtool", keyring, "--gen-key", "-n", entity, *cap_args], f"the {entity} key")
    run(host, ["monmaptool", "--create", "--fsid", fsid, "--addv", "a",
               f"[v2:{plan.mon_address}:3300,v1:{plan.mon_address}:6789]", f"{d}/monmap"], "the monmap")
    run(host, ["ceph-mon", "-c", cfg, "--mkfs", "-i", "a", "--monmap", f"{d}/monmap", "--keyring", keyring], "mon mkfs")
    run(host, ["ceph-mon", "-c", cfg, "-i", "a"], "starting the mon")
    run(host, ["ceph-mgr", "-c", cfg, "-i", "x"], "starting the mgr")
    step(f"  ceph {plan.name}: mon and mgr up on {plan.mon_address}")


def _osd(node: NodeRunner, plan: CephPlan, i: int, osd_uuid: str) -> None:
    k, cfg = plan.osd_node(i), f"{plan.dir}/ceph.conf"
    host, inside = node(k)
    run(host, ["mkdir", "-p", f"{plan.dir}/osd/ceph-{i}"], f"osd.{i}'s folder")
    run(host, [*inside, "ceph-osd", "-c", cfg, "-i", str(i), "--mkfs", "--osd-uuid", osd_uuid], f"osd.{i} mkfs", 300)
    run(host, [*inside, "ceph-osd", "-c", cfg, "-i", str(i)], f"starting osd.{i}", 120)
    on = f", on {plan.osd_devices[i]}" if plan.osd_devices else ""
    step(f"  ceph {plan.name}: osd.{i} up on node {k} ({plan.node_address(k)}){on}")


def status(host, plan: CephPlan) -> dict:
    return json.loads(ceph(host, plan, ["status", "-f", "json"], "ceph status"))


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
    with heartbeat(f"ceph {plan.name} to be healthy, all PGs active+clean", within_s):
        while time.monotonic() < deadline:
            try:
                why = unhealthy(status(host, plan))
            except (CephError, json.JSONDecodeError) as e:
                why = str(e)
            if why is None:
                return
            time.sleep(2)
    raise CephError(f"ceph {plan.name} not ready within {within_s:.0f} s: {why} (logs: {plan.dir}/log)")


def log_tails(host, plan: CephPlan, lines: int = 5) -> str:
    """The last lines of each daemon's log on the host, for an error that says why."""
    out = host.run(["sh", "-c", f'for f in "$1"/log/*.log; do [ -f "$f" ] && echo "--- $f" && tail -n {lines} "$f"; done',
                    "-", plan.dir], timeout=60, check=False).stdout.decode(errors="replace").strip()
    return ("\n" + out)[-2000:] if out else ""


# Prints "name pid" for each pid file of the plan's dir whose process is still a ceph daemon (a pid
# file can outlive its process, and pids are reused), then stops them: TERM, then KILL after the grace.
_STOP = r'''cd "$1/run" 2>/dev/null || exit 0
pids=""
for f in *.pid; do
  [ -f "$f" ] || continue
  p=$(cat "$f")
  case "$(cat /proc/$p/comm 2>/dev/null)" in ceph-*) echo "${f%.pid} $p"; pids="$pids $p";; esac
done
[ -n "$pids" ] || exit 0
kill -TERM $pids 2>/dev/null
i=0
while [ $i -lt $(( $2 * 2 )) ]; do
  alive=""
  for p in $pids; do case "$(cat /proc/$p/comm 2>/dev/null)" in ceph-*) alive="$alive $p";; esac; done
  [ -n "$alive" ] || exit 0
  sleep 0.5; i=$((i + 1))
done
kill -KILL $alive 2>/dev/null
exit 0'''


# Erases the BlueStore label (only that signature) of each device an OSD of the cluster's dir is on:
# BlueStore records it as the OSD's `block` symlink. A BlueStore file is no block device: left as is.
_UNLABEL = r'''for b in "$1"/osd/*/block; do
  [ -L "$b" ] && [ -b "$b" ] || continue
  d=$(readlink -f "$b")
  [ -n "$(wipefs -a -t ceph_bluestore "$d" 2>/dev/null)" ] && echo "$d"
done
exit 0'''


def unlabel_osd_devices(host, ceph_dir: str) -> list[str]:
    """The BlueStore labels the cluster's OSDs left on their devices (their daemons stopped), erased,
    so that the device gate takes the devices again: what went, each said."""
    out = host.run(["sh", "-c", _UNLABEL, "-", ceph_dir], timeout=120, check=False).stdout.decode(errors="replace")
    return [f"BlueStore label on {d}" for d in out.splitlines() if d]


def remove(host, plan: CephPlan) -> list[str]:
    """Stops the daemons the plan's dir on the host has pid files for, erases the labels of its
    OSDs' devices, and removes the dir."""
    with heartbeat(f"ceph {plan.name}'s daemons to stop on {host.label}"):
        out = host.run(["sh", "-c", _STOP, "-", plan.dir, str(STOP_GRACE_S)], timeout=STOP_GRACE_S + 60, check=False)
    removed = [f"ceph daemon {name} (pid {pid})" for name, _, pid in
               (line.partition(" ") for line in out.stdout.decode(errors="replace").splitlines()) if pid]
    where = "" if host.is_this_machine else f" on {host.label}"
    removed += [f"{label}{where}" for label in unlabel_osd_devices(host, plan.dir)]
    if host.run(["test", "-e", plan.dir], timeout=60, check=False).returncode == 0:
        host.run(["rm", "-rf", "--one-file-system", plan.dir], timeout=120, check=False)
        removed.append(f"files {plan.dir}{where}")
    return removed
