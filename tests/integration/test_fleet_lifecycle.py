"""Real libvirtd, real Terraform + provider, real TCG/KVM guests, real fio. Tests run in file order:
bring-up, idempotence, a run, the agent's timeout, and last a SIGKILLed run followed by teardown."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import libvirt
import pytest

from harness.experiments import catalog
from harness.fleet import gc
from harness.libvirt import pausing
from harness.libvirt.agent import AgentError, GuestAgent

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
ROOT = Path(__file__).parents[2]
PREFIX = "vtb-ci-"
STATE = Path("/var/tmp/vtb-ci")
HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, check=True, timeout=600):
    out = subprocess.run([HARNESS, *args, "--config", str(CONFIG)], capture_output=True, text=True,
                         timeout=timeout)
    print(out.stdout, out.stderr)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def domain_ids() -> dict[str, int]:
    conn = libvirt.open("qemu:///system")
    try:
        return {d.name(): d.ID() for d in conn.listAllDomains() if d.name().startswith(PREFIX)}
    finally:
        conn.close()


HAND_OVER = os.environ.get("VTB_TEST_FLEET_HAND_OVER", "")   # tests/conftest.py


def pause_fleet(pause: bool) -> None:
    """The ci fleet's running guests paused (idle TCG guests still take CPU from the lanes), or
    resumed as gc resumes what a killed run left paused."""
    conn = libvirt.open("qemu:///system")
    try:
        if not pause:
            pausing.resume_paused(conn, (PREFIX,))
            return
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_RUNNING):
            if dom.name().startswith(PREFIX):
                dom.suspend()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def fleet(request):
    """The ci fleet, brought up once for the module. The lanes hand it over paused to the alone
    phase when no test of theirs failed, and the alone phase resumes it rather than bringing it up again."""
    if HAND_OVER == "take-over":
        pause_fleet(False)
    else:
        harness("testbed", "down", check=False)  # a previous killed session's leftovers
    harness("testbed", "up")   # keeps a fleet handed over as it is
    yield json.loads((STATE / "ci" / "testbed.json").read_text())
    if HAND_OVER == "hand-over" and request.session.testsfailed == 0:
        pause_fleet(True)
        return
    harness("testbed", "down")
    assert gc.leftovers(PREFIX) == []
    assert not (STATE / "ci").exists()


@pytest.mark.core
@pytest.mark.covers(hosts="local", backends="virtio-blk")
def test_up_provisions_the_fleet(fleet):
    assert [v["name"] for v in fleet["vms"]] == ["vtb-ci-vm0", "vtb-ci-vm1"]
    assert fleet["accel"]["accel"] in ("kvm", "tcg") and fleet["accel"]["reason"]
    device = Path(fleet["device_path"])
    assert device.stat().st_size == 2 * 128 << 20
    assert device.stat().st_blocks * 512 >= device.stat().st_size  # prefilled, not sparse
    with open(device, "rb") as f:
        assert f.read(1 << 20).count(0) < 1 << 16  # random data, not zeros


@pytest.mark.core
def test_gc_removes_a_vtb_named_domain_only_when_it_records_that_vtb_defined_it(fleet):
    """The fleet's domains carry vtb's owner record; a user's domain that merely has a vtb- name is
    listed by gc, not removed (#28: a name prefix alone never makes something vtb's)."""
    from harness.libvirt.libvirt_xml import owner_metadata, owner_of
    conn = libvirt.open("qemu:///system")
    shape = ("<domain type='qemu'><name>{}</name>{}<memory unit='MiB'>32</memory><os><type arch='x86_64'>hvm</type>"
             "</os></domain>")
    try:
        assert {owner_of(conn.lookupByName(v["name"]).XMLDesc(0)) for v in fleet["vms"]} == {"vtb-ci"}
        # booted quiet (main.tf: each console byte is an exit)
        assert all("loglevel=4" in ET.fromstring(conn.lookupByName(v["name"]).XMLDesc(0)).findtext("os/cmdline").split()
                   for v in fleet["vms"])
        users = conn.defineXML(shape.format("vtb-gcx-users", ""))
        users.create()   # running: its QEMU's command line names vtb-gcx-, libvirt's live XML has no record
        conn.defineXML(shape.format("vtb-gcx-ours", owner_metadata("vtb-gcx")))
        said = gc.collect("vtb-gcx-")
        assert "domain vtb-gcx-ours" in said
        assert any(s.startswith("(domain vtb-gcx-users not removed: it has a vtb- name but no record") for s in said)
        assert any(s.startswith("(process ") and "(qemu-system-x86_64) not stopped" in s for s in said), said
        assert [d.name() for d in conn.listAllDomains() if d.name().startswith("vtb-gcx-")] == ["vtb-gcx-users"]
        assert users.isActive()   # its QEMU was not killed by name either
    finally:
        for dom in conn.listAllDomains():
            if dom.name().startswith("vtb-gcx-"):
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
        conn.close()


@pytest.mark.core
def test_a_state_whose_pool_its_host_lost_is_set_aside(fleet, tmp_path):
    """A fleet state that outlived its host (a rebuilt nested host) would fail every refresh: the
    next `up` sets it aside; a live fleet's state is kept."""
    from harness.engine import settings
    from harness.fleet.testbed import Testbed
    stale = Testbed(settings.load(CONFIG, [f"state_dir={tmp_path}", "fleet.name=gone"]))
    stale.dir.mkdir(parents=True)
    (stale.dir / "terraform.tfstate").write_text(json.dumps({"resources": [{"type": "libvirt_pool"}]}))
    stale._drop_stale_state()
    assert not (stale.dir / "terraform.tfstate").exists() and (stale.dir / "terraform.tfstate.stale").exists()
    live = Testbed(settings.load(CONFIG))
    live._drop_stale_state()
    assert (live.dir / "terraform.tfstate").exists()


@pytest.mark.core
def test_doctor_reports_the_host(fleet):
    out = harness("doctor")
    for check in ("libvirtd", "accelerator", "qemu-storage-daemon", "guest image", "terraform-provider-libvirt"):
        assert check in out.stdout
    assert "md (software RAID)" in out.stdout


@pytest.mark.core
def test_up_twice_changes_nothing(fleet):
    before = domain_ids()
    harness("testbed", "up")
    assert domain_ids() == before  # same running domains: nothing recreated


@pytest.mark.core
def test_bad_backend_input_changes_nothing(fleet, tmp_path):
    before = domain_ids()
    out = harness("testbed", "up", "--set", "disk.backend=vhost-user-blk-qsd", "--set", "disk.iothreads=2",
                  check=False)
    assert out.returncode == 2 and "disk.iothreads: not supported by vhost-user-blk-qsd" in out.stderr
    run_dir = STATE / "ci" / "vtb-ci-run"
    run_dir.mkdir(exist_ok=True)
    with socket.socket(socket.AF_UNIX) as squatter:  # another program owns the daemon's socket
        squatter.bind(str(run_dir / "vtb-ci-vm0.vhost.sock"))
        squatter.listen()
        out = harness("testbed", "up", "--set", "disk.backend=vhost-user-blk-qsd", check=False)
    (run_dir / "vtb-ci-vm0.vhost.sock").unlink()
    assert out.returncode == 2 and "vtb-ci-vm0.vhost.sock is already in use" in out.stderr
    assert domain_ids() == before and not any("qemu-storage-daemon" in l for l in gc.leftovers(PREFIX))


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling", workloads="fio")
def test_vm_scaling_writes_a_complete_run(fleet, tmp_path):
    """The main job with the CI config at 1 and 3 VMs (the fleet of 2 grows to 3), shuffled repeats
    (two: the default three add nothing the pipeline does not do with two), every sample with its
    conditions."""
    out = harness("run", "vm-scaling", "--vm-counts", "1,3", "--set", "repeat.count=2", "--set", f"results_dir={tmp_path}")
    assert "growing the fleet to 3" in out.stdout
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "completed", (run / "summary.txt").read_text()
    assert isinstance(manifest["seed"], int)
    raws = sorted(p.relative_to(run).as_posix() for p in (run / "raw").rglob("*.json"))
    expected = [f"raw/{env}-n{n}/{who}{rep}.json" for n in (1, 3) for env in ("physical", "virtual")
                for who in ([f"host-slot{i}" for i in range(n)] if env == "physical" else
                            [f"vtb-ci-vm{i}" for i in range(n)]) for rep in ("", ".r1")]
    assert raws == sorted(expected)
    for raw in raws:
        assert json.loads((run / raw).read_text())["jobs"]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    with open(run / "samples.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    validator = jsonschema.Draft202012Validator(catalog().json_schema())
    for r in rows:
        validator.validate(r)   # every column declared, of its declared type
    example = re.search(r"```python\n(.*?)```", (ROOT / "results" / "README.md").read_text(), re.S).group(1)
    scope: dict = {}
    exec(example.replace("results/RUN/samples.jsonl", str(run / "samples.jsonl")), scope)
    assert list(scope["table"].index) == [1, 3] and (scope["table"]["virtual / physical"] > 0).all()
    for r in rows:
        for key in ("backend", "cache", "aio", "iothreads", "iodepth", "bs", "vm_count", "data_size_bytes",
                    "accel", "host_kernel", "qemu_version", "libvirt_version", "cpu_model", "harness_rev", "seed"):
            assert r[key] not in (None, ""), key
        assert r["status"] == "ok" and r["value"] > 0
        if r["repeat"] != "all":  # the conditions of every measured sample
            for key in ("host_busy_pct", "host_steal_pct", "qemu_cpu_s", "daemon_cpu_s", "settle_wait_s",
                        "host_quiet", "tool_version"):
                assert key in r, key
            if r["env"] == "virtual":
                assert r["qemu_cpu_s"] > 0  # the participating QEMUs' CPU time was measured
    order = [(r["repeat"], r["round_order"], r["point_id"]) for r in rows if r["metric"] == "aggregate_iops"]
    sequence = [pid for *_, pid in sorted(order)]
    assert all(a != b for a, b in zip(sequence, sequence[1:]))  # never a point twice in a row
    ratios = [r for r in rows if r["metric"] == "ve_pe_ratio"]
    assert sorted(r["vm_count"] for r in ratios) == [1, 3]
    assert all("windows_overlap" in r for r in rows if r["metric"] == "aggregate_iops" and r["vm_count"] == 3
               and r["repeat"] != "all")   # fio's own timestamps, on one time line
    assert any(r["metric"] == "ios_per_cpu_s" for r in rows)
    assert (run / "vm-scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "virt/phys" in (run / "summary.txt").read_text()
    # a model over the swept factors (VM count, physical/virtual) predicts a point not measured
    out = harness("predict", str(run), "--metric", "aggregate_iops", "--at", "vm_count=2", "--at", "env=virtual")
    assert "R²" in out.stdout and "predicted aggregate_iops at vm_count=2, env=virtual" in out.stdout


@pytest.mark.extended(why="a second fleet; vm-scaling itself is the main job in make test")
@pytest.mark.covers(experiments="vm-scaling")
def test_vm_scaling_compares_two_backends_each_on_a_fleet_of_its_own(fleet, tmp_path):
    """Two backends at 1 and 2 VMs: a block each on the sweep's own fleet (the user's is left as it
    is), per-backend rows with efficiencies, a verdict per count, and the sweep fleet gone after.
    Not nvme: QEMU 7.2's emulated NVMe stalls at vm-scaling's queue depth under TCG here now and
    then (a point's fio then fails on its bound; see test_backend_sweeps)."""
    before = json.loads((STATE / "ci" / "testbed.json").read_text())["disk"]["backend"]
    harness("run", "vm-scaling", "--backend", "virtio-blk,virtio-scsi", "--vm-counts", "1,2", "--runtime", "2", "--ramp", "0",
            "--set", "repeat.count=2", "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "completed" and manifest["blocks_done"] == ["backend virtio-blk", "backend virtio-scsi"]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    agg = {(r["block"], r["env"], r["vm_count"]) for r in rows if r["metric"] == "aggregate_iops"}
    assert agg == {(b, e, n) for b in ("virtio-blk", "virtio-scsi") for e in ("physical", "virtual") for n in (1, 2)}
    assert {r["backend"] for r in rows if r["env"] == "virtual"} == {"virtio-blk", "virtio-scsi"}
    summary = " ".join((run / "summary.txt").read_text().split())
    assert "efficiency (95% CI)" in summary and "virtio-blk: " in summary and "virtio-scsi: " in summary
    assert "1 VM(s): " in summary and "2 VM(s): " in summary
    assert json.loads((STATE / "ci" / "testbed.json").read_text())["disk"]["backend"] == before
    assert not gc.leftovers("vtb-vs-ci-")


MYSQL_SMALL = ["--set", "repeat.count=1", "--set", "mysql.tables=2", "--set", "mysql.table_size=2000",
               "--threads", "4", "--runtime", "3"]


@pytest.mark.core
@pytest.mark.covers(experiments="mysql", workloads="sysbench")
def test_mysql_physical_and_virtual(fleet, tmp_path):
    harness("run", "mysql", "--tests", "oltp_read_only,oltp_read_write", "--vm-counts", "1,2",
            "--set", f"results_dir={tmp_path}", *MYSQL_SMALL)
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    agg = {(r["point"], r["env"]): r["value"] for r in rows if r["metric"] == "aggregate_tps"}
    assert set(agg) == {(p, e) for p in ("oltp_read_only-t4-p16k-bp0.1-n1", "oltp_read_write-t4-p16k-bp0.1-n1",
                                          "oltp_read_only-t4-p16k-bp0.1-n2") for e in ("physical", "virtual")}
    assert all(v > 0 for v in agg.values())
    two = [r for r in rows if r["point"].endswith("-n2") and r["metric"] == "tps" and r["env"] == "virtual"]
    assert {r["vm"] for r in two} == {"vtb-ci-vm0", "vtb-ci-vm1"}  # both VMs ran at once on the shared device
    for env, name in (("virtual", "vtb-ci-vm0"), ("physical", "host-slot0")):
        raw = run / "raw" / "oltp_read_only-t4-p16k-bp0.1-n1" / env
        assert "transactions:" in (raw / f"{name}.sysbench.txt").read_text()
        assert "innodb_flush_method=O_DIRECT" in (raw / f"{name}.server.cnf").read_text()
        assert "Shutdown complete" in (raw / f"{name}.server.log").read_text()  # stopped cleanly
    assert (run / "mysql-tests.png").exists() and (run / "mysql-vm_counts.png").exists()
    assert_no_database_left()


@pytest.mark.core
@pytest.mark.covers(workloads="db_bench")
def test_db_bench_fills_and_reads_in_a_guest_of_the_fleet(fleet):
    """The db_bench workload at its smallest, in a guest of the ci fleet (a guest is a node like a
    host): a new ext4 on its disk, the loader and a measured readrandom, parsed from its raw output.
    The rocksdb study (arrays, PE and VE, a kill and --resume) is make test-all's. db_bench is in
    the full guest image, which the mysql run before brought the fleet to (up again: kept as it is)."""
    from harness.fleet.testbed import TestbedRecord
    from harness.resources.raid import MKFS
    from harness.workloads import db_bench
    harness("testbed", "up", "--set", "fleet.image=full")
    record = TestbedRecord.from_json((STATE / "ci" / "testbed.json").read_text())
    (out,) = db_bench.in_guest(record.uri, db_bench.DbBenchJob(num=2000), "readrandom", record.vms[0],
                               mkfs=MKFS["ext4"])
    result = db_bench.parse(out.raw)
    assert out.who == "vtb-ci-vm0" and result.benchmark == "readrandom" and result.ops_s > 0
    assert result.version.startswith("rocksdb ") and result.p99_us >= result.p50_us > 0


@pytest.mark.extended(why="a refusal on top of make test's mysql run")
@pytest.mark.covers(experiments="mysql")
def test_mysql_data_that_does_not_fit_fails_clearly(fleet, tmp_path):
    """Every point fails, recorded with why: the run exits 3, which a CI job tells from a regression."""
    out = harness("run", "mysql", "--tests", "oltp_read_only", "--set", f"results_dir={tmp_path}", "--set",
                  "repeat.count=1", "--set", "mysql.tables=1", "--set", "mysql.table_size=1000000", "--runtime", "1",
                  check=False)
    assert out.returncode == 3 and "failed or were not measured: exit status 3" in out.stderr, out.stdout + out.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert {r["env"] for r in rows} == {"physical", "virtual"}
    assert all(r["status"] == "failed" and "does not fit the disk" in r["error"] and r["value"] is None
               for r in rows)
    assert json.loads((run / "run.json").read_text())["status"] == "completed-with-failures"
    assert_no_database_left()


def assert_no_database_left():
    assert subprocess.run(["pgrep", "-x", "mariadbd"], capture_output=True).returncode == 1
    assert "vtb-ci-db" not in Path("/proc/mounts").read_text()
    loops = subprocess.run(["losetup", "--list", "--noheadings", "-O", "BACK-FILE"], capture_output=True,
                           text=True).stdout
    assert "vtb-ci-device" not in loops


@pytest.mark.extended(why="compare's gate is the CI example's in make test")
@pytest.mark.covers(experiments="vm-scaling")
def test_repeats_and_compare(fleet, tmp_path):
    harness("run", "vm-scaling", "--vm-counts", "1", "--set", "repeat.count=2", "--set", "repeat.drop_caches=true",
            "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    agg = [r for r in rows if r["metric"] == "aggregate_iops"]
    assert sorted((r["env"], r["repeat"]) for r in agg) == [("physical", 0), ("physical", 1), ("virtual", 0),
                                                            ("virtual", 1)]
    assert all(r["drop_caches"] is True for r in rows)
    assert (run / "raw" / "virtual-n1" / "vtb-ci-vm0.r1.json").exists()
    assert "±" in (run / "summary.txt").read_text()  # mean ± 95% CI over the repeats
    out = harness("compare", str(run), run.name, "--set", f"results_dir={tmp_path}")
    assert "0 regression(s)" in out.stdout
    assert run.name in harness("runs", "--set", f"results_dir={tmp_path}").stdout

    # The HTML report, rendered for real in headless Chromium: plots decode, no console errors.
    harness("report", run.name, "--set", f"results_dir={tmp_path}")
    page = run / "report.html"
    text = page.read_text()
    assert "Physical against virtual" in text and "data:image/png;base64," in text and "±" in text
    # the verdict first; the summary's tables as HTML tables (summary.json), no terminal text in a <pre>
    assert text.index("Verdict") < text.index("Physical against virtual") and (run / "summary.json").exists()
    assert "<caption>vm-scaling (accel=" in text and text.count("<pre>") == 1   # the configuration's
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0"]
    shot = tmp_path / "report.png"
    out = subprocess.run(["chromium", *flags, f"--user-data-dir={tmp_path / 'c1'}", f"--screenshot={shot}",
                          "--window-size=1200,1600", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.stat().st_size > 20000
    dom = subprocess.run(["chromium", *flags, f"--user-data-dir={tmp_path / 'c2'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert 'data-plots-ok="true"' in dom.stdout
    console_errors = [l for l in (out.stderr + dom.stderr).splitlines() if "CONSOLE" in l]
    assert console_errors == []


@pytest.mark.extended(why="job files' facets are make test's fio-job test")
@pytest.mark.covers(experiments="vm-scaling")
def test_vm_scaling_of_a_shipped_profile_keeps_its_jobs_and_directions_apart(fleet, tmp_path):
    """`vm-scaling --profile` (a job file's path): each job and direction at each VM count is a
    point of its own, its percentiles from the merged histograms of its participants."""
    harness("run", "vm-scaling", "--profile", "oltp-70-30", "--vm-counts", "1,2", "--set", "repeat.count=1",
            "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    agg = {(r["point"], r["env"], r["vm_count"]) for r in rows if r["metric"] == "aggregate_iops"}
    assert agg == {(f"n{n}/oltp-70-30/{d}", e, n) for d in ("read", "write") for e in ("physical", "virtual")
                   for n in (1, 2)}   # named for the count: never pooled with another count's by compare or trend
    assert all(r["status"] == "ok" for r in rows)
    two = [r for r in rows if r["metric"] == "lat_p99" and r["scope"] == "aggregate" and r["vm_count"] == 2]
    assert two and all(r["percentiles_from"] == "the merged histograms of 2" for r in two)
    assert {(r["point"], r["vm_count"]) for r in rows if r["metric"] == "ve_pe_ratio"} == {
        (f"n{n}/oltp-70-30/{d}", n) for d in ("read", "write") for n in (1, 2)}
    assert "oltp-70-30/write" in (run / "summary.txt").read_text()


@pytest.mark.core
def test_agent_timeout_names_the_vm(fleet):
    conn = libvirt.open("qemu:///system")
    try:
        agent = GuestAgent(conn.lookupByName("vtb-ci-vm0"))
        t0 = time.monotonic()
        with pytest.raises(AgentError, match="vtb-ci-vm0.*did not finish within 2 s"):
            agent.exec("/bin/sleep", ["30"], timeout=2)
        assert time.monotonic() - t0 < 10
        assert agent.exec("/bin/echo", ["alive"], timeout=10).stdout == b"alive\n"
    finally:
        conn.close()


STOP_NOTICED_S = 60   # the agent call times out (10 s), the guest is pinged (5 s); more on a busy 2-core CI machine


def vm_scaling_hit_mid_point(tmp_path, hit, noticed_by: str = "") -> tuple[str, float | None, list[dict]]:
    """vm-scaling, 1 VM, 2 repeats of 10 s points; `hit()` runs 6 s into the first virtual point
    (fio running in the guest). Returns what the run printed, how long after the hit it first
    printed `noticed_by`, and the samples' head rows (headline figures and failures)."""
    proc = subprocess.Popen([HARNESS, "run", "vm-scaling", "--config", str(CONFIG), "--set", f"results_dir={tmp_path}",
                             "--vm-counts", "1", "--set", "repeat.count=2", "--runtime", "10", "--allow-failed-points"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said, noticed = [], None
    try:
        for line in proc.stdout:
            said.append(line)
            if "virtual-n1 (repeat 1)" in line:
                time.sleep(6)
                hit()
                t0 = time.monotonic()
                break
        for line in proc.stdout:
            said.append(line)
            if noticed is None and noticed_by and noticed_by in line:
                noticed = time.monotonic() - t0
        assert proc.wait(timeout=900) == 0
    finally:
        print("".join(said))
        proc.kill()
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    return "".join(said), noticed, [r for r in rows if r["metric"] == "aggregate_iops" or r["status"] == "failed"]


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling")
def test_a_stopped_qemu_fails_its_point_then_the_guest_is_restarted_and_the_run_goes_on(fleet, tmp_path):
    """A guest's QEMU stopped with SIGSTOP while fio runs in it: the point's wait ends within its
    bound, the guest is destroyed and booted again, and the points after it are measured."""
    _, noticed, heads = vm_scaling_hit_mid_point(
        tmp_path, lambda: os.kill(int(Path("/run/libvirt/qemu/vtb-ci-vm0.pid").read_text()), signal.SIGSTOP),
        noticed_by="restarting the guest")
    assert noticed is not None and noticed < STOP_NOTICED_S
    hit = [r for r in heads if r["point_id"] == "virtual-n1" and r["repeat"] == 0]
    # the lost repeat is either measured again at once (saying why) or recorded failed with the reason
    assert hit and all("vtb-ci-vm0" in (r.get("retried_after") or r.get("error") or "") for r in hit), hit
    assert sum(r["status"] == "ok" for r in heads if r["point_id"] == "virtual-n1") >= 1   # measured after the restart
    assert sum(r["status"] == "ok" for r in heads if r["point_id"] == "physical-n1") == 2
    assert domain_state("vtb-ci-vm0") == libvirt.VIR_DOMAIN_RUNNING


LIBVIRTD_STOP_S = 40   # how long libvirtd stays stopped: longer than keepalive's 20 s and a connection's 30 s bound


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling")
@pytest.mark.alone   # stops this machine's libvirtd
def test_libvirtd_stopped_mid_point_fails_the_point_within_keepalive_and_the_run_goes_on(fleet, tmp_path):
    """libvirtd stopped with SIGSTOP while fio runs in a guest: it keeps its socket open, so only
    keepalive (on every connection, a local one too) turns the guest-agent call that waits on it
    into an error. Before, that call waited forever. The point fails or is measured again once
    libvirtd answers, and the run completes."""
    pid = int(subprocess.run(["pidof", "libvirtd"], capture_output=True, text=True, check=True).stdout.split()[0])
    resume = threading.Timer(LIBVIRTD_STOP_S, lambda: os.kill(pid, signal.SIGCONT))
    try:
        said, noticed, heads = vm_scaling_hit_mid_point(
            tmp_path, lambda: (os.kill(pid, signal.SIGSTOP), resume.start()), noticed_by="keepalive")
    finally:
        resume.cancel()
        os.kill(pid, signal.SIGCONT)
    assert noticed is not None and noticed < STOP_NOTICED_S, said
    hit = [r for r in heads if r["point_id"] == "virtual-n1" and r["repeat"] == 0]
    assert hit and all("keepalive" in (r.get("retried_after") or r.get("error") or "") for r in hit), hit
    assert sum(r["status"] == "ok" for r in heads if r["point_id"] == "physical-n1") == 2
    assert "Traceback" not in said and domain_state("vtb-ci-vm0") == libvirt.VIR_DOMAIN_RUNNING


def remove_domain(name: str) -> None:
    conn = libvirt.open("qemu:///system")
    try:
        dom = conn.lookupByName(name)
        dom.destroy()
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    finally:
        conn.close()


@pytest.mark.extended(why="a fleet rebuilt mid-run; a stopped QEMU is make test's")
@pytest.mark.covers(experiments="vm-scaling")
def test_a_guest_that_cannot_be_restarted_gets_a_new_fleet_and_the_run_goes_on(fleet, tmp_path):
    """A guest's domain removed while fio runs in it (destroyed and undefined): no restart brings it
    back, so the block's fleet is built anew, once, the lost point is measured again at once on it
    and the rest of the block after it, each sample saying why."""
    said, _, heads = vm_scaling_hit_mid_point(tmp_path, lambda: remove_domain("vtb-ci-vm0"))
    assert "rebuilding the block's fleet: vtb-ci-vm0" in said
    first = [r for r in heads if r["point_id"] == "virtual-n1" and r["repeat"] == 0]   # the same repeat, on the new fleet
    assert first and all(r["status"] == "ok" and "could not be restarted" in r["retried_after"] for r in first), first
    after = [r for r in heads if r["point_id"] == "virtual-n1" and r["status"] == "ok" and r["repeat"] != "all"]
    assert {r["repeat"] for r in after} == {0, 1} and all("vtb-ci-vm0" in r["fleet_rebuilt_after"] for r in after)
    assert domain_state("vtb-ci-vm0") == libvirt.VIR_DOMAIN_RUNNING


def domain_state(name: str) -> int:
    conn = libvirt.open("qemu:///system")
    try:
        return conn.lookupByName(name).state()[0]
    finally:
        conn.close()


def paused_domains() -> list[str]:
    conn = libvirt.open("qemu:///system")
    try:
        return sorted(d.name() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_PAUSED)
                      if d.name().startswith(PREFIX))
    finally:
        conn.close()


@pytest.mark.extended(why="a second fleet on another backend")
@pytest.mark.covers(experiments="vm-scaling")
def test_vm_scaling_with_another_backend_reprovisions(fleet, tmp_path):
    out = harness("run", "vm-scaling", "--backend", "vhost-user-blk-qsd", "--vm-counts", "2", "--set", "repeat.count=1",
                  "--set", f"results_dir={tmp_path}")
    assert "re-provisioning" in out.stdout
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert {r["backend"] for r in rows if r["env"] == "virtual"} == {"vhost-user-blk-qsd"}
    assert all(r["status"] == "ok" for r in rows)
    assert any(r.get("daemon_cpu_s", 0) > 0 for r in rows if r["env"] == "virtual")  # the storage daemons' CPU
    assert {r["vm"] for r in rows if r["env"] == "virtual" and r["scope"] == "vm"} == {"vtb-ci-vm0", "vtb-ci-vm1"}


@pytest.mark.extended(why="make test kills a run and resumes it; this adds Ctrl-C and SIGTERM")
@pytest.mark.covers(experiments="vm-scaling")
def test_ctrl_c_and_sigterm_stop_a_run_and_its_exit_status_says_so(fleet, tmp_path):
    """A script or a CI job tells a stopped run from a finished one: 130 on Ctrl-C, 143 on SIGTERM,
    the run recorded as interrupted, no traceback, and the fleet running again."""
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        results = tmp_path / sig.name
        proc = subprocess.Popen([HARNESS, "run", "vm-scaling", "--config", str(CONFIG), "--set", f"results_dir={results}",
                                 "--vm-counts", "1", "--runtime", "30"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        deadline = time.monotonic() + 300
        while not list(results.glob("*/run.json")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.5)
        time.sleep(5)   # into the first point
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=180)
        print(out)
        assert proc.returncode == code, out
        assert "Traceback" not in out and "interrupted: keeping the points measured so far" in out
        (run,) = [p for p in results.iterdir() if p.is_dir()]
        assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
        assert paused_domains() == []


def measured_runs(run: Path) -> list[tuple[str, int]]:
    """The (point, repeat) pairs whose samples are on disk, once for each time they were measured."""
    if not (run / "samples.jsonl").exists():
        return []
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    return [(r["point_id"], r["repeat"]) for r in rows if r["metric"] == "aggregate_iops" and r["repeat"] != "all"
            and r["status"] == "ok"]


def point_under_way(log: Path) -> tuple[str, int] | None:
    """The (point, repeat) a run's log says is being measured now (its last line starts it)."""
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    m = re.search(r"\s(\S+) \(repeat (\d+)\)$", lines[-1]) if lines else None
    return (m.group(1), int(m.group(2)) - 1) if m else None


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling")
def test_a_run_killed_then_interrupted_is_resumed_to_the_same_points_each_measured_once(fleet, tmp_path):
    """SIGKILL half-way through a point run (its fio running, no samples yet), --resume; Ctrl-C
    that one, --resume again: every point of the run is measured exactly once per repeat, the one
    killed half-way among them, and the run completes in its own folder."""
    args = ["run", "vm-scaling", "--set", f"results_dir={tmp_path}", "--vm-counts", "1,2", "--runtime", "4",
            "--set", "repeat.count=2", "--set", "repeat.seed=3"]
    log = tmp_path / "killed.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([HARNESS, *args, "--config", str(CONFIG)], start_new_session=True, stdout=f, stderr=f)
    deadline = time.monotonic() + 600
    while not (runs := list(tmp_path.glob("*/run.json"))) or len(measured_runs(runs[0].parent)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.3)
    run = runs[0].parent
    # killed half-way through a point run (its fio running, its samples not written)
    while not (started := point_under_way(log)) or started in measured_runs(run):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = measured_runs(run)
    assert started not in before
    assert json.loads((run / "run.json").read_text())["status"] == "running"   # died: the owner is gone
    assert "--resume " + run.name in harness("runs", "--set", f"results_dir={tmp_path}").stdout

    proc = subprocess.Popen([HARNESS, *args, "--resume", run.name, "--config", str(CONFIG)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    while len(measured_runs(run)) < len(before) + 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    print(out)
    assert proc.returncode == 130 and f"{len(set(before))} point runs measured before are kept" in out
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"

    changed = harness(*args, "--set", "repeat.count=3", "--resume", run.name, check=False)
    assert changed.returncode == 2 and "repeat.count: 2 -> 3" in changed.stderr + changed.stdout
    harness(*args, "--resume", run.name)
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "completed" and len(manifest["resumed"]) == 2
    measured = measured_runs(run)
    assert len(measured) == len(set(measured))                        # no point run twice
    assert set(measured) == {(f"{env}-n{n}", r) for n in (1, 2) for env in ("physical", "virtual") for r in (0, 1)}
    assert started in measured                                        # the point run killed half-way, measured again
    assert [d for d in tmp_path.iterdir() if d.is_dir()] == [run]      # in the run's own folder
    assert paused_domains() == []


@pytest.mark.core
@pytest.mark.covers(experiments="vm-scaling")
@pytest.mark.alone   # `harness gc` on this machine
def test_sigkill_mid_run_then_down_leaves_nothing(fleet, tmp_path):
    proc = subprocess.Popen([HARNESS, "run", "vm-scaling", "--config", str(CONFIG), "--set",
                             f"results_dir={tmp_path}", "--runtime", "30"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("*/samples.jsonl")):  # first point done, the next one under way
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.5)
    time.sleep(3)
    while not paused_domains():   # killed while the point's idle VMs are suspended
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left_paused = paused_domains()
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "running"  # never claims completion
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    for point in {r["point_id"] for r in rows}:   # whole points only (one or two: the kill waits for a pause)
        assert {r["metric"] for r in rows if r["scope"] == "aggregate" and r["point_id"] == point} >= {
            "aggregate_iops", "lat_p99"}
    assert not list(run.rglob(".*"))  # no half-written temp files
    listing = harness("runs", "--set", f"results_dir={tmp_path}").stdout
    assert run.name in listing and "died" in listing  # not "running" forever

    # gc without --all keeps the user's own fleet (live state owns it) and says so, and resumes the
    # VMs the killed run left suspended
    before = domain_ids()
    out = harness("gc").stdout
    assert "keeping what live state owns" in out
    assert left_paused and all(f"resumed {vm} (left paused by a run that was killed)" in out for vm in left_paused)
    assert domain_ids() == before and paused_domains() == []

    harness("testbed", "down")
    assert gc.leftovers(PREFIX) == []  # domains, pools, QEMUs and storage daemons
    assert domain_ids() == {}
    assert not (STATE / "ci").exists()
