"""The Ceph plan: names under vtb- (interface names within 15 characters), refusals that name the
field, one CRUSH root and rule per node count, ceph.conf paths, link use from byte counters, and
hosts mode: a storage node on each of the [[hosts]], at an address the others reach."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.core import ConfigError
from harness.engine import settings
from harness.hosts import all_placed
from harness.resources.ceph.plan import (
    AUTO_OSD_MIB,
    IFNAME_MAX,
    CephPlan,
    conf,
    counters_at,
    crush_commands,
    fleet_images,
    link_utilisation,
    osd_size_needed,
    plan_for,
    pool_commands,
    refusals,
)


def plan(**kw) -> CephPlan:
    return CephPlan(**{"name": "vtb-ci-ceph", "dir": "/var/tmp/vtb-ci/ci/vtb-ci-ceph", "nodes": 3, **kw})


def test_a_good_plan_is_accepted_and_every_name_carries_the_prefix():
    p = plan()
    assert refusals(p) == []
    names = [p.bridge, *(p.veth(k) for k in range(1, 6))]
    assert all(n.startswith("vtb-") and len(n) <= IFNAME_MAX for n in names)
    assert p.node_name(2) == "vtb-ci-ceph-node2" and p.pool(2) == "vtb-ci-ceph-n2"
    assert p.mon_address == "10.213.0.1" and p.node_address(3) == "10.213.0.13"
    assert CephPlan.from_json(p.to_json()) == p


@pytest.mark.parametrize("field,value,says", [
    ("nodes", 6, "ceph.nodes=6"), ("nodes", 0, "ceph.nodes=0"), ("replicas", 4, "ceph.replicas=4"),
    ("pg_num", 48, "power of two"), ("osd_size_mib", 512, "ceph.osd_size_mib"),
    ("subnet", "10.213.0.0/30", "too small"), ("subnet", "not-a-net", "ceph.subnet"), ("name", "ceph", "vtb-"),
])
def test_each_bad_field_is_refused_by_name(field, value, says):
    problems = refusals(plan(**{field: value}))
    assert problems and any(says in p for p in problems)


def test_each_node_count_gets_a_root_over_exactly_its_nodes_and_a_pool_on_it():
    p = plan()
    cmds = crush_commands(p, 2)
    assert cmds[0] == ["osd", "crush", "add-bucket", "vtb-ci-ceph-n2", "root"]
    assert [c[3] for c in cmds if c[:3] == ["osd", "crush", "link"]] == ["vtb-ci-ceph-node1", "vtb-ci-ceph-node2"]
    assert cmds[-1] == ["osd", "crush", "rule", "create-replicated", "vtb-ci-ceph-n2", "vtb-ci-ceph-n2", "host"]
    pool = pool_commands(p, 2)
    assert pool[0][-1] == "vtb-ci-ceph-n2" and pool[1][5] == "2"
    assert pool_commands(plan(replicas=3), 2)[1][5] == "2"   # never more replicas than nodes


def test_the_conf_keeps_everything_under_the_dir_and_puts_each_osd_on_its_node():
    p = plan(osds_per_node=2)
    text = conf(p, "00000000-0000-0000-0000-000000000000")
    assert "mon_cluster_log_file = /var/tmp/vtb-ci/ci/vtb-ci-ceph/log/cluster.log" in text
    assert "[osd.5]\ncrush_location = root=default host=vtb-ci-ceph-node3\npublic_addr = 10.213.0.13" in text
    assert "auth_client_required = none" in text and "/var/log" not in text


def test_link_use_is_read_from_byte_counters():
    before = {"rx_bytes": 1_000, "tx_bytes": 5_000}
    after = {"rx_bytes": 1_000 + 25_000_000, "tx_bytes": 5_000 + 2_500_000}   # 200 Mbit/s in, 20 out over 1 s
    use = link_utilisation(before, after, 1.0, 250)
    assert use == {"rx_mbit_s": 200.0, "tx_mbit_s": 20.0, "utilisation": 0.8}
    assert link_utilisation(before, after, 1.0, 0)["utilisation"] is None


def test_link_use_over_fios_window_is_read_between_the_sampled_counters():
    # 10 MB/s on the link from t=100 to t=104, idle around it; readings every 0.5 s
    series = [(100 + i / 2, {"rx_bytes": round(min(max(i / 2, 0), 4) * 10_000_000), "tx_bytes": 0})
              for i in range(-4, 13)]
    assert counters_at(series, 101.25)["rx_bytes"] == 12_500_000   # between two readings
    assert counters_at(series, 0)["rx_bytes"] == 0 and counters_at(series, 1e9)["rx_bytes"] == 40_000_000
    over_window = link_utilisation(counters_at(series, 100.5), counters_at(series, 103.5), 3.0, 100)
    whole_call = link_utilisation(series[0][1], series[-1][1], series[-1][0] - series[0][0], 100)
    assert over_window["rx_mbit_s"] == 80.0 and over_window["utilisation"] == 0.8
    assert whole_call["rx_mbit_s"] == 40.0   # the idle start and end dilute it: why the window is used


# --- hosts mode: the storage nodes are the fleet's [[hosts]] ---------------------------------
def hosts_plan(**kw) -> CephPlan:
    hosts = tuple({"kind": "ssh", "name": f"h{k}", "target": "root@127.0.0.1", "port": 2200 + k,
                   "remote_dir": "/var/tmp/vtb"} for k in range(2))
    return plan(**{"nodes": 2, "hosts": hosts, "addresses": ("10.214.0.11", "10.214.0.12"),
                   "osd_devices": ("/dev/vdb", "/dev/vdb"), **kw})


def test_in_hosts_mode_each_daemon_binds_to_its_hosts_address_and_no_subnet_is_assumed():
    p = hosts_plan()
    assert refusals(p) == [] and CephPlan.from_json(p.to_json()) == p
    assert p.mon_address == "10.214.0.11" and p.node_address(2) == "10.214.0.12"
    text = conf(p, "fsid")
    assert "public_network" not in text   # each host also has a user-mode address the others cannot reach
    assert "[mon.a]\npublic_addr = 10.214.0.11" in text and "[mgr.x]\npublic_addr = 10.214.0.11" in text
    assert "[osd.1]\ncrush_location = root=default host=vtb-ci-ceph-node2\npublic_addr = 10.214.0.12" in text
    assert "cluster_addr = 10.214.0.12\nbluestore_block_path = /dev/vdb\n" in text   # the host's device, not a file
    assert "bluestore_block_path" not in conf(plan(), "fsid")   # local mode: BlueStore files


def test_a_hosts_plan_without_a_host_or_address_for_each_node_is_refused():
    assert any("a host and an address for each node" in p for p in refusals(hosts_plan(nodes=3, replicas=2)))
    assert any("a host and an address for each node" in p for p in refusals(hosts_plan(addresses=("10.214.0.11",))))
    assert any("a device of its host's" in p for p in refusals(hosts_plan(osd_devices=("/dev/vdb",))))


def _config(tmp_path, *overrides, hosts: list[str]):
    """A config with a [[hosts]] table per "address [extra line]", in ceph's hosts mode."""
    tables = "".join(f'[[hosts]]\nname = "h{i}"\nssh = "root@{address}"\n'
                     + ("" if "devices" in extra else 'devices = ["/dev/vdb"]\n') + f"{extra}\n"
                     for i, (address, _, extra) in enumerate(h.partition(" ") for h in hosts))
    path = tmp_path / "hosts.toml"
    path.write_text(tables)
    return settings.load(path, ["ceph.mode=hosts", *overrides])


def test_hosts_mode_asks_for_enough_hosts_and_addresses_the_others_reach(tmp_path):
    with pytest.raises(ConfigError, match=r"ceph.nodes=2.*\[\[hosts\]\].*has 1"):
        _config(tmp_path, hosts=["10.0.0.5"])
    with pytest.raises(ConfigError, match="loopback.*cluster_address"):
        _config(tmp_path, hosts=["127.0.0.1", "127.0.0.1"])
    with pytest.raises(ConfigError, match="is a name.*cluster_address"):
        _config(tmp_path, hosts=["server-a", "10.0.0.6"])
    with pytest.raises(ConfigError, match="link_mbit.*hosts.*NICs"):
        _config(tmp_path, "ceph.link_mbit=100", hosts=["10.0.0.5", "10.0.0.6"])
    with pytest.raises(ConfigError, match=r"h0: ceph.osds_per_node=2 puts each OSD on a device of its own.*lists 1"):
        _config(tmp_path, "ceph.osds_per_node=2", hosts=["10.0.0.5", "10.0.0.6"])
    cfg = _config(tmp_path, hosts=['127.0.0.1 cluster_address = "10.214.0.11"', '10.0.0.6 devices = ["/dev/sdc", "/dev/sdd"]'])
    p = plan_for(cfg.ceph_fleet, Path("/here"), all_placed(cfg.placement))
    assert p.addresses == ("10.214.0.11", "10.0.0.6") and p.dir == f"/var/tmp/vtb/{cfg.fleet.name}/{cfg.prefix}-ceph"
    assert [h["name"] for h in p.hosts] == ["h0", "h1"] and refusals(p) == []
    assert p.osd_devices == ("/dev/vdb", "/dev/sdc")   # each node's OSD on the first of its host's devices
    # a device holds what the images need, no more; a sparse file in local mode is made larger
    assert p.osd_size_mib == osd_size_needed(cfg.ceph, fleet_images(cfg.ceph_fleet)) < AUTO_OSD_MIB


# --- OSDs sized for what the sweep writes ---------------------------------------------------
def test_osds_are_sized_from_the_images_with_bluestore_overhead():
    from harness.resources.ceph.plan import BLUESTORE_META_MIB, CephConfig, osd_size_needed
    c = CephConfig(nodes=3, replicas=2)
    need = osd_size_needed(c, {2: 128, 3: 128})   # ceph-scaling's defaults: a 128 MiB image per block
    assert need % 256 == 0 and need * 0.85 >= BLUESTORE_META_MIB + 1.5 * (128 + 128 * 2 / 3)
    assert osd_size_needed(c, {3: 8192}) > osd_size_needed(c, {3: 128})


def test_an_osd_set_too_small_for_the_sweep_is_refused_with_the_numbers():
    from harness.resources.ceph.plan import CephConfig, osd_size_needed, osd_size_problem
    c = CephConfig(nodes=3, replicas=2, osd_size_mib=1024)
    said = osd_size_problem(c, {2: 128, 3: 128})
    assert said.startswith("ceph.osd_size_mib=1024 is too small") and f">= {osd_size_needed(c, {2: 128, 3: 128})}" in said
    assert osd_size_problem(c.model_copy(update={"osd_size_mib": 0}), {2: 128}) is None


def test_an_osd_size_below_bluestores_minimum_is_refused_by_name():
    from harness.resources.ceph.plan import CephConfig
    with pytest.raises(ValueError, match="ceph.osd_size_mib=512"):
        CephConfig(osd_size_mib=512)


def test_a_full_cluster_is_said_in_cephs_own_words(fixture_text):
    """Recorded from a real cluster whose OSDs were made full (tests/integration/test_ceph.py)."""
    import json

    from harness.resources.ceph.images import stalling
    assert stalling(json.loads(fixture_text("ceph/health-full.json"))) == "HEALTH_ERR: 2 full osd(s); 3 pool(s) full"
    assert stalling({"status": "HEALTH_OK", "checks": {}}) is None
    assert stalling({"status": "HEALTH_WARN", "checks": {"POOL_NO_REDUNDANCY": {
        "severity": "HEALTH_WARN", "summary": {"message": "1 pool(s) have no replicas configured"}}}}) is None


def test_a_fleets_cluster_makes_only_its_pool_and_a_sweep_names_its_own(tmp_path):
    """Each pool costs its CRUSH rule, its mon commands and its PGs' peering: a fleet needs one."""
    cfg = settings.load(None, ["disk.backend=rbd", "ceph.nodes=3"])
    assert plan_for(cfg.ceph_fleet, tmp_path).pools == (3,)
    cfg = settings.load(None, ["disk.backend=rbd", "ceph.nodes=3", "ceph.pool_nodes=2", "ceph.pool_node_counts=[3,2]"])
    p = plan_for(cfg.ceph_fleet, tmp_path)
    assert p.pools == p.pool_counts == (2, 3) and refusals(p) == []
    assert plan(pools=()).pool_counts == (1, 2, 3)   # a plan recorded before pools were listed
    assert any("ceph.pool_node_counts has [4]" in r for r in refusals(plan(pools=(4,))))


@pytest.mark.parametrize("sets,says", [
    (["ceph.pool_node_counts=[0,2]"], r"has \[0\]: each is a node count from 1 to ceph.nodes=2"),
    (["ceph.pool_node_counts=[1]"], r"no pool for the fleet's 2 node\(s\) \(ceph.pool_nodes\): add it"),
])
def test_pool_node_counts_that_cannot_serve_the_fleet_are_refused_by_name(sets, says):
    with pytest.raises(ConfigError, match=says):
        settings.load(None, ["disk.backend=rbd", *sets])


def test_link_use_is_sampled_around_a_point_and_a_missed_reading_is_skipped():
    import time

    from harness.resources.ceph import links
    ticks = {1: 0, 2: 0}

    def reader(k: int):
        def read():
            ticks[k] += 1
            if k == 2 and ticks[k] == 2:
                return None   # an ssh reading that failed: the next one counts
            return {"rx_bytes": ticks[k] * 1_250_000, "tx_bytes": 0}
        return read
    with links.observed({1: reader(1), 2: reader(2)}, {1: 1000, 2: 0}, every_s=0.05) as use:
        time.sleep(0.7)
    said = use(None)
    assert said["link_window"] == "the whole call" and said["link_n1_rx_mbit_s"] > 0 and said["link_n2_tx_mbit_s"] == 0
    peak = pytest.approx(said["link_n1_rx_mbit_s"] / 1000, abs=0.01)
    assert said["link_mbit"] == 1000 and said["link_peak_utilisation"] == peak


def test_a_link_whose_reader_fails_gives_no_figure_and_the_point_stands():
    import time

    from harness.resources.ceph import links

    def broken():
        raise OSError("ssh: connection reset")
    with links.observed({1: broken}, {1: 1000}, every_s=0.05) as use:
        time.sleep(0.2)
    assert use(None) == {"link_window": "no readings", "network_bound": False}
