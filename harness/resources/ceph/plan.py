"""What a Ceph cluster of vtb's is made of, before anything is made: its names (all under the
`vtb-` prefix, for gc), its network (a bridge, one namespace and veth per storage node), its
daemons and its pools. Pure: the commands that build it are in harness/resources/ceph/local.py."""
from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from harness.common.schema import Section
from harness.resources.ceph.images import RbdImage

MAX_NODES = 5
# BlueStore's own use of an OSD beside the data (RocksDB's WAL and memtables in BlueFS), measured on
# Pacific 16.2.15 with a 128 MiB image under 6 GiB of 4 KiB random writes: it peaked at 1507 MiB
# (max_total_wal_size is 1 GiB by default). A 1 GiB OSD fills under a write sweep on that alone.
BLUESTORE_META_MIB = 2048
PLACEMENT_SKEW = 1.5      # an OSD's share of a small pool's objects, over the even share (a few dozen objects)
NEARFULL = 0.85           # Ceph's nearfull ratio: an OSD is sized to stay under it
# An OSD sized for the fleet is at least this: growing the fleet (vm-scaling adds VMs) then keeps the
# cluster as it is, where a size that followed the fleet would change the plan and rebuild it. Sparse:
# it costs only what is written.
AUTO_OSD_MIB = 8192
IFNAME_MAX = 15           # Linux interface names; namespaces have no such limit


class CephConfig(Section):
    """[ceph]: where a fleet on the rbd backend keeps its disks. "local": a cluster `testbed up`
    makes on this machine (Terraform's hook runs `python -m harness.resources ceph create`). "hosts": a cluster vtb
    makes over the [[hosts]], one storage node each. "existing": a pool in your cluster, where vtb
    makes and removes only its own image. local/hosts below: the fields of a cluster vtb makes."""
    mode: Literal["local", "hosts", "existing"] = Field(
        "local", description='"local" (a cluster vtb makes here), "hosts" (one vtb makes over the [[hosts]]: the mon '
        'and mgr on the first, a storage node on each) or "existing" (your cluster: conf, keyring, client, pool)')
    nodes: int = Field(2, ge=1, le=MAX_NODES, description="local/hosts: storage nodes (network namespaces here, or "
                       "the first N [[hosts]]), 1 to 5")
    osds_per_node: int = Field(1, ge=1, le=4, description="local/hosts: OSDs per storage node")
    osd_size_mib: int = Field(0, ge=0, description="local: each OSD's BlueStore file in MiB (sparse: it costs only what "
                              "is written); hosts: the least each OSD's device must hold; 0 = sized from what the "
                              "fleet or sweep writes")
    replicas: int = Field(2, ge=1, le=MAX_NODES, description="local/hosts: copies of each object, one per node")
    pg_num: int = Field(32, ge=1, le=4096, description="local/hosts: placement groups per pool, a power of two")
    link_mbit: int = Field(0, ge=0, description="local: each node's link capped at this rate in Mbit/s (0 = uncapped)")
    subnet: str = Field("10.213.0.0/24", description="local: the cluster's private network (a /24 no interface here uses)")
    pool_nodes: int = Field(0, ge=0, le=MAX_NODES, description="local/hosts: the fleet's disks live on the first N "
                            "storage nodes (their pool's CRUSH rule); 0 = all of them")
    pool_node_counts: list[int] = Field([], description="local/hosts: the node counts N that get a pool over the first "
                                        "N nodes; empty = the fleet's only (ceph.pool_nodes)")
    cephx: bool = Field(True, description="local/hosts: the cluster authenticates its clients and daemons, as a "
                        "production cluster does (off: any process that reaches the mon is the cluster's admin)")
    conf: str = Field("", description="existing: your cluster's ceph.conf (its mon_host)")
    keyring: str = Field("", description="existing: the keyring with the client's key (empty: a cluster without cephx)")
    client: str = Field("admin", pattern=r"^[A-Za-z0-9_.-]+$",
                        description="existing: the cephx id, without \"client.\" (it needs `profile rbd` on the pool)")
    pool: str = Field("", description="existing: the pool vtb makes its image in (the pool itself is never changed)")

    @model_validator(mode="after")
    def _fits(self) -> "CephConfig":
        if self.mode == "existing":
            for name in ("conf", "pool"):
                if not getattr(self, name):
                    raise ValueError(f'ceph.{name} is needed with ceph.mode="existing": set it to your cluster\'s '
                                     + ("ceph.conf path" if name == "conf" else "pool for vtb's image"))
            return self   # the files are checked when a fleet is brought up: teardown and gc need none
        for name in ("conf", "keyring", "pool"):
            if getattr(self, name):
                raise ValueError(f'ceph.{name} is for ceph.mode="existing"; remove it, or set that mode')
        if self.mode == "hosts" and self.link_mbit:
            raise ValueError("ceph.link_mbit is for ceph.mode=\"local\": in \"hosts\" mode the links are your hosts' "
                             "own NICs, which vtb never reconfigures; remove it")
        if 0 < self.osd_size_mib < 1024:
            raise ValueError(f"ceph.osd_size_mib={self.osd_size_mib}: BlueStore needs at least 1024 MiB per OSD; set "
                             "0 (sized from what the sweep writes) or at least 1024")
        if self.pool_nodes > self.nodes:
            raise ValueError(f"ceph.pool_nodes={self.pool_nodes} is more than ceph.nodes={self.nodes}; "
                             "lower it or add nodes")
        if bad := [n for n in self.pool_node_counts if not 1 <= n <= self.nodes]:
            raise ValueError(f"ceph.pool_node_counts has {bad}: each is a node count from 1 to ceph.nodes={self.nodes}")
        if self.pool_node_counts and (self.pool_nodes or self.nodes) not in self.pool_node_counts:
            raise ValueError(f"ceph.pool_node_counts={self.pool_node_counts} has no pool for the fleet's "
                             f"{self.pool_nodes or self.nodes} node(s) (ceph.pool_nodes): add it, or leave the list empty")
        if self.replicas > self.nodes:
            raise ValueError(f"ceph.replicas={self.replicas}: each replica goes to another node, and "
                             f"ceph.nodes={self.nodes}; lower replicas or add nodes")
        return self


@dataclass(frozen=True)
class CephPlan:
    name: str                  # vtb-<fleet>-ceph: namespaces, pools and the state folder carry it
    dir: str                   # everything the cluster writes (conf, keyring, mon/mgr/osd data, logs, pid
                               # files); its path carries the name, so the daemons' command lines do
    nodes: int = 2             # storage nodes, each a network namespace with its OSDs
    osds_per_node: int = 1
    osd_size_mib: int = 1024   # local: each OSD's BlueStore file (sparse, but it fills without discard);
                               # hosts: the least each OSD's device must hold
    replicas: int = 2
    pg_num: int = 32
    link_mbit: int = 0         # each node's link capped with tc tbf; 0 = uncapped
    subnet: str = "10.213.0.0/24"
    cephx: bool = False        # daemons and clients authenticate; every key is in the plan's keyring
    hosts: tuple = ()          # hosts mode: node k is host k-1 (their descriptors), the mon and mgr on the
                               # first; the same dir on each. Empty: local mode (namespaces on one host)
    addresses: tuple = ()      # hosts mode: each node's address on the network the hosts share
    pools: tuple = ()          # the node counts that get a pool (and its CRUSH rule); empty: 1..nodes
    osd_devices: tuple = ()    # hosts mode: each OSD's block device on its node's host (from that host's
                               # allowlist, checked free there before use). Empty: BlueStore files
    wipe: bool = False         # hosts mode: an OSD device may carry a signature (fleet.wipe)

    @property
    def short(self) -> str:
        """A short tag for interface names (15 characters at most), from the name."""
        return hashlib.sha256(self.name.encode()).hexdigest()[:6]

    @property
    def bridge(self) -> str:
        return f"vtb-{self.short}-br"

    def node_name(self, k: int) -> str:
        """Storage node k (1-based): its namespace and its CRUSH host bucket."""
        return f"{self.name}-node{k}"

    def veth(self, k: int) -> str:
        """The host side of node k's link (inside the namespace it is eth0)."""
        return f"vtb-{self.short}-n{k}"

    def _address(self, index: int) -> str:
        return str(ipaddress.ip_network(self.subnet)[index])

    @property
    def mon_address(self) -> str:
        """Local: on the bridge, in this namespace, where clients reach it as they are. Hosts: the first host."""
        return self.addresses[0] if self.hosts else self._address(1)

    def node_address(self, k: int) -> str:
        return self.addresses[k - 1] if self.hosts else self._address(10 + k)

    @property
    def prefix_len(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    def osd_node(self, osd_index: int) -> int:
        """The node an OSD lives on: OSDs are dealt to nodes in order, osds_per_node each."""
        return osd_index // self.osds_per_node + 1

    @property
    def osd_count(self) -> int:
        return self.nodes * self.osds_per_node

    @property
    def pool_counts(self) -> tuple[int, ...]:
        """The node counts whose pools the cluster has: each pool's peering costs time on a slow host."""
        return self.pools or tuple(range(1, self.nodes + 1))

    def pool(self, node_count: int) -> str:
        """The pool whose placement spans exactly the first node_count nodes."""
        return f"{self.name}-n{node_count}"

    def crush_root(self, node_count: int) -> str:
        return f"{self.name}-n{node_count}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "CephPlan":
        fields = json.loads(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def osd_size_needed(c: CephConfig, images_mib: dict[int, int]) -> int:
    """MiB an OSD needs to hold its share of every image (pool over k nodes -> image MiB), with
    BlueStore's own overhead, under Ceph's nearfull ratio; a multiple of 256 MiB."""
    data = sum(mib * min(c.replicas, k) / (k * c.osds_per_node) for k, mib in images_mib.items()) * PLACEMENT_SKEW
    return max(1024, -(-int((data + BLUESTORE_META_MIB) / NEARFULL) // 256) * 256)


def osd_size_for(c: CephConfig, images_mib: dict[int, int]) -> int:
    """ceph.osd_size_mib, or when it is 0 (auto) what the images need: in local mode at least
    AUTO_OSD_MIB (a sparse file), in hosts mode no more (the least a host's device must hold)."""
    need = osd_size_needed(c, images_mib)
    return c.osd_size_mib or (need if c.mode == "hosts" else max(AUTO_OSD_MIB, need))


def osd_size_problem(c: CephConfig, images_mib: dict[int, int]) -> str | None:
    """Why ceph.osd_size_mib, when set, is too small for these images (the cluster would fill under
    them), with the numbers and the fix; None when it fits or is 0 (sized from them)."""
    need = osd_size_needed(c, images_mib)
    if not c.osd_size_mib or c.osd_size_mib >= need:
        return None
    written = sum(mib * min(c.replicas, k) / (k * c.osds_per_node) for k, mib in images_mib.items())
    return (f"ceph.osd_size_mib={c.osd_size_mib} is too small: each OSD holds up to {written:.0f} MiB of the "
            f"images (x{c.replicas} replicas), {PLACEMENT_SKEW:g}x that where placement is uneven, and BlueStore's own "
            f"{BLUESTORE_META_MIB} MiB, under the {NEARFULL:.0%} nearfull mark. Fix: set ceph.osd_size_mib >= {need}, "
            "or 0 to size it from the sweep (the file is sparse: it costs only what is written)")


@dataclass(frozen=True)
class CephFleet:
    """What a cluster under a fleet is made from (`Config.ceph_fleet`): [ceph], and of the rest of the
    config the fleet's name (with the installation's prefix), its VMs and their disk size, whether it
    may wipe a device, the [[hosts]] it spans and the state dir."""
    ceph: CephConfig
    prefix: str
    fleet_name: str
    vms: int
    disk_size_mib: int
    wipe: bool = False
    remotes: tuple = ()
    state_dir: Path = Path("/var/lib/vtb")


def plan_for(f: CephFleet, fleet_dir: Path, hosts: list | None = None) -> CephPlan:
    """The cluster [ceph] asks for under a fleet: named for it, its files in the fleet's folder (in
    hosts mode, the first host's fleet folder, on every host). `hosts`: the fleet's hosts, for hosts
    mode (its storage nodes are the first ceph.nodes of them, at their cluster addresses)."""
    c, name = f.ceph, f"{f.prefix}-ceph"
    spread = {}
    if c.mode == "hosts":
        nodes = (hosts or [])[:c.nodes]
        addresses = {h.name: cluster_address(h) for h in f.remotes}
        spread = {"hosts": tuple(h.descriptor() for h in nodes), "addresses": tuple(addresses[h.name] for h in nodes)}
        fleet_dir = nodes[0].fleet_dir(fleet_dir, f.fleet_name)
        spread["osd_devices"] = tuple(h.drives[j] for h in nodes for j in range(c.osds_per_node))
        spread["wipe"] = f.wipe
    return CephPlan(name=name, dir=str(fleet_dir / name), nodes=c.nodes, osds_per_node=c.osds_per_node,
                    osd_size_mib=osd_size_for(c, fleet_images(f)), replicas=c.replicas, pg_num=c.pg_num, link_mbit=c.link_mbit,
                    subnet=c.subnet, cephx=c.cephx, pools=tuple(sorted(set(c.pool_node_counts or fleet_images(f)))),
                    **spread)


def fleet_images(f: CephFleet) -> dict[int, int]:
    """The fleet's images: the node count of their pool -> their MiB (a slice per VM; with no VM,
    one slice on each host, for a sweep that measures the hosts only)."""
    slices = f.vms or max(1, len(f.remotes))
    return {f.ceph.pool_nodes or f.ceph.nodes: slices * f.disk_size_mib}


def cluster_address(entry) -> str:
    """Where a [[hosts]] entry's Ceph daemons bind: its cluster_address, else its ssh address."""
    return entry.cluster_address or entry.ssh.rpartition("@")[2]


def hosts_mode_problem(c: CephConfig, remotes: tuple | list) -> str | None:
    """Why [ceph] mode = "hosts" does not fit the [[hosts]] `remotes`, or None."""
    if c.mode != "hosts":
        return None
    if len(remotes) < c.nodes:
        return (f'ceph.mode="hosts" puts a storage node on each of the first ceph.nodes={c.nodes} [[hosts]], and the '
                f"config has {len(remotes)}. Fix: add [[hosts]] tables or lower ceph.nodes")
    for h in remotes[:c.nodes]:
        address = cluster_address(h)
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            return (f"[[hosts]] {h.name}: the Ceph daemons bind to an address, and its ssh address {address!r} is a "
                    "name. Fix: set its cluster_address to its IPv4 address on the network the hosts share")
        if ipaddress.IPv4Address(address).is_loopback:
            return (f"[[hosts]] {h.name}: its address {address} is a loopback address the other hosts cannot "
                    "reach. Fix: set its cluster_address to its address on the network the hosts share")
        if len(h.devices) < c.osds_per_node:
            return (f"[[hosts]] {h.name}: ceph.osds_per_node={c.osds_per_node} puts each OSD on a device of its own "
                    f"from the host's devices, and it lists {len(h.devices)}. Fix: add devices to it or lower "
                    "ceph.osds_per_node")
    return None


def fleet_image(plan: CephPlan, image: str, nodes: int = 0) -> RbdImage:
    """An image in the local cluster's pool over its first `nodes` nodes (0 = all)."""
    return RbdImage(plan.pool(nodes or plan.nodes), image, f"{plan.dir}/ceph.conf")


def _hosts_refusals(plan: CephPlan) -> list[str]:
    """Hosts mode: a host, an address and the OSDs' devices for each node."""
    problems = []
    if len(plan.hosts) != plan.nodes or len(plan.addresses) != plan.nodes:
        problems.append(f"ceph.nodes={plan.nodes}: hosts mode needs a host and an address for each node "
                        f"(has {len(plan.hosts)} hosts, {len(plan.addresses)} addresses)")
    if len(plan.osd_devices) != plan.osd_count:
        problems.append(f"hosts mode puts each of the {plan.osd_count} OSDs on a device of its host's, and the plan "
                        f"names {len(plan.osd_devices)}; list ceph.osds_per_node devices in each [[hosts]] entry")
    return problems


def refusals(plan: CephPlan) -> list[str]:
    """Every reason the plan must not be built, each naming its field and the fix (empty = fine)."""
    problems = _hosts_refusals(plan) if plan.hosts else []
    if not plan.name.startswith("vtb-"):
        problems.append(f"ceph name {plan.name!r}: must start with vtb- (gc finds the cluster by it)")
    if plan.name not in plan.dir:
        problems.append(f"ceph dir {plan.dir}: its path must carry the cluster name {plan.name} (gc finds "
                        "the daemons by their conf's path)")
    if not 1 <= plan.nodes <= MAX_NODES:
        problems.append(f"ceph.nodes={plan.nodes}: use 1 to {MAX_NODES} storage nodes")
    if not 1 <= plan.osds_per_node <= 4:
        problems.append(f"ceph.osds_per_node={plan.osds_per_node}: use 1 to 4")
    if plan.osd_size_mib < 1024:
        problems.append(f"ceph.osd_size_mib={plan.osd_size_mib}: BlueStore needs at least 1024 MiB per OSD")
    if not 1 <= plan.replicas <= plan.nodes:
        problems.append(f"ceph.replicas={plan.replicas}: use 1 to ceph.nodes ({plan.nodes}); each replica "
                        "goes to another node")
    if bad := [n for n in plan.pool_counts if not 1 <= n <= plan.nodes]:
        problems.append(f"ceph.pool_node_counts has {bad}: each is a node count from 1 to ceph.nodes ({plan.nodes})")
    if plan.pg_num < 1 or plan.pg_num & (plan.pg_num - 1):
        problems.append(f"ceph.pg_num={plan.pg_num}: use a power of two")
    if plan.link_mbit < 0:
        problems.append(f"ceph.link_mbit={plan.link_mbit}: use 0 (uncapped) or a rate in Mbit/s")
    try:
        net = ipaddress.ip_network(plan.subnet)
        if net.num_addresses < 10 + MAX_NODES + 2:
            problems.append(f"ceph.subnet={plan.subnet}: too small; use a /24")
    except ValueError as e:
        problems.append(f"ceph.subnet={plan.subnet}: {e}; use a private /24 such as 10.213.0.0/24")
    if len(f"vtb-{plan.short}-n{MAX_NODES}") > IFNAME_MAX:
        problems.append("interface names too long (internal)")
    return problems


def daemon_keys(plan: CephPlan) -> list[tuple[str, list[str]]]:
    """The keys the mon's keyring holds before its mkfs (which imports them): the admin's, the mgr's
    and every OSD's, each with its capabilities. Without cephx they are made but never asked for."""
    keys = [("client.admin", ["mon", "allow *", "osd", "allow *", "mgr", "allow *", "mds", "allow *"]),
            ("mgr.x", ["mon", "allow profile mgr", "osd", "allow *", "mds", "allow *"])]
    keys += [(f"osd.{i}", ["mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *"])
             for i in range(plan.osd_count)]
    return keys


def crush_commands(plan: CephPlan, node_count: int) -> list[list[str]]:
    """`ceph` arguments that give the first node_count nodes a root of their own and a rule over it,
    one replica per node: a pool with that rule is placed on exactly those nodes. A host bucket
    may be linked under several roots, so the nodes stay where they are under `default`."""
    root = plan.crush_root(node_count)
    cmds = [["osd", "crush", "add-bucket", root, "root"]]
    cmds += [["osd", "crush", "link", plan.node_name(k), f"root={root}"] for k in range(1, node_count + 1)]
    cmds.append(["osd", "crush", "rule", "create-replicated", root, root, "host"])
    return cmds


def pool_commands(plan: CephPlan, node_count: int) -> list[list[str]]:
    """`ceph` arguments for node_count's pool: its rule, its size, and rbd as its application."""
    pool, size = plan.pool(node_count), min(plan.replicas, node_count)
    return [["osd", "pool", "create", pool, str(plan.pg_num), str(plan.pg_num), "replicated", plan.crush_root(node_count)],
            ["osd", "pool", "set", pool, "size", str(size), "--yes-i-really-mean-it"],
            ["osd", "pool", "set", pool, "min_size", "1"],
            ["osd", "pool", "application", "enable", pool, "rbd"]]


def conf(plan: CephPlan, fsid: str) -> str:
    """ceph.conf: every path under the plan's dir (else the daemons write to /var/log/ceph and /run),
    cephx unless turned off, small-cluster defaults, and each OSD in its node's bucket."""
    d, auth = plan.dir, "cephx" if plan.cephx else "none"
    # local: every daemon on the plan's subnet; hosts: each at its host's address (the hosts' own
    # networks are theirs, and each also has a user-mode or management address to avoid)
    network = [] if plan.hosts else [f"public_network = {plan.subnet}"]
    lines = ["[global]", f"fsid = {fsid}", f"mon_host = v2:{plan.mon_address}:3300,v1:{plan.mon_address}:6789",
             "mon_initial_members = a", *network,
             f"auth_cluster_required = {auth}", f"auth_service_required = {auth}", f"auth_client_required = {auth}",
             f"keyring = {d}/keyring", f"run_dir = {d}/run", f"admin_socket = {d}/run/$cluster-$name.asok",
             f"pid_file = {d}/run/$name.pid", f"log_file = {d}/log/$name.log",
             f"mon_cluster_log_file = {d}/log/cluster.log", f"mon_data = {d}/mon/$cluster-$id",
             f"mgr_data = {d}/mgr/$cluster-$id", f"osd_data = {d}/osd/$cluster-$id",
             f"osd_pool_default_size = {plan.replicas}", "osd_pool_default_min_size = 1",
             "osd_pool_default_pg_autoscale_mode = off", "mon_allow_pool_delete = true",
             "mon_allow_pool_size_one = true", "mon_data_avail_warn = 2", "mon_data_avail_crit = 1",
             "mon_warn_on_pool_no_redundancy = false", "auth_allow_insecure_global_id_reclaim = false",
             "osd_crush_chooseleaf_type = 1",
             "osd_objectstore = bluestore", "bluestore_block_create = true",
             f"bluestore_block_size = {plan.osd_size_mib << 20}", "osd_memory_target = 939524096",
             "ms_bind_ipv6 = false", ""]
    if plan.hosts:
        lines += ["[mon.a]", f"public_addr = {plan.mon_address}", "", "[mgr.x]", f"public_addr = {plan.mon_address}", ""]
    for i in range(plan.osd_count):
        k = plan.osd_node(i)
        lines += [f"[osd.{i}]", f"crush_location = root=default host={plan.node_name(k)}",
                  f"public_addr = {plan.node_address(k)}", f"cluster_addr = {plan.node_address(k)}",
                  *([f"bluestore_block_path = {plan.osd_devices[i]}"] if plan.osd_devices else []), ""]
    return "\n".join(lines)


def counters_at(series: list[tuple[float, dict[str, int]]], t: float) -> dict[str, int]:
    """A link's byte counters at time t, linearly between the two readings around it (clamped to
    the first and last reading): the counters are read every fraction of a second, not at t."""
    if t <= series[0][0]:
        return series[0][1]
    for (t0, a), (t1, b) in zip(series, series[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
            return {k: round(a[k] + f * (b[k] - a[k])) for k in a}
    return series[-1][1]


def link_utilisation(before: dict[str, int], after: dict[str, int], seconds: float, link_mbit: int) -> dict:
    """A node link's use between two readings of its byte counters ({"rx_bytes", "tx_bytes"}):
    Mbit/s each way, and the busier direction's share of the cap (None when uncapped)."""
    rates = {d: (after[f"{d}_bytes"] - before[f"{d}_bytes"]) * 8 / 1e6 / max(seconds, 1e-9) for d in ("rx", "tx")}
    busiest = max(rates.values())
    return {"rx_mbit_s": round(rates["rx"], 1), "tx_mbit_s": round(rates["tx"], 1),
            "utilisation": round(busiest / link_mbit, 3) if link_mbit else None}
