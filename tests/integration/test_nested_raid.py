"""The nested host, for real: an L1 VM under this machine's accelerator with 4 emulated NVMe
drives, md arrays in it (RAID 0, 1, 5, 6 and 10 through Terraform's hooks), a short raid-levels
run with PE and one L2 VM under KVM, every safety refusal on its drives, and a teardown that
leaves no array and no L1 running."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import libvirt
import pytest

from harness.engine import settings
from harness.hosts.nested import DOMAIN, NestedHost
from harness.libvirt.libvirt_conn import connect
from harness.resources import raid

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "nested.toml"
STATE = Path("/var/tmp/vtb-ci-nested")
HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, check=True, timeout=1800):
    out = subprocess.run([HARNESS, *args, "--config", str(CONFIG)], capture_output=True, text=True, timeout=timeout)
    print(out.stdout, out.stderr)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def l0_domains() -> list[str]:
    conn = libvirt.open("qemu:///system")
    try:
        return [d.name() for d in conn.listAllDomains() if d.isActive()]
    finally:
        conn.close()


FIT_TO_HAND_OVER = []   # the two ssh hosts' config, once a test left them clean (passed)


@pytest.fixture(scope="module")
def nested_hosts_removed_after():
    """Every nested host removed once the module ends (the tests that boot hosts of their own,
    two_ssh_hosts, need no other), but for those the lanes of the extended tier hand over to its
    alone phase (tests/conftest.py), when the test that used them last passed."""
    yield
    if os.environ.get("VTB_TEST_HAND_OVER") == "hand-over" and FIT_TO_HAND_OVER:
        return
    harness("host", "nested", "down")
    assert not [d for d in l0_domains() if d.startswith(DOMAIN)]
    assert not (STATE / "nested").exists()


@pytest.fixture(scope="module")
def nested_host(nested_hosts_removed_after):
    harness("host", "nested", "down", check=False)
    harness("host", "nested", "up")


@pytest.fixture
def host(nested_host, a_test_of_this_file_failed):
    """The nested host, booted anew when an earlier test left it stopped or hung (`host nested up`
    keeps one that answers), or after a test failed: an L1 can still answer with its KVM locked up
    (seen: a soft lockup in the L1 as an L2 started), and every later L2 would then run under TCG in
    TCG. So that one L1 lost fails one test, not every test after it."""
    if a_test_of_this_file_failed:
        harness("host", "nested", "down")
    harness("host", "nested", "up")
    return NestedHost.load(STATE / "nested")


def plan(host, **kw) -> raid.RaidPlan:
    d = host.record.drives
    return raid.RaidPlan(**{"name": "vtb-cin-t", "level": 0, "members": d[:2], "chunk_kib": 64, "allow": d,
                            "host": host.descriptor(), **kw})


@pytest.mark.core
@pytest.mark.covers(hosts="nested")
def test_nested_host_has_md_kvm_and_its_drives(host):
    assert host.record.drives == [f"/dev/nvme{i}n1" for i in range(4)]
    assert raid.md_support(host) is None
    assert host.run(["test", "-c", "/dev/kvm"], check=False).returncode == 0
    assert host.uri.startswith("qemu+ssh://root@127.0.0.1:")   # libvirtd in the L1, through its sshd
    connect(host.uri).close()
    listening = host.run(["ss", "-Hltn"]).stdout.decode()
    assert ":16509" not in listening and ":22 " in listening, listening   # no TCP door to libvirtd
    keyless = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                              "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes", "-i", "/dev/null", "-p",
                              str(host.record.ssh_port), "root@127.0.0.1", "true"], capture_output=True, timeout=60)
    assert keyless.returncode != 0   # without the testbed's key, no way in
    from harness.cli import doctor_checks as doctor
    results = doctor.checks(settings.load(CONFIG))  # the nested host is checked from inside too
    assert ("the nested host: md (software RAID)", True, "available") in results
    assert ("the nested host: /dev/kvm", True, "present") in results



@pytest.mark.core
def test_a_job_that_fooled_the_gate_reaches_only_its_drive_in_the_nested_host(host):
    """The sandbox there (its image has bubblewrap), with the gate bypassed: a file outside and
    another drive fail; the job on its own drive runs; its tasks stay under their ceiling."""
    from harness.common import paths
    from harness.libvirt.agent import PATH
    from harness.workloads import run_runner
    from harness.workloads.fio import GUEST_RUNNER, FioError
    drive, other = host.record.drives[:2]

    def bare(job: str) -> str:
        return run_runner(host, GUEST_RUNNER, f"path:{drive}", env={"PATH": PATH}, input=job.encode(), timeout=120,
                          tool="fio", error=FioError)
    out = bare("[t]\nfilename=${FIO_FILENAME}\nrw=write\nsize=64k\n")
    assert json.loads(out[out.index("{"):])["jobs"][0]["write"]["io_bytes"] == 64 << 10
    for job in ("filename=/var/tmp/vtb-escape\nrw=write\nsize=64k\n", f"filename={other}\nrw=write\nsize=64k\n"):
        with pytest.raises(FioError, match="Read-only file system"):
            bare(f"[t]\n{job}")
    assert host.run(["test", "-e", "/var/tmp/vtb-escape"], check=False).returncode == 1
    # the nested host mounts no cgroups: its sandboxes run without, and say so; with cgroup v2
    # mounted (a host with systemd), the sandbox's cgroup holds its tasks under their ceiling, and goes
    script = (paths.GUEST_AGENTS / "confine.sh").read_text() + \
        'confined /dev/null "" sh -c "for i in \\$(seq 16); do sleep 1 & done; wait"'
    tasks = ["env", "VTB_CONFINE=1", "VTB_CONFINE_TASKS=8", "sh", "-c", script]
    bare = host.run(tasks, timeout=60)
    assert bare.stderr == b"vtb: this sandbox has no cgroup here (no writable cgroup v1 memory hierarchy)\n"
    host.run(["mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"])
    try:
        held = host.run(tasks, check=False, timeout=60)
        assert b"fork" in held.stderr.lower() and b"vtb:" not in held.stderr, held.stderr
        assert host.run(["find", "/sys/fs/cgroup/vtb-confine", "-mindepth", "1", "-type", "d"]).stdout == b""
    finally:
        host.run(["umount", "/sys/fs/cgroup"], check=False)


@pytest.mark.core
def test_a_nested_host_taken_down_and_up_again_starts_from_its_saved_state(host, tmp_path):
    """An L1 with virtio drives (QEMU's emulated NVMe cannot be saved: an L1 with NVMe drives
    boots, 30 s here): its first up saved its booted state (here or in an earlier suite), and the
    next one restores it, its drives new, its clock this machine's, the testbed's key let in again."""
    from harness.resources import nested_saves
    config = tmp_path / "virtio.toml"
    config.write_text(CONFIG.read_text().replace('state_dir = "/var/tmp/vtb-ci-nested"',
                                                 'state_dir = "/var/tmp/vtb-ci-nested-saved"')
                      .replace("drive_mib = 320", 'drive_mib = 64\ndrive_model = "virtio-blk"'))
    harness("host", "nested", "down")   # its domain's name is the one this L1 takes
    try:
        subprocess.run([HARNESS, "host", "nested", "up", "--config", str(config)], check=True, timeout=600)
        subprocess.run([HARNESS, "host", "nested", "down", "--config", str(config)], check=True, timeout=600)
        t0 = time.monotonic()
        subprocess.run([HARNESS, "host", "nested", "up", "--config", str(config)], check=True, timeout=600)
        again = NestedHost.load(Path("/var/tmp/vtb-ci-nested-saved/nested"))
        saved = [json.loads(p.read_text()) for p in nested_saves.SAVES.glob("*/saved.json")]
        print(f"restored: up in {time.monotonic() - t0:.1f} s; booted then: {[s['booted_s'] for s in saved]} s")
        assert again.record.started == "restored", again.record
        assert again.record.drives == ["/dev/vdb", "/dev/vdc", "/dev/vdd", "/dev/vde"]
        drive = Path("/var/tmp/vtb-ci-nested-saved/nested/drives/vtb-nested-drive0.raw").read_bytes()[:4096]
        assert again.run(["head", "-c", "4096", "/dev/vdb"]).stdout == drive   # the new drive, not a cached old one
        connect(again.uri).close()   # through its sshd, with the key let in after the restore
        assert abs(float(again.run(["date", "+%s.%N"]).stdout) - time.time()) < 30
    finally:
        subprocess.run([HARNESS, "host", "nested", "down", "--config", str(config)], timeout=600)


@pytest.mark.core
def test_this_host_without_md_is_told_to_use_the_nested_host():
    from harness.hosts import LocalHost
    if Path("/proc/mdstat").exists():
        pytest.skip("this machine has md")
    assert "host.kind=nested" in raid.md_support(LocalHost())


@pytest.mark.core
def test_every_refusal_names_the_device_and_the_reason(host):
    d = host.record.drives
    with pytest.raises(raid.RaidError, match=f"{d[3]}: not on the allowlist"):
        raid.create(host, plan(host, members=[d[0], d[3]], allow=d[:3]))
    with pytest.raises(raid.RaidError, match="RAID 5 needs at least 3 member devices, got 2"):
        raid.create(host, plan(host, level=5))
    mirror = plan(host, level=1, members=[d[1], d[2]], wipe=True, wait_resync=False)   # not measured: no resync wait
    host.run(["mkfs.ext4", "-q", "-F", d[2]])
    try:
        with pytest.raises(raid.RaidError, match=f"{d[2]}: it carries a ext4 signature .* set raid.wipe=true"):
            raid.create(host, plan(host, members=[d[1], d[2]]))
        host.run(["mount", d[2], "/mnt"])
        try:  # mounted: refused even with wipe
            with pytest.raises(raid.RaidError, match=f"{d[2]}: /dev/nvme2n1 is mounted on /mnt"):
                raid.create(host, plan(host, members=[d[1], d[2]], wipe=True))
        finally:
            host.run(["umount", "/mnt"])
        # wipe: the signature refusal is the only one the user may override (RAID 1: the level no
        # run in this module builds)
        assert "created RAID 1" in raid.create(host, mirror)
        assert "already assembled" in raid.create(host, mirror)
        with pytest.raises(raid.RaidError, match=f"{d[1]}: it is held by md"):  # a member of another array
            raid.create(host, plan(host, name="vtb-cin-other", members=[d[1], d[0]]))
    finally:
        raid.destroy(host, mirror)
    assert "nothing to do" in raid.destroy(host, mirror)
    assert host.run(["wipefs", "--no-act", "--noheadings", d[1]]).stdout.strip() == b""  # superblock zeroed
    with pytest.raises(raid.RaidError, match="system disk"):
        raid.create(host, plan(host, members=["/dev/vda", d[0]], allow=[*d, "/dev/vda"]))
    # fleet.device is checked in the nested host, where the fleet would use it, before anything is made
    out = harness("testbed", "up", "--set", "fleet.device=/dev/vda", check=False)
    assert out.returncode == 2 and "fleet.device /dev/vda refused: not on that host's allowlist" in out.stderr
    host.run(["mkfs.ext4", "-q", "-F", d[0]])
    try:
        out = harness("testbed", "up", "--set", f"fleet.device={d[0]}", check=False)
        assert out.returncode == 2 and f"fleet.device {d[0]} refused: it carries a ext4 signature" in out.stderr
        assert "set fleet.wipe=true only if its data may be destroyed" in out.stderr
    finally:
        host.run(["wipefs", "-a", "-q", d[0]])


@pytest.mark.extended(why="boots a 4-drive nested host in the alone phase; gc after SIGKILL is make test's")
@pytest.mark.alone   # `harness gc` collects on this machine too
def test_gc_reaches_into_the_nested_host(host):
    """A leftover inside the L1 (here a pool a killed run left behind) is found by `harness gc`
    through the L1's libvirt and commands, like one on this machine; the L1 itself is kept."""
    from harness.fleet import gc
    gc.register_state_dir(STATE)   # as the killed run did: gc takes only pools whose folder is in a known state dir
    host.run(["mkdir", "-p", f"{STATE}/vtb-gctest"])
    conn = connect(host.uri)
    try:
        conn.storagePoolDefineXML("<pool type='dir'><name>vtb-gctest</name>"
                                  f"<target><path>{STATE}/vtb-gctest</path></target></pool>")
    finally:
        conn.close()
    assert gc.leftovers("vtb-gctest", host) == ["pool vtb-gctest"]
    out = harness("gc")
    assert "removed pool vtb-gctest and its volumes (in the nested host)" in out.stdout
    assert gc.leftovers("vtb-gctest", host) == []
    assert DOMAIN in l0_domains()


@pytest.mark.extended(why="boots a 4-drive nested host in the alone phase")
@pytest.mark.alone   # `harness gc` collects on this machine too
def test_gc_stops_an_array_a_killed_run_left_by_its_plan(host):
    """A run killed after its array was made leaves the array in the L1 and its plan here (written
    before the array): `harness gc` finds it by the plan, stops it and zeroes only its members."""
    from harness.fleet import gc
    array = plan(host, name="vtb-gcarray-raid")
    fleet = STATE / "gcarray"   # a dead sweep fleet's folder: a plan, no Terraform state
    fleet.mkdir(parents=True, exist_ok=True)
    (fleet / "raid-0.json").write_text(array.to_json())
    gc.register_state_dir(STATE)   # as a run does
    raid.create(host, array)
    assert b"vtb-gcarray-raid" in host.run(["mdadm", "--detail", "--scan"]).stdout
    out = harness("gc")
    assert f"removed array {array.device}: stopped, zeroed the superblock" in out.stdout, out.stdout
    assert b"vtb-gcarray-raid" not in host.run(["mdadm", "--detail", "--scan"]).stdout
    assert not (fleet / "raid-0.json").exists()
    fleet.rmdir()


@pytest.mark.core
@pytest.mark.covers(hosts="nested", experiments="vm-scaling")
def test_the_main_job_on_a_fleet_on_a_raid10_array_with_a_filesystem(host, tmp_path):
    """testbed up puts the fleet on an md array with ext4 in the L1; a guest is a node like a host;
    vm-scaling's physical baseline is host fio in the L1 on the array's data file, the VMs are L2
    guests whose disks are slices of it; down leaves no array, mount or loop."""
    from harness.libvirt.agent import guests
    from harness.workloads import fio
    from harness.workloads.fio import FioJob
    extra = ["--set", "raid.level=10", "--set", "raid.filesystem=ext4", "--set", "fleet.vms=1",
             "--set", "fleet.disk_size_mib=64"]   # one L2: two at once in a TCG L1 is vm-scaling over ssh hosts' (test-all)
    try:
        harness("testbed", "up", *extra)
        host = NestedHost.load(STATE / "nested")   # a new L1 if the first hung as the L2 started (up rebuilds it)
        rec = json.loads((STATE / "cin" / "testbed.json").read_text())
        assert rec["raid"]["level"] == 10 and rec["device_path"] == "/dev/vtb-cin-raid-data"
        assert rec["accel"]["accel"] == "kvm"
        assert b"raid10" in host.run(["cat", "/proc/mdstat"]).stdout
        vm = rec["vms"][0]
        with guests(host.uri, [vm["name"]]) as (guest,):   # a guest is a node like a host
            raw = fio.run(guest, FioJob(rw="randwrite", iodepth=1, runtime_s=1, ramp_s=0), locator=vm["locator"],
                          size=vm["slice_bytes"])
        assert fio.parse(raw).iops > 0

        harness("run", "vm-scaling", *extra, "--vm-counts", "1", "--runtime", "2", "--ramp", "0", "--iodepth", "4",
                "--set", f"results_dir={tmp_path}")
        (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        manifest = json.loads((run / "run.json").read_text())
        assert manifest["status"] == "completed", (run / "summary.txt").read_text()
        assert manifest["environment"]["host"] == "nested" and manifest["testbed"]["raid"]["level"] == 10
        rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
        heads = [r for r in rows if r["metric"] == "aggregate_iops" and r["repeat"] != "all"]
        assert {(r["env"], r["vm_count"]) for r in heads if r["value"] > 0} == {("physical", 1), ("virtual", 1)}
        assert all(r["qemu_cpu_s"] > 0 for r in heads if r["env"] == "virtual")
    finally:
        harness("testbed", "down", *extra)
    host = NestedHost.load(STATE / "nested")
    assert b"md" not in host.run(["sh", "-c", "grep ^md /proc/mdstat || true"]).stdout
    assert b"raid-mnt" not in host.run(["cat", "/proc/mounts"]).stdout
    assert host.run(["losetup", "--list", "--noheadings"]).stdout.strip() == b""
    assert not (STATE / "cin").exists()


@pytest.mark.extended(why="a study in the nested host: an L2 per setup under KVM in a TCG L1")
@pytest.mark.covers(experiments="raid-levels")
def test_raid_levels_pe_and_ve_on_four_nvme_drives(host, tmp_path):
    """raid-levels in the nested host: host fio in the L1 (PE) and fio in an L2 guest on the sweep's
    fleet (VE), on the first drive alone and on a RAID 5 of all four; the sweep fleet and its arrays
    go at the end. (The other sweeps over drives, latency's among them, share this engine and run
    on this machine in test_backend_sweeps.)"""
    out = harness("run", "raid-levels", "--set", f"results_dir={tmp_path}")
    host = NestedHost.load(STATE / "nested")   # a new one when the L1 hung during the run and was rebuilt
    (run_dir,) = tmp_path.glob("*-raid-levels-*")
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "completed", manifest
    env = manifest["environment"]
    assert env["host"] == "nested" and env["l0_accel"] in ("kvm", "tcg") and env["accel"] == "kvm"
    rows = [json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()]
    bw = {(r["setup"], r["point"], r["env"]) for r in rows if r["metric"] == "bw" and r["status"] == "ok"}
    setups = ["single", "raid5-n4-c512k"]   # RAID 0, 1, 6 and 10: other tests build them
    assert bw == {(s, "write-direct", e) for s in setups for e in ("physical", "virtual")}
    assert {r["device"] for r in rows if r["metric"] == "bw" and r["setup"] == "single"} == {host.record.drives[0]}
    overhead = [r for r in rows if r["metric"] == "stack_overhead"]
    assert len(overhead) == 2
    for r in rows:  # the full configuration and environment on every sample
        assert {"raid_level", "members", "chunk_kib", "filesystem", "backend", "cache", "aio", "iothreads",
                "iodepth", "bs", "vm_count", "accel", "l0_accel", "host_kernel", "host_cmdline", "qemu_version"} <= r.keys()
    assert (run_dir / "raid-levels.png").stat().st_size > 10_000
    assert "raid5-n4-c512k" in (run_dir / "summary.txt").read_text()
    # The L2 guest's console (read inside the L1), and the L1's console, kernel log and libvirtd log
    # stay with the run.
    consoles = sorted(p.name for p in (run_dir / "consoles").glob("*.log"))
    assert {"vtb-rs-cin-vm0.log", "nested-host-console.log", "nested-host-dmesg.log",
            "nested-host-libvirtd.log"} <= set(consoles), consoles
    assert "(console log not readable" not in (run_dir / "consoles" / "vtb-rs-cin-vm0.log").read_text()
    assert "Linux version" in (run_dir / "consoles" / "nested-host-dmesg.log").read_text()
    # The sweep tore down its fleet and arrays: nothing left in the nested host.
    assert b"md" not in host.run(["sh", "-c", "grep ^md /proc/mdstat || true"]).stdout
    conn = connect(host.uri)
    try:
        assert [d.name() for d in conn.listAllDomains()] == []
    finally:
        conn.close()
    assert "tearing down the sweep fleet" in out.stdout


@pytest.mark.extended(why="a study in the nested host: db_bench on arrays in a TCG L1; the db_bench workload and a kill "
                        "and --resume are make test's (in a ci fleet guest, and on the ci fleet)")
@pytest.mark.covers(experiments="rocksdb")
def test_rocksdb_on_an_array_and_one_member_killed_in_its_second_block_then_resumed(host, tmp_path):
    """db_bench from the images' rocksdb-tools on the L1's array and on one member, SIGKILLed while
    the array's block runs, then --resume: the block measured before is kept, the array's is made
    again, and each (point, repeat) is measured once. On the host only: a workload runs in a guest
    through the same node interface (fio and sysbench do so in the other tests), and a fleet on an
    array here is raid-levels' and the main job's."""
    args = ["run", "rocksdb", "--pe-only", "--set", "rocksdb.levels=[0]",
            "--set", "rocksdb.benchmarks=fillrandom,readrandom", "--num", "2000", "--set", f"results_dir={tmp_path}",
            "--config", str(CONFIG)]
    log = tmp_path.parent / f"{tmp_path.name}.killed.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([HARNESS, *args], start_new_session=True, stdout=f, stderr=f)
    deadline = time.monotonic() + 900

    def measured() -> list[tuple[str, int]]:
        rows = [json.loads(l) for p in tmp_path.glob("*/samples.jsonl") for l in p.read_text().splitlines()]
        return [(r["point_id"], r["repeat"]) for r in rows if r["metric"] == "ops" and r["repeat"] != "all"
                and r["status"] == "ok"]
    while not any(pid.startswith("raid0") for pid, _ in measured()):   # the array's block under way
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["blocks_done"] == ["single"]
    out = harness(*args[:-2], "--resume", run.name)
    assert "[1/2] single: measured before" in out.stdout
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    twice = measured()
    assert len(twice) == len(set(twice)) == 4                       # 2 setups x 2 benchmarks, once each
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    ops = {(r["setup"], r["benchmark"], r["env"]) for r in rows if r["metric"] == "ops" and r["status"] == "ok"
           and r["value"] > 0 and r["repeat"] != "all"}
    assert ops == {(s, b, "physical") for s in ("single", "raid0-n4-c512k") for b in ("fillrandom", "readrandom")}
    raws = list((run / "raw").rglob("*.txt"))
    assert raws and all("db_bench version" in p.read_text() for p in raws)
    assert "readrandom" in (run / "summary.txt").read_text() and (run / "rocksdb.png").stat().st_size > 10_000


@pytest.mark.core
@pytest.mark.covers(hosts="ssh", experiments="vm-scaling", backends="virtio-blk")
def test_the_nested_host_driven_as_an_ssh_host_measures_from_the_host_and_a_vm(host, tmp_path):
    """The ssh host kind at its smallest: the nested host this module already has, driven over ssh as a
    user's own server is (`host nested up --count 1` keeps it and writes that config), one VM on a
    slice of its first drive, a PE and a VE point at QD1 (QEMU 7.2's emulated NVMe stalls above it
    under TCG), then `testbed down` leaves no domain there. Two ssh hosts, Ceph over them and a kill
    there are make test-all's (test_ceph_scaling_over_two_ssh_hosts, test_vm_scaling_over_two_ssh_hosts_...)."""
    ssh_config = harness("host", "nested", "up", "--count", "1").stdout.strip().splitlines()[-1]
    over_ssh = ["--config", ssh_config, "--set", "fleet.vms=1", "--set", "repeat.count=1", "--set", "settle.max_wait_s=1"]
    try:
        done = subprocess.run([HARNESS, "run", "vm-scaling", *over_ssh, "--vm-counts", "1", "--runtime", "2", "--ramp", "0",
                               "--iodepth", "1", "--set", f"results_dir={tmp_path}"], capture_output=True, text=True,
                              timeout=900)
        print(done.stdout, done.stderr)
        assert done.returncode == 0, done.stdout + done.stderr
        (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
        manifest = json.loads((run / "run.json").read_text())
        assert manifest["status"] == "completed" and manifest["environment"]["host"] == "nested0"
        assert manifest["environment"]["accel"] == "kvm"   # the L2 under KVM in the L1, as on a user's server
        rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
        measured = {(r["env"], r["host"]) for r in rows if r["metric"] == "iops" and r["status"] == "ok" and r["value"] > 0}
        assert measured == {("physical", "nested0"), ("virtual", "nested0")}, measured
    finally:
        down = subprocess.run([HARNESS, "testbed", "down", *over_ssh], capture_output=True, text=True, timeout=600)
        print(down.stdout, down.stderr)
    assert down.returncode == 0, down.stdout + down.stderr
    conn = connect(NestedHost.load(STATE / "nested").uri)
    try:
        assert [d.name() for d in conn.listAllDomains()] == []
    finally:
        conn.close()


@pytest.mark.extended(why="a study in the nested host: the RAID sweep's engine is raid-levels', here with chunks")
@pytest.mark.covers(experiments="stripe-size")
def test_stripe_size_two_chunks_of_a_raid0_on_the_host(host, tmp_path):
    """stripe-size in the L1 at its smallest: one member alone and a RAID 0 of two chunk sizes, host
    fio only (its VE path is raid-levels'); each chunk a setup of its own, against the RAID model."""
    harness("run", "stripe-size", "--pe-only", "--set", "stripe_size.levels=[0]", "--set", "stripe_size.chunks_kib=[64,512]",
            "--set", 'stripe_size.patterns=["read"]', "--set", "stripe_size.numjobs=1", "--set", "stripe_size.size_mib=32",
            "--runtime", "2", "--ramp", "0", "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    bw = {(r["setup"], r["env"]) for r in rows if r["metric"] == "bw" and r["status"] == "ok" and r["value"] > 0}
    assert bw == {(s, "physical") for s in ("single", "raid0-n4-c64k", "raid0-n4-c512k")}, bw
    assert b"md" not in host.run(["sh", "-c", "grep ^md /proc/mdstat || true"]).stdout


@pytest.mark.extended(why="a study in the nested host")
@pytest.mark.covers(experiments="mysql-raid", workloads="sysbench")
def test_mysql_raid_on_raid6_and_one_member(host, tmp_path):
    """sysbench on MariaDB in the L1, on a loop over the VM's region of the array, for one member
    alone and a RAID 6 (the level no other test builds); no server, mount or loop is left behind.
    On the host only: MariaDB in a guest is test_fleet_lifecycle's, a fleet on an array here is
    the other runs'."""
    harness("run", "mysql-raid", "--pe-only", "--set", "mysql_raid.levels=[6]", "--threads", "2", "--runtime", "2",
            "--set", "mysql_raid.tables=1", "--set", "mysql_raid.table_size=1000", "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    tps = {(r["setup"], r["env"]) for r in rows if r["metric"] == "aggregate_tps" and r["status"] == "ok"
           and r["value"] > 0 and r["repeat"] != "all"}
    assert tps == {(s, "physical") for s in ("single", "raid6-n4-c512k")}
    assert all(r["stands_in_for"] == "TPC-C" and r["raid_level"] in ("single", 6) for r in rows if r["repeat"] != "all")
    assert list((run / "raw").rglob("*.server.log"))   # each server's log kept with its output
    summary = (run / "summary.txt").read_text()
    assert "stands in for the study's TPC-C" in " ".join(summary.split()) and (run / "mysql-raid.png").stat().st_size > 10_000
    assert b"mariadbd" not in host.run(["ps", "-eo", "comm="]).stdout
    assert b"-db0" not in host.run(["cat", "/proc/mounts"]).stdout
    assert host.run(["losetup", "--list", "--noheadings"]).stdout.strip() == b""


@pytest.mark.extended(why="a study in the nested host: five filesystems")
@pytest.mark.covers(experiments="filesystems")
def test_filesystems_all_five_on_the_nested_host(host, tmp_path):
    """Every filesystem the study compares is made and measured in the L1 (its generic kernel has
    f2fs and nilfs2), xfs included at the default 300 MiB region; none is skipped."""
    out = harness("run", "filesystems", "--pe-only", "--full", "--set", "filesystems.levels=[0]",
                  "--set", "filesystems.patterns=randwrite", "--set", "filesystems.direct=false",
                  "--set", "filesystems.runtime_s=2", "--set", "filesystems.ramp_s=0", "--set", f"results_dir={tmp_path}")
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "completed" and manifest["skipped"] == {}, manifest
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    bw = {(r["setup"], r["filesystem"]) for r in rows if r["metric"] == "bw" and r["status"] == "ok"}
    assert bw == {(s, fs) for s in ("single", "raid0-n4-c512k") for fs in ("ext4", "xfs", "btrfs", "f2fs", "nilfs2")}
    assert "F2FS against EXT4" in out.stdout and "raid0-n4-c512k" in (run / "summary.txt").read_text()


@pytest.mark.extended(why="a study in the nested host")
@pytest.mark.covers(experiments="device-profile")
def test_device_profile_of_a_drive_and_an_md_array_in_the_nested_host(host, tmp_path):
    """The emulated NVMe drive and a RAID 0 over the drives, profiled from the L1 (PE); a device
    made on this machine is skipped there with the reason."""
    out = harness("run", "device-profile", "--pe-only", "--devices", "drive,md,tmpfs", "--set", "device_profile.size_mib=16",
                  "--set", "device_profile.zone_mib=16", "--set", "device_profile.seq_runtime_s=1",
                  "--set", "device_profile.random_ios=300", "--set", f"results_dir={tmp_path}")
    assert "device tmpfs skipped: it is made on this machine" in out.stdout
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows if r["status"] != "ok"]
    assert {(r["profiled_device"], r["device"]) for r in rows if r["metric"] == "bw"} == {
        ("drive", host.record.drives[0]), ("md", "/dev/md/vtb-dp-cin-raid")}
    assert (run / "device-profile-random.png").stat().st_size > 10_000
    assert b"md" not in host.run(["sh", "-c", "grep ^md /proc/mdstat || true"]).stdout


@pytest.mark.extended(why="a paused L1: make test has a host that does not answer (ssh)")
def test_calls_to_a_nested_host_that_stops_answering_fail_instead_of_hanging(host):
    """A nested host whose kernel locks up keeps its forwarded port open but answers nothing (seen
    as RCU stalls in a TCG L1): keepalive (libvirt's, and ssh's under qemu+ssh) must turn a call on
    it into an error. Pausing the L1 is the same from outside."""
    from harness.libvirt.libvirt_conn import KEEPALIVE_COUNT, KEEPALIVE_INTERVAL_S
    conn = connect(host.uri)
    l0 = libvirt.open("qemu:///system")
    l1 = l0.lookupByName(DOMAIN)
    l1.suspend()
    try:
        t0 = time.monotonic()
        with pytest.raises(libvirt.libvirtError, match="keepalive|closed|End of file"):
            conn.listAllDomains()
        assert time.monotonic() - t0 < 2 * KEEPALIVE_INTERVAL_S * (KEEPALIVE_COUNT + 1)
    finally:
        l1.resume()
        l0.close()
    fresh = connect(host.uri)   # the host answers again once it runs
    fresh.close()


@pytest.mark.extended(why="boots the L1 again")
def test_a_nested_host_that_died_is_booted_anew_where_the_run_reaches_it(host):
    """An L1 that died mid-run (destroyed, as a kernel panic leaves it: seen here, in TCG's nested
    SVM): the fleet's teardown removes it, and the fleet's rebuild boots a new one on the same ssh
    port, so that the host object the run holds reaches the new L1. The rest of a rebuild (the
    fleet anew, the lost point measured again) is test_fleet_lifecycle's; with a dead L1 it took
    3 min 32 s from the death to the point measured again (README)."""
    from harness.resources import nested_l1
    l0 = libvirt.open("qemu:///system")
    try:
        l0.lookupByName(DOMAIN).destroy()
    finally:
        l0.close()
    assert "not running" in host.stopped()
    assert nested_l1.removed_after_loss(host, host.stopped) and nested_l1.removed(host)
    nested_l1.up(settings.load(CONFIG).nested_place, port=host.record.ssh_port)
    assert not nested_l1.removed(host) and NestedHost.load(STATE / "nested").record.ssh_port == host.record.ssh_port
    assert host.run(["cat", "/proc/sys/kernel/random/boot_id"]).returncode == 0   # the old object, the new L1
    connect(host.uri).close()


@pytest.mark.extended(why="waits out the agent's patience and loses the L1")
def test_a_nested_host_whose_guest_agent_fell_silent_is_taken_for_lost(host):
    """An L1 whose guest agent stops answering while its libvirtd still does (its qemu-ga stopped
    here; seen in CI as an L1 too busy to answer libvirt's guest-sync for minutes): a command waits
    out the agent's patience and fails, and since vtb drives the L1 through that agent, the host is
    taken for lost and removed, for the next run to boot anew (booting one on the same port is the
    test before; the ceph test after this boots its own hosts)."""
    from harness.libvirt.agent import AGENT_AWAY_S, AgentError
    from harness.resources import nested_l1
    host.run(["/bin/sh", "-c", "(sleep 1; pkill -STOP -x qemu-ga) </dev/null >/dev/null 2>&1 &"])
    time.sleep(3)
    t0 = time.monotonic()
    with pytest.raises(AgentError, match="not available for now"):
        host.run(["true"])
    assert AGENT_AWAY_S <= time.monotonic() - t0 < 3 * AGENT_AWAY_S
    assert nested_l1.removed_after_loss(host, lambda: None) and nested_l1.removed(host)   # lost by its agent alone
    assert not [d for d in l0_domains() if d.startswith(DOMAIN)]


def two_ssh_hosts(anew: bool) -> str:
    """Two nested hosts driven as `ssh` hosts (the path a user's own servers take), with virtio-blk
    drives: QEMU 7.2's emulated NVMe stalls at queue depths above 1 under TCG (see
    test_backend_sweeps), and these tests are about the ssh path, not the drives. One drive each,
    its OSD's: large enough for the fleet's images and BlueStore's own use (3328 MiB). Booted
    `anew`, or else two that answer with these drives are kept. Returns the path of their config."""
    if anew:
        harness("host", "nested", "down")
    out = harness("host", "nested", "up", "--count", "2", "--set", "nested.drive_model=virtio-blk",
                  "--set", "nested.drives=1", "--set", "nested.drive_mib=3584")
    ssh_config = out.stdout.strip().splitlines()[-1]
    assert ssh_config.endswith("nested-hosts.toml") and 'ssh = "root@127.0.0.1"' in Path(ssh_config).read_text()
    return ssh_config


def ceph_scaling_over(ssh_config: str) -> list[str]:
    # 10 s runs: fio 3.33 stamps its report after librbd's shutdown (seconds on these L1s), so a
    # window taken from a shorter run can miss its I/O, and the link figures with it
    return ["run", "ceph-scaling", "--config", ssh_config, "--set", "ceph.mode=hosts", "--set", "ceph.pg_num=8",
            "--set", "repeat.count=1", "--set", "settle.max_wait_s=1", "--set", 'ceph_scaling.patterns=["read"]',
            "--set", 'ceph_scaling.bs=["64k"]', "--set", "ceph_scaling.numjobs=[1]", "--runtime", "10", "--ramp", "0"]


@pytest.mark.extended(why="two TCG L1s and Ceph over them: make test drives one ssh host")
@pytest.mark.covers(hosts="ssh", experiments="ceph-scaling")
@pytest.mark.timeout(1500)   # two L1s booted, a Ceph cluster over them, a fleet
def test_ceph_scaling_over_two_ssh_hosts(nested_hosts_removed_after, tmp_path):
    """ceph-scaling over two ssh hosts (ceph.mode = "hosts"): a storage node on each, over the
    network the nested hosts share, fio's librbd client on each at once on its own region of its
    host's image (no VM is made: --pe-only), each host's interface observed. One node count, from
    the hosts: a sweep over node counts, each a pool of one cluster, and VMs on them are
    test_ceph's, and VMs on rbd over these hosts the next test's, which runs alone (here the other
    lane shares the cores: an L2's fio under a starved TCG L1 took over 70 s for 10). Last of this
    lane's tests here: it replaces the nested host the tests before used, and the module's teardown
    removes both, or hands them over to the next test."""
    ssh_config = two_ssh_hosts(anew=True)
    done = subprocess.run([HARNESS, *ceph_scaling_over(ssh_config), "--nodes", "2", "--pe-only",
                           "--set", f"results_dir={tmp_path}"], capture_output=True, text=True, timeout=1300)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next(tmp_path.glob("*-ceph-scaling-*"))
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    agg = [r for r in rows if r["metric"] == "aggregate_bw" and r["status"] == "ok"]
    assert {(r["ceph_nodes"], r["env"]) for r in agg} == {(2, "physical")}, agg
    assert all(r["placement"] == {"nested0": 1, "nested1": 1} and set(r["host_conditions"]) == {"nested0", "nested1"}
               for r in agg)
    assert all(r["fleet_vms"] == 0 for r in agg) and "terraform apply: 0 VM(s)" in done.stdout   # --pe-only: no L2
    links = [(r["ceph_nodes"], r["env"], {k: v for k, v in r.items() if k.startswith("link")}) for r in agg]
    assert all(r["link_n1_rx_mbit_s"] + r["link_n2_rx_mbit_s"] > 0 for r in agg), links   # each host's own interface
    assert {r["ioengine"] for r in rows if r["metric"] == "iops" and r["env"] == "physical" and r["status"] == "ok"} == {"rbd"}
    summary = (run_dir / "summary.txt").read_text()
    assert "regression per node count" in summary and "n1 " in summary and "n2 " in summary, summary   # each node's link
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "completed" and set(manifest["environment"]["per_host"]) == {"nested0", "nested1"}
    # each OSD on its host's allowed device, whose BlueStore label the teardown erased there
    for k, name in ((1, "nested0"), (2, "nested1")):
        assert f"osd.{k - 1} up on node {k} (10.214.0.1{k}), on /dev/vdb" in done.stdout, done.stdout
        assert f"BlueStore label on /dev/vdb on host {name}" in done.stdout, done.stdout
    for name in ("nested", "nested1"):
        node = NestedHost.load(STATE / name)
        signatures = node.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE", "/dev/vdb"])
        assert signatures.stdout.strip() == b"", signatures.stdout
        left = node.run(["sh", "-c", "ps -eo comm= | grep -Ex 'ceph-(mon|mgr|osd)'; ls -d /var/tmp/vtb/*/*-ceph; true"])
        assert left.stdout.strip() == b"", left.stdout   # no daemon, no cluster folder
    FIT_TO_HAND_OVER.append(ssh_config)


@pytest.mark.extended(why="two TCG L1s, Ceph over them, L2s in each")
@pytest.mark.covers(hosts="ssh", experiments="vm-scaling", backends="rbd")
@pytest.mark.alone   # gc --all
@pytest.mark.takes_handed_over_hosts   # those of test_ceph_scaling_over_two_ssh_hosts, in `make test-all`
@pytest.mark.timeout(1200)   # two L1s booted, a Ceph cluster over them, two runs on them
def test_vm_scaling_over_two_ssh_hosts_then_sigkill_and_gc(nested_hosts_removed_after, tmp_path):
    """vm-scaling with one VM on each of two ssh hosts, on the rbd backend in a Ceph cluster over
    both (the mon and an OSD on the first, an OSD on the second), physical baselines on both,
    per-host and aggregate figures; a second cluster on the same hosts meanwhile is refused. Then
    a run on it killed with SIGKILL mid-point, and `gc --all`: nothing left on either host (VMs,
    Ceph daemons and files), no nested host and no shared bridge here. First of the alone tests
    (on the nested hosts the lanes hand over, else on two it boots): it removes the nested hosts."""
    ssh_config = two_ssh_hosts(anew=False)
    rbd = ["run", "vm-scaling", "--vm-counts", "2", "--ramp", "0", "--backend", "rbd", "--set", "ceph.mode=hosts",
           "--set", "ceph.pg_num=8", "--set", "repeat.count=1", "--set", "settle.max_wait_s=1", "--set", "fleet.vms=2",
           "--config", ssh_config]
    done = subprocess.run([HARNESS, *rbd, "--runtime", "2", "--set", f"results_dir={tmp_path / 'rbd'}"],
                          capture_output=True, text=True, timeout=900)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 OSDs on 2 hosts, all PGs active+clean" in done.stdout
    run_dir = next((tmp_path / "rbd").glob("*-vm-scaling-*"))
    rows = [json.loads(l) for l in (run_dir / "samples.jsonl").read_text().splitlines()]
    measured = {(r["point"], r["scope"], r["host"], r["device_kind"]) for r in rows
                if r["metric"] == "iops" and r["status"] == "ok"}
    assert {("physical-n2", "slot", h, "rbd") for h in ("nested0", "nested1")} <= measured, measured  # fio's librbd
    assert {("virtual-n2", "vm", h, "rbd") for h in ("nested0", "nested1")} <= measured, measured     # QEMU's librbd
    assert {r["ioengine"] for r in rows if r["metric"] == "iops" and r["point"] == "physical-n2"} == {"rbd"}
    agg = [r for r in rows if r["metric"] == "aggregate_iops" and r["point"] == "virtual-n2"]
    assert agg and agg[0]["status"] == "ok" and agg[0]["placement"] == {"nested0": 1, "nested1": 1}
    assert set(agg[0]["host_conditions"]) == {"nested0", "nested1"} and "windows_overlap" in agg[0]
    assert any(r["metric"] == "ve_pe_ratio" and r["point"] == "virtual-n2" for r in rows)
    assert "per host" in (run_dir / "summary.txt").read_text()
    ceph = json.loads((run_dir / "run.json").read_text())["testbed"]["ceph"]
    assert ceph["mode"] == "hosts" and ceph["addresses"] == ["10.214.0.11", "10.214.0.12"]
    clash = subprocess.run([HARNESS, *ceph_scaling_over(ssh_config), "--set", f"results_dir={tmp_path / 'clash'}"],
                           capture_output=True, text=True, timeout=900)   # the fleet's cluster holds the mon's ports
    assert clash.returncode == 2 and "port 3300 at 10.214.0.11 is taken" in clash.stdout + clash.stderr, clash.stdout

    log = tmp_path / "killed.log"
    with open(log, "w") as f:   # seed 0 shuffles physical-n2 first: the host points the kill is about come at once
        proc = subprocess.Popen([HARNESS, *rbd, "--runtime", "60", "--set", "repeat.seed=0", "--set",
                                 f"results_dir={tmp_path}"], stdout=f, stderr=f)
    nodes = [NestedHost.load(STATE / name) for name in ("nested", "nested1")]
    deadline = time.monotonic() + 600
    # into a point of the hosts' own: fio runs on both, each in an ssh session of its own (after the
    # point's settle wait, so the point's start in the log is not enough)
    while not all(n.run(["pgrep", "-x", "fio"], check=False).returncode == 0 for n in nodes):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(1)
    proc.kill()
    proc.wait()
    gc = subprocess.run([HARNESS, "gc", "--all", "--config", ssh_config], capture_output=True, text=True, timeout=600)
    print(gc.stdout, gc.stderr)
    assert gc.returncode == 0 and "not undone" not in gc.stdout, gc.stdout   # the hosts' sides before the hosts
    # the killed run's commands on the hosts (fio, in sessions of their own) stopped by their records
    assert re.search(r"gc: stopped session of \S+ on host nested[01] ", gc.stdout), gc.stdout
    for name in ("nested0", "nested1"):  # removed on each host over ssh, before the hosts themselves
        assert "domain vtb-default-vm" in gc.stdout and f"(on host {name}" in gc.stdout, gc.stdout
        assert re.search(rf"process \d+ \(ceph-osd\) \(on host {name} ", gc.stdout), gc.stdout
        assert re.search(rf"ceph files /var/tmp/vtb/default/vtb-default-ceph \(on host {name} ", gc.stdout), gc.stdout
        assert re.search(rf"BlueStore label on /dev/vdb \(on host {name} ", gc.stdout), gc.stdout   # by the OSD's record
    assert subprocess.run(["ip", "link", "show", "vtb-nested-br"], capture_output=True).returncode != 0
    assert not [d for d in l0_domains() if d.startswith(DOMAIN)]
    qemus = subprocess.run(["pgrep", "-af", "qemu-system.*vtb-"], capture_output=True, text=True).stdout
    assert "vtb-nested" not in qemus
