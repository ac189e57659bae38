"""ceph-scaling's summary from recorded-shape samples: one row per point, the network-bound flag,
the regression per node count and the correlation table; its plots are drawn."""
from __future__ import annotations

import math

import pytest

from harness.experiments import ceph_scaling as cs


def rows():
    """Aggregate samples of 2 and 3 nodes x 2 block sizes x 2 client counts, PE and VE, 2 repeats:
    bandwidth grows with block size, clients and nodes; the 3-node 128k points ran into the cap."""
    out = []
    for nodes in (2, 3):
        for bs, bs_bytes in (("4k", 4096), ("128k", 131072)):
            for nj in (1, 4):
                for env, f in (("physical", 1.0), ("virtual", 0.5)):
                    for rep in (0, 1):
                        bw = f * nodes * math.sqrt(bs_bytes) * nj ** 0.5 * (1 + 0.02 * rep)
                        meta = {"ceph_nodes": nodes, "link": "uncapped", "point": f"read-{bs}-j{nj}", "env": env,
                                "rw": "read", "bs": bs, "bs_bytes": bs_bytes, "numjobs": nj, "scope": "aggregate",
                                "repeat": rep, "status": "ok", "network_bound": nodes == 3 and bs == "128k",
                                "link_peak_utilisation": 0.95 if nodes == 3 and bs == "128k" else 0.3,
                                "link_n1_rx_mbit_s": 100.0 + 20 * rep, "link_n1_tx_mbit_s": 10.0}
                        out += [{**meta, "metric": "aggregate_bw", "value": bw},
                                {**meta, "metric": "aggregate_iops", "value": bw * 1024 / bs_bytes},
                                {**meta, "metric": "lat_mean", "value": 1e6 / (bw * 1024 / bs_bytes)}]
    return out


def test_one_row_per_point_with_means_and_the_network_bound_flag():
    points = cs.point_rows(rows())
    assert len(points) == 2 * 2 * 2 * 2
    bound = [p for p in points if p["network_bound"]]
    assert {(p["nodes"], p["bs"]) for p in bound} == {(3, "128k")} and all(p["link_peak"] == 0.95 for p in bound)
    p = next(p for p in points if p["nodes"] == 2 and p["point"] == "read-4k-j1" and p["env"] == "physical")
    assert math.isclose(p["aggregate_bw"], 2 * 64 * 1.01)
    assert p["links"] == {1: [100.0, 120.0]} and cs.links_cell(p["links"]) == "n1 110"   # each node link's busier way


def test_the_model_fits_each_node_count_and_the_correlations_have_the_right_sign():
    r = rows()
    fits = cs.fits_per_node_count(r)
    assert set(fits) == {(n, m) for n in (2, 3) for m in cs.METRICS}
    bw = fits[(2, "aggregate_bw")]
    assert not isinstance(bw, str) and bw.r2 > 0.99 and set(bw.numeric) == {"numjobs", "bs_bytes"}
    corr = cs.correlations(cs.point_rows(r))
    by = {(c["nodes"], c["env"], c["factor"], c["metric"]): c for c in corr}
    assert by[(2, "physical", "bs_bytes", "aggregate_bw")]["r"] > 0.8
    assert by[(2, "physical", "bs_bytes", "aggregate_iops")]["r"] < 0
    assert by[(3, "virtual", "numjobs", "aggregate_bw")]["n"] == 4


def test_the_summary_and_its_plots(tmp_path):
    r = rows()
    points, fits = cs.point_rows(r), cs.fits_per_node_count(r)
    text = cs.print_summary(points, fits, cs.correlations(points), "tcg")
    assert "regression per node count" in text and "held-out error" in text and "Pearson" in text
    assert "yes" in text   # network-bound points are marked
    for png in (cs.by_nodes_plot(points, tmp_path / "n.png"), cs.by_clients_plot(points, tmp_path / "c.png"),
                cs.predicted_plot(r, fits, tmp_path / "p.png")):
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_sweep_that_would_fill_its_cluster_is_refused_before_anything_starts():
    from harness.engine import settings
    from harness.experiments.ceph_scaling import EXPERIMENT
    assert EXPERIMENT.refusal(settings.load(None, [])) is None   # the defaults fit: the OSDs are sized for them
    said = EXPERIMENT.refusal(settings.load(None, ["ceph.osd_size_mib=1024"]))
    assert said.startswith("ceph.osd_size_mib=1024 is too small") and "Fix: set ceph.osd_size_mib >=" in said
    assert "ceph.mode" in EXPERIMENT.refusal(settings.load(None, ["ceph.mode=existing", "ceph.conf=/c", "ceph.pool=p"]))


HOSTS = ('hosts=[{"name": "a", "ssh": "root@192.0.2.1", "devices": ["/dev/vdb"]}, '
         '{"name": "b", "ssh": "root@192.0.2.2", "devices": ["/dev/vdb"]}]')


def test_over_hosts_each_host_is_a_node_and_the_node_counts_run_up_to_them():
    from harness.engine import settings
    from harness.experiments.ceph_scaling import EXPERIMENT
    cfg = settings.load(None, [HOSTS, "ceph.mode=hosts"])
    assert cs.node_counts(cfg) == [1, 2] and EXPERIMENT.refusal(cfg) is None
    p = EXPERIMENT.plan(cfg)
    assert [b.label for b in p.blocks] == ["1 storage node(s), links uncapped", "2 storage node(s), links uncapped"]
    assert {pt.participants for b in p.blocks for pt in b.points} == {2}   # a client on each host
    ceph, images = EXPERIMENT._cluster(cfg)
    assert ceph.nodes == 2 and ceph.pool_node_counts == [1, 2] and images == {1: 256, 2: 256}


@pytest.mark.parametrize("overrides, said", [
    (["ceph.mode=local"], "--set ceph.mode=hosts"),
    (["ceph.mode=hosts", "ceph_scaling.link_mbit=[100]"], "your hosts' own interfaces"),
    (["ceph.mode=hosts", "ceph_scaling.node_counts=[2,3]"], "up to 3 storage nodes, one per [[hosts]] entry"),
])
def test_over_hosts_what_does_not_fit_them_is_refused_with_the_fix(overrides, said):
    from harness.engine import settings
    from harness.experiments.ceph_scaling import EXPERIMENT
    assert said in EXPERIMENT.refusal(settings.load(None, [HOSTS, *overrides]))


def test_over_hosts_the_run_records_the_node_counts_it_sweeps():
    from harness.engine import settings
    from harness.experiments.ceph_scaling import EXPERIMENT
    cfg = EXPERIMENT.configured(settings.load(None, [HOSTS, "ceph.mode=hosts"]))
    assert cfg.ceph_scaling.node_counts == [1, 2] and cs.node_counts(cfg) == [1, 2]
    assert EXPERIMENT._cluster(cfg)[0].replicas == 2
    one = EXPERIMENT.configured(settings.load(None, [HOSTS, "ceph.mode=hosts", "ceph_scaling.node_counts=[1]"]))
    assert EXPERIMENT._cluster(one)[0].replicas == 1   # a copy per node, on one node


def test_host_clients_take_the_vms_slices_or_with_no_vm_regions_of_their_own():
    from harness.fleet.testbed import VmInfo
    vms = [VmInfo(f"vtb-cs-vm{i}", i * 64, 64, "serial:x", "") for i in range(2)]
    assert cs.client_slots(vms, 2, 128) == [(0, 64), (64, 64)]
    assert cs.client_slots([], 3, 128) == [(0, 128), (128, 128), (256, 128)]
