"""What a killed run's Ceph clusters leave, for `harness gc`: a local cluster's folder (its
daemons are gone by then) and its namespaces, bridge and veths, a cluster's folder on a remote
host with its OSDs' BlueStore labels (ceph.mode = "hosts"), and the images fleets made in your own
cluster (ceph.mode = "existing")."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.hosts import Host, LocalHost
from harness.resources.ceph import existing
from harness.resources.ceph.bootstrap import unlabel_osd_devices
from harness.resources.ceph.plan import CephPlan
from harness.resources.leftovers import Leftover, Scope, recorded_plans


def local_cluster_dirs(state_dirs: tuple[Path, ...], prefix: str, keep: tuple[str, ...] = ()) -> list[Path]:
    """Local Ceph clusters' folders (`<prefix>...-ceph`) in the state dirs or their fleets' folders."""
    return [c for d in state_dirs if d.is_dir() for c in [*d.glob(f"{prefix}*"), *d.glob(f"*/{prefix}*")]
            if c.name.endswith("-ceph") and c.is_dir() and not c.name.startswith(keep)]


def _local_dirs(s: Scope) -> list[str]:
    removed = []
    for folder in local_cluster_dirs(s.state_dirs, s.prefix, s.keep):
        if (folder / "ceph.conf").exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(f"ceph files {folder}")
    return removed


def remote_dirs(host: Host, remote_dir: str, prefix: str, keep: tuple[str, ...] = ()) -> list[str]:
    """A cluster's folders in the fleets' folders under `remote_dir` on a remote host, each after
    the BlueStore labels its OSDs' records name."""
    script = 'for c in "$1"/*/"$2"*-ceph/ceph.conf; do [ -f "$c" ] && echo "${c%/ceph.conf}"; done; true'
    out = host.run(["sh", "-c", script, "-", remote_dir, prefix], timeout=60, check=False).stdout.decode(errors="replace")
    removed = []
    for d in out.splitlines():   # one folder a line: a state_dir may hold spaces
        if not d or Path(d).name.startswith(keep):
            continue
        removed += unlabel_osd_devices(host, d)   # by the OSDs' own records, before the folder goes
        if host.run(["rm", "-rf", "--one-file-system", d], timeout=120, check=False).returncode == 0:
            removed.append(f"ceph files {d}")
    return removed


def _remote_dirs(s: Scope) -> list[str]:
    remote_dir = s.host.descriptor().get("remote_dir")
    return [] if remote_dir is None else remote_dirs(s.host, remote_dir, s.prefix, s.keep)


def _images_in_your_cluster(s: Scope) -> list[str]:
    """Removed only while they still carry the fleet's tag (see existing.remove_recorded)."""
    removed = []
    for record in (r for d in s.state_dirs for r in existing.records(d)):
        owner = json.loads(record.read_text()).get("owner", "") + "-"
        if owner.startswith(s.prefix) and not owner.startswith(s.keep):
            removed += existing.remove_recorded(LocalHost(), record)
    return removed


LEFTOVERS = (Leftover("local Ceph clusters' folders", _local_dirs),
             Leftover("images fleets made in your cluster", _images_in_your_cluster),
             Leftover("Ceph clusters' folders and OSD labels on other hosts", _remote_dirs, on_this_machine=False))


def _networks_of_local_clusters(s: Scope) -> set[str]:
    """The namespaces and links (bridge, veths) that local clusters' plans name: a fleet's
    `ceph-*.json`, kept before its cluster is made, and each cluster's own `plan.json`."""
    files = recorded_plans(s, "ceph", "name")[0] + [c / "plan.json" for c in local_cluster_dirs(s.state_dirs, s.prefix, s.keep)]
    names = set()
    for f in files:
        try:
            plan = CephPlan.from_json(f.read_text())
        except (OSError, ValueError, TypeError):   # a plan cut short, or of another version: it proves nothing
            continue
        if not plan.hosts:
            names |= {plan.bridge, *(n for k in range(1, plan.nodes + 1) for n in (plan.node_name(k), plan.veth(k)))}
    return names


RECORDED_NETWORKS = (_networks_of_local_clusters,)
