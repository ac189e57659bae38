"""A local Ceph cluster for real: 2 storage nodes (network namespaces on a bridge, links capped
with tc), all PGs active+clean, fio through librbd on the host with the node links carrying the
traffic, a bad plan refused before anything is made, and teardown after a crash (gc first, then
destroy) that leaves no daemon, namespace, bridge or file. Then the rbd backend: a fleet whose
cluster Terraform makes, vm-scaling on it (fio in the guest through QEMU's librbd, fio's librbd
engine on the host), and `testbed down` leaving nothing."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from run_harness import HARNESS, harness, hook

from harness.fleet import gc
from harness.hosts import LocalHost
from harness.resources.ceph import existing
from harness.resources.ceph.bootstrap import CephError, ceph_session
from harness.resources.ceph.plan import CephPlan, link_utilisation
from harness.workloads import fio

pytestmark = pytest.mark.integration
NAME = "vtb-cit-ceph"
STATE = Path("/var/tmp/vtb-ci")
CONFIG = Path(__file__).parents[1] / "ci.toml"
RBD_FLEET = ["--config", str(CONFIG), "--set", "fleet.name=rbd", "--set", "disk.backend=rbd", "--set", "fleet.vms=1",
             "--set", "ceph.pg_num=16"]


def counters(dev: str) -> dict[str, int]:
    stats = Path("/sys/class/net", dev, "statistics")
    return {k: int((stats / k).read_text()) for k in ("rx_bytes", "tx_bytes")}


@pytest.mark.core
def test_a_bad_plan_is_refused_before_anything_is_made(tmp_path):
    plan = CephPlan(name=NAME, dir=str(STATE / f"{NAME}-bad"), nodes=6, replicas=7)
    (tmp_path / "plan.json").write_text(plan.to_json())
    out = hook("resources", "ceph", "create", str(tmp_path / "plan.json"), check=False)
    assert out.returncode == 2 and "ceph.nodes=6: use 1 to 5" in out.stderr and "Traceback" not in out.stderr
    assert not Path(plan.dir).exists() and not gc.leftovers(NAME)


@pytest.mark.extended(why="a local cluster serves rbd in make test's rbd fleet; this adds link caps and gc by prefix")
def test_a_two_node_cluster_serves_rbd_then_goes_without_a_trace(tmp_path):
    plan = CephPlan(name=NAME, dir=str(STATE / NAME), nodes=2, pg_num=16, link_mbit=200)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    gc.register_state_dir(STATE)   # as a fleet's bring-up does: gc finds the cluster's records there
    try:
        out = hook("resources", "ceph", "create", str(plan_file))
        assert "all PGs active+clean" in out.stdout
        assert "already up" in hook("resources", "ceph", "create", str(plan_file)).stdout   # idempotent
        conf = f"{plan.dir}/ceph.conf"
        tree = json.loads(subprocess.run(["ceph", "-c", conf, "osd", "tree", "-f", "json"], capture_output=True,
                                         text=True, check=True).stdout)
        hosts = {n["name"] for n in tree["nodes"] if n["type"] == "host"}
        assert hosts == {plan.node_name(1), plan.node_name(2)}
        pools = subprocess.run(["ceph", "-c", conf, "osd", "pool", "ls"], capture_output=True, text=True, check=True)
        assert [p for p in pools.stdout.split() if p.startswith(NAME)] == [plan.pool(1), plan.pool(2)]   # one session
        with pytest.raises(CephError, match="Error ENOENT"):   # a command that fails fails the session
            ceph_session(LocalHost(), plan, [["osd", "pool", "set", "vtb-no-such-pool", "size", "2"]], "a missing pool")
        pool = plan.pool(2)
        subprocess.run(["rbd", "-c", conf, "create", f"{pool}/img", "--size", "64"], check=True)
        before, t0 = {k: counters(plan.veth(k)) for k in (1, 2)}, time.monotonic()
        done = subprocess.run(["fio", "--name=w", "--ioengine=rbd", "--clientname=admin", f"--pool={pool}",
                               "--rbdname=img", "--rw=write", "--bs=128k", "--iodepth=8", "--size=32m",
                               "--output-format=json"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "CEPH_CONF": conf})
        assert done.returncode == 0, done.stderr
        seconds = time.monotonic() - t0   # the counters' time base: all of fio's traffic, set-up included
        assert fio.parse(done.stdout).bw_kib_s > 0
        use = [link_utilisation(before[k], counters(plan.veth(k)), seconds, plan.link_mbit) for k in (1, 2)]
        assert all(u["rx_mbit_s"] > 0 for u in use), use   # the writes went over both nodes' links
        assert all(u["utilisation"] <= 1.5 for u in use), use   # and the cap held them (tbf bursts aside)
    finally:
        removed = gc.collect(NAME, LocalHost())   # as after a SIGKILL: by the prefix alone
        print(removed)
        hook("resources", "ceph", "destroy", str(plan_file))
    assert any("ceph-osd" in r for r in removed) and any(r.startswith("namespace") for r in removed)
    assert any(r.startswith("link") and f"({NAME})" in r for r in removed)   # the bridge, by its alias
    assert not gc.leftovers(NAME) and not Path(plan.dir).exists()


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling", backends="rbd")
def test_vm_scaling_on_an_rbd_fleet_then_down_leaves_nothing(tmp_path):
    try:
        up = harness("testbed", "up", *RBD_FLEET)
        assert "fleet ready" in up.stdout
        assert "all PGs active+clean" in (STATE / "logs" / "vtb-rbd-terraform.log").read_text()   # its hook said
        record = json.loads((STATE / "rbd" / "testbed.json").read_text())
        assert record["device_kind"] == "rbd" and record["ceph"]["nodes"] == 2
        assert record["ceph"]["pools"] == [2]   # the fleet's pool only: no other to make and peer
        ceph_dir = Path(record["ceph"]["dir"])   # cephx by default, its keys readable by root only
        assert "auth_client_required = cephx" in (ceph_dir / "ceph.conf").read_text()
        modes = {p: (ceph_dir / p).stat().st_mode & 0o777 for p in (".", "keyring", "ceph.conf", "mon", "osd")}
        assert modes == {".": 0o711, "keyring": 0o600, "ceph.conf": 0o644, "mon": 0o700, "osd": 0o700}, modes
        keyless = subprocess.run(["ceph", "-c", str(ceph_dir / "ceph.conf"), "--keyring", "/dev/null",
                                  "--connect-timeout", "10", "status"], capture_output=True, text=True, timeout=60)
        assert keyless.returncode != 0, keyless.stdout   # a client without the key is refused
        harness("run", "vm-scaling", *RBD_FLEET, "--set", f"results_dir={tmp_path}", "--set", "vm_scaling.vm_counts=[1]",
                "--set", "repeat.count=1")
        (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
        assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
        iops = {r["env"]: r["value"] for r in rows if r["metric"] == "aggregate_iops"}
        assert set(iops) == {"physical", "virtual"} and all(v > 0 for v in iops.values())
        assert {r["backend"] for r in rows if r["env"] == "virtual"} == {"rbd"}
        assert all(r["device"].startswith("rbd:") for r in rows)
        host_job = json.loads((run / "raw" / "physical-n1" / "host-slot0.json").read_text())["jobs"][0]
        assert host_job["job options"]["ioengine"] == "rbd"   # the baseline went through librbd
        assert not list(Path.cwd().glob("vtb-rbd-*")), "fio made a directory named for the pool"
        full_cluster_fails_the_point_at_once(record, tmp_path / "full")
    finally:
        harness("testbed", "down", *RBD_FLEET, check=False)
    assert not gc.leftovers("vtb-rbd-") and not (STATE / "rbd").exists()


FILL_RUNTIME_S = 60   # a point that long is stopped by the watch well before it would end


def full_cluster_fails_the_point_at_once(record: dict, results: Path) -> None:
    """The cluster's OSDs made full while a point writes (its full ratio lowered under what they hold:
    Ceph itself then says HEALTH_ERR full and blocks writes): the point fails with Ceph's words
    within the watch's bound, not at fio's end, and the run ends."""
    ceph = ["ceph", "-c", f"{record['ceph']['dir']}/ceph.conf"]
    proc = subprocess.Popen([HARNESS, "run", "vm-scaling", *RBD_FLEET, "--set", f"results_dir={results}",
                             "--set", "vm_scaling.vm_counts=[1]", "--set", "repeat.count=1", "--rw", "randwrite",
                             "--runtime", str(FILL_RUNTIME_S)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            print(line, end="")
            if "(repeat 1)" in line:   # a point has started
                time.sleep(3)
                for ratio, value in (("nearfull", "0.0005"), ("backfillfull", "0.0008"), ("full", "0.001")):
                    subprocess.run([*ceph, "osd", f"set-{ratio}-ratio", value], check=True, timeout=60)
                filled = time.monotonic()
                break
        out = proc.stdout.read()
        print(out)
        assert proc.wait(timeout=300) == 3   # its points failed: the run says so in its exit status
        ended = time.monotonic() - filled
        health = json.loads(subprocess.run([*ceph, "health", "detail", "--format", "json"], capture_output=True,
                                           check=True, timeout=60).stdout)
        print("ceph health detail:", json.dumps(health))   # tests/fixtures/ceph/health-full.json was recorded so
    finally:
        for ratio, value in (("full", "0.95"), ("backfillfull", "0.9"), ("nearfull", "0.85")):
            subprocess.run([*ceph, "osd", f"set-{ratio}-ratio", value], timeout=60)
        proc.kill()
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all("full osd(s)" in r["error"] for r in failed), rows
    assert ended < FILL_RUNTIME_S + 60, f"the run ended {ended:.0f} s after the cluster filled"
    stopped = [r for r in failed if "the point was stopped" in r["error"]]
    assert stopped and stopped[0]["point_wall_s"] < FILL_RUNTIME_S   # stopped, not waited out
    assert all(r["error"].startswith("not measured: the storage under the fleet says") for r in failed if r not in stopped)


@pytest.mark.extended(why="two clusters' worth of OSDs in a TCG machine; rbd itself is in make test")
@pytest.mark.covers(experiments="ceph-scaling")
def test_ceph_scaling_two_nodes_against_three(tmp_path):
    """The study's method, sized to fit: one cluster of 3 nodes, its 2-node and 3-node pools, one
    point each from the host and in a VM, the links capped so that their use is measured."""
    out = harness("run", "ceph-scaling", "--config", str(CONFIG), "--set", f"results_dir={tmp_path}",
                  "--nodes", "2,3", "--set", 'ceph_scaling.patterns=["write"]', "--set", 'ceph_scaling.bs=["128k"]',
                  "--set", "ceph_scaling.numjobs=[1]", "--set", "ceph_scaling.link_mbit=[200]", "--set",
                  "ceph.pg_num=16", "--set", "ceph_scaling.size_mib=64", "--runtime", "2", "--ramp", "1",
                  "--set", "repeat.count=1")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows if r["status"] != "ok"]
    bw = {(r["ceph_nodes"], r["env"]): r for r in rows if r["metric"] == "aggregate_bw" and r["repeat"] != "all"}
    assert set(bw) == {(n, e) for n in (2, 3) for e in ("physical", "virtual")}
    for r in bw.values():
        assert r["value"] > 0 and r["link_mbit"] == 200 and r["link_n1_rx_mbit_s"] > 0
        assert r["link_peak_utilisation"] is not None and isinstance(r["network_bound"], bool)
    assert bw[(3, "physical")]["link_n3_rx_mbit_s"] is not None and bw[(2, "physical")].get("link_n3_rx_mbit_s") is None
    assert all(bw[(n, "physical")]["link_window"] == "fio's measured window" for n in (2, 3))
    summary = (run / "summary.txt").read_text()
    assert "regression per node count" in summary and "Pearson" in summary
    for png in ("ceph-scaling-nodes.png", "ceph-scaling-clients.png"):
        assert (run / png).read_bytes()[:4] == b"\x89PNG"
    assert "tearing down the sweep fleet and its cluster" in out.stdout
    assert not gc.leftovers("vtb-cs-ci-") and not Path(STATE, "cs-ci").exists()


@pytest.mark.extended(why="a second local cluster; rbd itself is in make test")
@pytest.mark.covers(backends="rbd")
def test_an_existing_cluster_with_cephx_where_vtb_touches_only_its_own_image(tmp_path):
    """ceph.mode = "existing", as a user runs it: a cluster vtb did not make for this fleet (made
    here with cephx on, standing in for yours), a client whose key allows rbd on one pool only,
    and another tenant's images in that pool, which vtb must leave as they are."""
    plan = CephPlan(name=f"{NAME}-theirs", dir=str(STATE / f"{NAME}-theirs"), nodes=1, replicas=1, pg_num=8, cephx=True)
    plan_file, keyring = tmp_path / "plan.json", tmp_path / "tenant.keyring"
    plan_file.write_text(plan.to_json())
    conf, pool = f"{plan.dir}/ceph.conf", plan.pool(1)
    fleet = ["--config", str(CONFIG), "--set", "fleet.name=cexi", "--set", "disk.backend=rbd", "--set", "fleet.vms=1",
             "--set", "ceph.mode=existing", "--set", f"ceph.conf={conf}", "--set", f"ceph.keyring={keyring}",
             "--set", "ceph.client=tenant", "--set", f"ceph.pool={pool}"]

    def images() -> set[str]:
        return set(subprocess.run(["rbd", "-c", conf, "ls", pool], capture_output=True, text=True,
                                  check=True).stdout.split())
    try:
        hook("resources", "ceph", "create", str(plan_file))
        keyring.write_text(subprocess.run(["ceph", "-c", conf, "auth", "get-or-create", "client.tenant", "mon",
                                           "profile rbd", "osd", f"profile rbd pool={pool}"], capture_output=True,
                                          text=True, check=True).stdout)
        ours = f"vtb-cexi-{existing.installation(STATE)}-device"   # the fleet's name, and this installation's
        for image in ("theirs", ours):   # the second has the fleet's image name, but not its tag
            subprocess.run(["rbd", "-c", conf, "create", f"{pool}/{image}", "--size", "16"], check=True)
        refused = harness("testbed", "up", *fleet, check=False)
        assert refused.returncode != 0 and "that this fleet did not make" in refused.stdout + refused.stderr
        assert images() == {"theirs", ours}   # both left as they were
        subprocess.run(["rbd", "-c", conf, "rm", "--no-progress", f"{pool}/{ours}"], check=True)

        harness("testbed", "up", *fleet)
        assert json.loads((STATE / "cexi" / "testbed.json").read_text())["ceph"]["client"] == "tenant"
        harness("run", "vm-scaling", *fleet, "--set", f"results_dir={tmp_path}", "--set", "vm_scaling.vm_counts=[1]",
                "--set", "repeat.count=1")
        (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
        assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
        assert {r["env"] for r in rows if r["metric"] == "aggregate_iops" and r["value"] > 0} == {"physical", "virtual"}
        host_job = json.loads((run / "raw" / "physical-n1" / "host-slot0.json").read_text())["jobs"][0]
        assert host_job["job options"]["clientname"] == "tenant"   # the baseline used the tenant's key too
        harness("testbed", "down", *fleet)
        assert images() == {"theirs"}

        harness("testbed", "up", *fleet)   # then as after a crash: no Terraform state, only the fleet's record
        (STATE / "cexi" / "terraform.tfstate").unlink()
        assert any("rbd image" in r for r in gc.collect("vtb-cexi-", LocalHost()))
        assert images() == {"theirs"}
    finally:
        harness("testbed", "down", *fleet, check=False)
        hook("resources", "ceph", "destroy", str(plan_file))
    assert not gc.leftovers("vtb-cexi-") and not gc.leftovers(plan.name)


@pytest.mark.extended(why="takes Ceph's packages off this machine, then apt installs them again")
@pytest.mark.covers(experiments="vm-scaling", backends="rbd")
def test_a_fleet_on_ceph_on_a_host_without_ceph_installs_it_on_first_use(tmp_path):
    """`make testbed up` installs the main job's packages only: the first fleet that needs Ceph (on
    the rbd backend, its cluster made here) installs Ceph's daemons and client, saying so; a run measures on it."""
    from harness.hosts import packages
    from harness.resources.ceph.bootstrap import PACKAGES
    ceph = [*PACKAGES, "qemu-block-extra"]
    subprocess.run(["apt-get", "remove", "-y", "-qq", *PACKAGES], check=True, timeout=600,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    try:
        assert set(packages.missing(LocalHost(), ceph)) == set(PACKAGES)
        up = harness("testbed", "up", *RBD_FLEET)
        said = up.stdout + up.stderr
        assert "installing ceph-common ceph-mgr ceph-mon ceph-osd on this machine: a Ceph cluster under the fleet" in said, \
            said[-3000:]
        assert packages.missing(LocalHost(), ceph) == []
        harness("run", "vm-scaling", *RBD_FLEET, "--set", f"results_dir={tmp_path}", "--set", "vm_scaling.vm_counts=[1]",
                "--set", "repeat.count=1")
        (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
        assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    finally:
        harness("testbed", "down", *RBD_FLEET, check=False)
        packages.ensure(LocalHost(), ceph, "the test's clean-up")   # the host as it was, whatever failed
    assert not gc.leftovers("vtb-rbd-") and not (STATE / "rbd").exists()
