"""`harness gc` without --all keeps what live state owns: fleets with state, the nested host; a
SIGKILLed run's sweep fleet (its owner process gone) is not live."""
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.common.pids import owner
from harness.fleet import gc
from harness.hosts import LocalHost
from harness.resources import leftovers, raid, scratch
from harness.resources.ceph import leftovers as ceph_leftovers

pytestmark = pytest.mark.alone   # collects on this machine (pools, loops, mounts, the brd module)


def fleet(state, name, who=None):
    d = state / name
    d.mkdir(parents=True)
    (d / "fleet.tfvars.json").write_text("{}")
    if who is not None:
        (d / "owner.json").write_text(json.dumps(who))


def test_live_prefixes(tmp_path, monkeypatch):
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state, other = tmp_path / "state", tmp_path / "other"
    fleet(state, "default")                     # the user's fleet: persistent
    fleet(state, "sw-default", owner())         # a sweep of a live run (this process)
    gone = subprocess.Popen(["true"])
    gone.wait()
    fleet(state, "rs-default", {**owner(), "pid": gone.pid, "start": 1})  # a killed run's sweep
    (state / "nested").mkdir()
    (state / "nested" / "nested.json").write_text("{}")
    for d, who in (("nested1", owner()), ("nested2", {**owner(), "pid": gone.pid, "start": 1})):
        (state / d).mkdir()   # hosts booting, no record yet: by this process (kept), by a killed one
        (state / d / "booting.json").write_text(json.dumps({"domain": f"vtb-{d}", **who}))
    fleet(other, "ci")
    gc.register_state_dir(other)                # another state dir on this machine (the tests')
    gc.register_state_dir(other)                # registered once
    assert (tmp_path / "registry").read_text().splitlines() == [str(other)]
    assert gc.live_prefixes((state,)) == ("vtb-ci-", "vtb-default-", "vtb-nested", "vtb-nested1", "vtb-sw-default-")


def test_kept_names_are_not_collected():
    assert gc._kept("-name guest=vtb-default-vm0,debug-threads=on", ("vtb-default-",))
    assert not gc._kept("-name guest=vtb-sw-default-vm0", ("vtb-default-",))


def test_a_killed_runs_scratch_file_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state = tmp_path / "state"
    state.mkdir()
    gc.register_state_dir(state)
    dead = state / f"vtb-sw-gone-passthrough{scratch.SCRATCH_SUFFIX}"
    live = state / f"vtb-sw-live-passthrough{scratch.SCRATCH_SUFFIX}"
    fleet_device = state / "vtb-sw-gone-device.raw"     # not a scratch file: left to its fleet's teardown
    for f in (dead, live, fleet_device):
        f.write_bytes(b"x")
    # through the resources' registrations, as gc runs them
    assert leftovers.remove_all(gc._scope(LocalHost(), "vtb-", ("vtb-sw-live-",))) == [f"scratch file {dead}"]
    assert not dead.exists() and live.exists() and fleet_device.exists()


class FakePool:
    def __init__(self, name, folder="/var/tmp/vtb-ci/ci/pool"):
        self._name, self.folder, self.gone = name, folder, False

    def name(self):
        return self._name

    def XMLDesc(self, flags=0):
        return f"<pool type='dir'><name>{self._name}</name><target><path>{self.folder}</path></target></pool>"

    def isActive(self):
        return True

    def refresh(self):
        pass

    def listAllVolumes(self):
        return []

    def destroy(self):
        self.gone = True

    def delete(self):
        pass

    def undefine(self):
        pass


def test_a_fleets_pool_goes_with_its_prefix_and_a_live_fleets_pool_stays():
    roots = ("/var/tmp/vtb-ci",)
    pools = {n: FakePool(n) for n in ("vtb-default", "vtb-sw-ci", "vtb-sw-cix", "other")}
    conn = type("Conn", (), {"listAllStoragePools": lambda self: list(pools.values())})()
    gc._pools(conn, "vtb-", keep=("vtb-default-",), roots=roots)
    assert [n for n, p in pools.items() if p.gone] == ["vtb-sw-ci", "vtb-sw-cix"]   # the live fleet's stays
    pools = {n: FakePool(n) for n in ("vtb-sw-ci", "vtb-sw-cix")}
    gc._pools(conn, "vtb-sw-ci-", roots=roots)            # a fleet's own teardown: its pool, not a longer name's
    assert [n for n, p in pools.items() if p.gone] == ["vtb-sw-ci"]


def test_a_vtb_named_pool_whose_folder_is_in_no_state_dir_is_listed_not_removed():
    """A user's pool `vtb-backups` over /srv/backups is not vtb's, whatever its name (#28)."""
    pools = {"vtb-backups": FakePool("vtb-backups", "/srv/backups"), "vtb-ci": FakePool("vtb-ci")}
    conn = type("Conn", (), {"listAllStoragePools": lambda self: list(pools.values())})()
    said = gc._pools(conn, "vtb-", roots=("/var/tmp/vtb-ci",))
    assert [n for n, p in pools.items() if p.gone] == ["vtb-ci"]
    assert said[0] == ("(pool vtb-backups not removed: its folder /srv/backups is in no state dir vtb knows; if it "
                       "is yours to remove, `virsh pool-destroy` and `virsh pool-undefine` it)")


def _named_process(name: str, arg: str, as_user: str | None = None) -> subprocess.Popen:
    """A real process whose command line reads `name ... arg` (a shell waiting, under another argv[0])."""
    uid, gid = as_user.split(":") if as_user else ("", "")
    drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"] if as_user else []
    return subprocess.Popen([*drop, "bash", "-c", f"exec -a {name} /bin/sh -c 'sleep 60; :' {arg}"])


def test_a_domains_qemu_is_the_prefixs_only_by_the_domains_name(tmp_path, monkeypatch):
    """A QEMU libvirt runs for another vtb domain is not the prefix's because its arguments name the
    prefix: the nested host's L1 (domain vtb-nested) runs on /var/tmp/vtb-ci-nested/..., and the ci
    fleet's teardown (prefix vtb-ci-) killed it while the two ran at once. Nor is it listed."""
    from harness.libvirt.libvirt_xml import OWNER_NS
    run = tmp_path / "libvirt-qemu"
    run.mkdir()
    monkeypatch.setattr(gc, "LIBVIRT_QEMU_RUN", str(run))
    monkeypatch.setattr(gc, "state_dirs", lambda: [])
    l1 = _named_process("qemu-system-x86_64", "-name guest=vtb-gctl1 -drive file=/var/tmp/vtb-gct-nested/d.raw")
    vm = _named_process("qemu-system-x86_64", "-name guest=vtb-gct-vm0")
    for domain, proc in (("vtb-gctl1", l1), ("vtb-gct-vm0", vm)):
        (run / f"{domain}.pid").write_text(f"{proc.pid}\n")
        (run / f"{domain}.xml").write_text(f"<domstatus><metadata xmlns:vtb='{OWNER_NS}'/></domstatus>")
    try:
        time.sleep(0.5)   # both exec'd
        found, notes = gc._processes(LocalHost(), "vtb-gct-")
        assert [p["pid"] for p, _ in found] == [vm.pid] and notes == []
        assert gc._processes(LocalHost(), "vtb-gct-", keep=("vtb-gct-vm",)) == ([], [])
    finally:
        for p in (l1, vm):
            p.kill()
            p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a process as another user")
def test_a_process_is_vtbs_only_by_a_pid_file_of_vtbs_that_holds_its_pid(tmp_path, monkeypatch):
    """#28: a `vtb-` in a command line alone never makes a process vtb's. Root's daemon whose own
    arguments name a folder vtb made (in a state dir), holding a pid file with its pid, is; root's
    `qemu-system-x86_64 ... /srv/vtb-gct-disk.img`, or one whose pid file is in a user's folder, is
    listed with the fix; another user's is not even looked at."""
    monkeypatch.setattr(gc, "state_dirs", lambda: [str(tmp_path / "state")])
    run_dir = tmp_path / "state" / "f" / "vtb-gct-run"
    users = tmp_path / "srv" / "vtb-gct-db"
    for d in (run_dir, users):
        d.mkdir(parents=True)
    theirs = _named_process("qemu-system-x86_64", "/home/u/vtb-gct-disk.img", as_user="nobody:nogroup")
    ours = _named_process("qemu-storage-daemon", f"--pidfile {run_dir}/qsd.pid")
    named_only = _named_process("qemu-system-x86_64", "/srv/vtb-gct-disk.img")
    users_pid_file = _named_process("mariadbd", f"--defaults-file={users}/server.cnf")
    planted = _named_process("qemu-system-x86_64", f"-drive file={run_dir}/planted/disk.img")   # a pid file not root's
    (run_dir / "qsd.pid").write_text(f"{ours.pid}\n")
    (users / "mysqld.pid").write_text(f"{users_pid_file.pid}\n")
    (run_dir / "planted").mkdir()
    (run_dir / "planted" / "x.pid").write_text(f"{planted.pid}\n")
    os.chown(run_dir / "planted" / "x.pid", 65534, 65534)
    try:
        time.sleep(0.5)   # all exec'd
        found, notes = gc._processes(LocalHost(), "vtb-gct-")
        assert [p["pid"] for p, _ in found] == [ours.pid]
        for listed in (named_only, users_pid_file, planted):
            assert any(n.startswith(f"(process {listed.pid} (") and f"`kill {listed.pid}`" in n for n in notes), notes
        assert not any(str(theirs.pid) in n for n in notes)
    finally:
        for p in (theirs, ours, named_only, users_pid_file, planted):
            p.kill()
            p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="makes network namespaces")
def test_a_namespace_goes_only_when_a_ceph_plan_of_vtbs_names_it(tmp_path, monkeypatch):
    """#28: a local cluster's storage-node namespace is removed by its plan (the cluster folder's
    plan.json); a namespace that merely has a vtb- name is listed with the fix."""
    from harness.resources.ceph.plan import CephPlan
    monkeypatch.setattr(gc, "state_dirs", lambda: [str(tmp_path)])
    plan = CephPlan(name="vtb-gct-ceph", dir=str(tmp_path / "f" / "vtb-gct-ceph"), nodes=1)
    Path(plan.dir).mkdir(parents=True)
    (Path(plan.dir) / "plan.json").write_text(plan.to_json())
    ours, users = plan.node_name(1), "vtb-gct-users"
    for ns in (ours, users):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        said = gc._networks(LocalHost(), "vtb-gct-")
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"namespace {ours}" in said and ours not in names
        assert users in names and any(s.startswith(f"(namespace {users} not removed") and f"`ip netns del {users}`" in s
                                      for s in said), said
    finally:
        for ns in (ours, users):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_pid_files_are_looked_for_beside_the_paths_a_daemon_is_given():
    assert gc._pid_file_folders(["ceph-osd", "-c", "/s/my data/vtb-x-ceph/ceph.conf", "-i", "0"]) == [
        "/s/my data/vtb-x-ceph", "/s/my data/vtb-x-ceph/ceph.conf"]   # a state dir may hold spaces
    assert gc._pid_file_folders(["qemu-system-x86_64", "-drive", "file=/p/a.qcow2,format=qcow2", "-S"]) == ["/p", "/p/a.qcow2"]


def test_a_state_dir_with_a_space_is_removed_whole_and_nothing_beside_it(tmp_path):
    """A remote Ceph folder under `state_dir = "/srv/my data"` is one path, not "/srv/my" and "data/..."."""
    cluster = tmp_path / "my data" / "default" / "vtb-gct-ceph"
    cluster.mkdir(parents=True)
    (cluster / "ceph.conf").write_text("[global]\n")
    (tmp_path / "my").mkdir()
    (tmp_path / "my" / "keep").write_text("not vtb's")
    removed = ceph_leftovers.remote_dirs(LocalHost(), str(tmp_path / "my data"), "vtb-gct")
    assert removed == [f"ceph files {cluster}"]
    assert not cluster.exists() and (tmp_path / "my" / "keep").read_text() == "not vtb's"


@pytest.mark.skipif(os.geteuid() != 0, reason="attaches loop devices")
def test_only_loops_over_vtbs_files_are_detached_not_a_users_with_a_vtb_name(tmp_path, monkeypatch):
    """A user's loop over /home/u/vtb-disk.img (here: a folder outside the state dirs) stays; a loop
    over a scratch file in a known state dir goes (#28: by where vtb makes its files, not by name)."""
    state = tmp_path / "state"
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    gc.register_state_dir(state)
    users, ours = tmp_path / "home" / "vtb-gct-disk.img", state / "vtb-gct-x.scratch.raw"
    users_shm = Path("/dev/shm/vtb-gct-users.scratch.raw")   # a vtb- name in RAM that is not root's
    loops = []
    try:
        for f in (users, ours, users_shm):
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"\0" * (1 << 20))
            loops.append(subprocess.run(["losetup", "--find", "--show", str(f)], capture_output=True, text=True,
                                        check=True).stdout.strip())
        os.chown(users_shm, 65534, 65534)
        said = gc._loops_and_mounts(LocalHost(), "vtb-gct-")
        assert said == [f"loop device {loops[1]}", f"(loop device {loops[2]} not removed: its file {users_shm} is not "
                        f"root's; if it is yours to remove, `losetup -d {loops[2]}`)"]
        listed = subprocess.run(["losetup", "--list", "--noheadings", "-O", "NAME"], capture_output=True, text=True).stdout
        assert loops[0] in listed.split() and loops[1] not in listed.split() and loops[2] in listed.split()
    finally:
        for dev in loops:
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        users_shm.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts tmpfs")
def test_only_mounts_vtb_makes_are_unmounted_not_a_users_with_a_vtb_name(tmp_path, monkeypatch):
    """A user's mount named vtb-... outside vtb's folders stays, and so does one in /tmp that is not
    root's (anyone may name a folder there); a database's in /run and an array's filesystem in a
    known state dir go."""
    state = tmp_path / "state dir"
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    gc.register_state_dir(state)
    users = tmp_path / "mnt" / "vtb-gct-backup"
    users_tmp = Path("/tmp/vtb-gct-users")
    array = state / "gct" / "vtb-gct-raid-mnt"
    database = Path("/run/vtb-gct-db0")
    for target, uid in ((users, "0"), (users_tmp, "65534"), (array, "0"), (database, "0")):
        target.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,uid={uid}", "vtb-test", str(target)], check=True)
    try:
        removed = gc._loops_and_mounts(LocalHost(), "vtb-gct-")
        assert sorted(r for r in removed if not r.startswith("(")) == sorted([f"mount {array}", f"mount {database}"])
        assert [r for r in removed if r.startswith("(")] == [
            f"(mount {users_tmp} not removed: it is not root's; if it is yours to remove, `umount {users_tmp}`)"]
        mounted = Path("/proc/mounts").read_text()
        assert str(users) in mounted and str(users_tmp) in mounted
        assert "vtb-gct-raid-mnt" not in mounted and str(database) not in mounted
    finally:
        for target in (users, users_tmp, array, database):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
        database.rmdir()
        users_tmp.rmdir()


def test_a_killed_runs_backend_host_side_is_undone_by_its_plan(tmp_path, monkeypatch):
    """The backend's own host_down, from the plan the dead fleet kept (a controller left on
    vfio-pci goes back to its driver this way); a live fleet's plan is left alone."""
    from harness import backends
    from harness.backends import HostDevice, HostPlan
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state = tmp_path / "state"
    gc.register_state_dir(state)
    undone = []

    class Recorder:
        def host_down(self, host, plan):
            undone.append((host.name, plan.prefix))

    monkeypatch.setattr(backends, "get", lambda name: Recorder())
    plans = {}
    for fleet_name in ("rs-gone", "default"):
        plan = HostPlan(prefix=f"vtb-{fleet_name}", fleet_dir=str(state / fleet_name), disk={"backend": "vfio"},
                        device=HostDevice(path="/dev/null", kind="block"))
        (state / fleet_name).mkdir(parents=True)
        plans[fleet_name] = state / fleet_name / "backend-0.json"
        plans[fleet_name].write_text(plan.to_json())
    assert gc._recorded_backends(gc._scope(LocalHost(), "vtb-", ("vtb-default-",))) == ["vfio host side of vtb-rs-gone"]
    assert undone == [("local", "vtb-rs-gone")]
    assert not plans["rs-gone"].exists() and plans["default"].exists()


def test_a_plan_on_a_nested_host_that_was_removed_goes_with_it(tmp_path, monkeypatch):
    """A killed sweep's plans on a nested host whose L1 was removed since (its record gone): what
    they describe went with the L1, so gc drops them and says so, rather than failing on them at
    every gc."""
    from harness.backends import HostDevice, HostPlan
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state, fleet = tmp_path / "state", tmp_path / "state" / "rs-cin"
    fleet.mkdir(parents=True)
    gc.register_state_dir(state)
    gone = {"kind": "nested", "state_dir": str(state / "nested")}   # no nested.json there
    backend = fleet / "backend-0.json"
    backend.write_text(HostPlan(prefix="vtb-rs-cin", fleet_dir=str(fleet), disk={"backend": "virtio-blk"},
                                device=HostDevice(path="/dev/nvme0n1", kind="block"), host=gone).to_json())
    array = fleet / "raid-0.json"
    array.write_text(raid.RaidPlan(name="vtb-rs-cin-raid", level=0, members=["/dev/nvme0n1", "/dev/nvme1n1"],
                                 chunk_kib=64, allow=["/dev/nvme0n1", "/dev/nvme1n1"], host=gone).to_json())
    assert gc.collect_recorded("vtb-") == ["virtio-blk host side of vtb-rs-cin: gone with its nested host",
                                           "array /dev/md/vtb-rs-cin-raid: gone with its nested host"]
    assert not backend.exists() and not array.exists()


def test_a_brd_record_of_a_killed_run_is_collected(tmp_path, monkeypatch):
    """brd is unloaded only when a record says vtb loaded it (here it is not loaded: the record goes)."""
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state = tmp_path / "state"
    state.mkdir()
    gc.register_state_dir(state)
    dead, live = (state / f"vtb-dp-{n}-brd{scratch.BRD_RECORD_SUFFIX}" for n in ("gone", "live"))
    dead.write_text("brd\n")
    live.write_text("brd\n")
    # a live run's prefix, as live_prefixes gives it; only in gc's pass over records
    said = leftovers.remove_all(gc._scope(LocalHost(), "vtb-", ("vtb-dp-live-",)), by_record=True)
    assert not dead.exists() and live.exists()
    assert said == (["module brd"] if Path("/sys/module/brd").exists() else [])


def test_a_scratch_file_name_someone_linked_first_is_not_followed(tmp_path):
    """/dev/shm is anyone's: a link planted at the scratch file's predictable name is refused, and
    what it points to is not written."""
    target = tmp_path / "precious"
    target.write_text("data")
    link = tmp_path / f"vtb-dp-x-tmpfs{scratch.SCRATCH_SUFFIX}"
    link.symlink_to(target)
    with pytest.raises(RuntimeError, match="not a file vtb left"):
        with scratch.loop_over_scratch_file(tmp_path, "vtb-dp-x-tmpfs", 1 << 20):
            pass
    assert target.read_text() == "data" and link.is_symlink()


def test_the_nested_hosts_bridge_is_recorded_only_by_a_nested_hosts_record(tmp_path, monkeypatch):
    from harness.resources import nested_l1
    monkeypatch.setattr(gc, "state_dirs", lambda: [str(tmp_path)])
    assert nested_l1.SHARED_BRIDGE not in gc._recorded_networks("vtb-")
    (tmp_path / "nested1").mkdir()
    (tmp_path / "nested1" / "nested.json").write_text(json.dumps({"shared_address": "10.214.0.12/24"}))
    assert nested_l1.SHARED_BRIDGE in gc._recorded_networks("vtb-")
    (tmp_path / "nested1" / "nested.json").unlink()   # a boot that failed before its host's record
    (tmp_path / nested_l1.BRIDGE_RECORD).write_text("{}")
    assert nested_l1.SHARED_BRIDGE in gc._recorded_networks("vtb-")
