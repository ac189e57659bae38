"""#43: gc acts only on records that prove themselves: a registered state dir another user could
have written in is not read (said, with the fix), every field of a plan is checked before use, and
a process is killed only while its proof (boot id, start time) holds."""
import json
import os
import subprocess
from pathlib import Path

import libvirt
import pytest

from harness.backends import HostDevice, HostPlan
from harness.common import pids
from harness.fleet import gc
from harness.hosts import LocalHost
from harness.resources.raid import RaidPlan

NOBODY = 65534


@pytest.fixture
def undone(monkeypatch):
    """What gc asked a backend to undo (the backends' own host_down, recorded instead)."""
    from harness import backends
    asked = []
    monkeypatch.setattr(backends, "get", lambda name: type("Recorder", (), {
        "host_down": lambda self, host, plan: asked.append(plan.prefix)})())
    return asked


def _registered(tmp_path, monkeypatch, state):
    monkeypatch.setattr(gc.paths, "STATE_REGISTRY", tmp_path / "registry")
    state.mkdir(parents=True, exist_ok=True)
    gc.register_state_dir(state)


def _plan(state, fleet="rs-gone", **disk) -> HostPlan:
    plan = HostPlan(prefix=f"vtb-{fleet}", fleet_dir=str(state / fleet), disk={"backend": "vfio", **disk},
                    device=HostDevice(path="/dev/null", kind="block"))
    (state / fleet).mkdir(parents=True, exist_ok=True)
    (state / fleet / "backend-0.json").write_text(plan.to_json())
    return plan


@pytest.mark.skipif(os.geteuid() != 0, reason="makes folders of another user")
@pytest.mark.parametrize("how", ["world-writable", "another user's", "under another user's folder"])
def test_a_registered_dir_another_user_could_have_written_is_not_read(tmp_path, monkeypatch, undone, how):
    """/var/tmp/vtb-ci is registered by the tests; removed, anyone may make it again and plant a
    plan there for root's next gc."""
    state = tmp_path / "home" / "vtb-ci" if how == "under another user's folder" else tmp_path / "vtb-ci"
    _registered(tmp_path, monkeypatch, state)
    _plan(state, pci_address="0000:01:00.0")
    (state / "rs-gone" / "fleet.tfvars.json").write_text("{}")
    if how == "world-writable":
        state.chmod(0o777)
    else:
        os.chown(state if how == "another user's" else state.parent, NOBODY, NOBODY)
    said = gc.collect_recorded("vtb-")
    assert undone == [] and (state / "rs-gone" / "backend-0.json").exists()
    assert gc.state_dirs() == []
    assert len(said) == 1 and said[0].startswith(f"(state dir {state} not read: ") and "Fix: " in said[0], said
    assert ("can be written by other users (mode 0777)" if how == "world-writable" else f"belongs to uid {NOBODY}") \
        in said[0]
    assert gc.live_prefixes() == ("vtb-rs-gone-",)   # its fleets are kept all the same: keeping is the safe side


@pytest.mark.skipif(os.geteuid() != 0, reason="root's folders")
def test_a_folder_of_roots_in_roots_sticky_tmp_is_read_and_tmp_itself_is_not(tmp_path):
    """/tmp and /var/tmp are everyone's to make names in, but sticky: a folder of root's there is
    root's alone. Registered itself, /tmp is not read."""
    if os.stat("/tmp").st_uid != 0 or not os.stat("/tmp").st_mode & 0o1000:
        pytest.skip("/tmp here is not root's sticky folder")
    assert gc.untrusted(tmp_path) is None
    assert gc.untrusted(Path("/tmp")) == f"/tmp can be written by other users (mode {os.stat('/tmp').st_mode & 0o7777:04o})"


@pytest.mark.parametrize("field, value, why", [
    ("pci_address", "../../../../tmp/x", "disk: "),
    ("fleet_dir", "/var/lib/vtb/../../etc", "fleet_dir '/var/lib/vtb/../../etc' is not an absolute path"),
    ("prefix", "vtb-x; reboot", "prefix 'vtb-x; reboot' is not a vtb- name"),
    ("host", {"kind": "nested", "state_dir": "/var/lib/vtb/../../root"}, "host: a path is not absolute"),
    ("host", {"kind": "ssh", "name": "a", "target": "-oProxyCommand=x", "port": 22, "remote_dir": "/v"},
     "host.target is not user@address"),
    ("backend", "nonesuch", "disk.backend 'nonesuch' is no backend"),
])
def test_every_field_of_a_plan_is_checked_before_use(tmp_path, monkeypatch, undone, field, value, why):
    state = tmp_path / "state"
    _registered(tmp_path, monkeypatch, state)
    plan = json.loads(_plan(state).to_json())
    if field in ("pci_address", "backend"):
        plan["disk"][field] = value
    else:
        plan[field] = value
    (state / "rs-gone" / "backend-0.json").write_text(json.dumps(plan))
    said = gc.collect_recorded("vtb-")
    assert undone == [] and (state / "rs-gone" / "backend-0.json").exists()
    assert len(said) == 1 and said[0].startswith(f"(plan {state}/rs-gone/backend-0.json not used: ") and why in said[0]
    assert "nothing it names was touched" in said[0]


def test_a_plan_not_roots_in_a_read_dir_is_not_read(tmp_path, monkeypatch, undone):
    state = tmp_path / "state"
    _registered(tmp_path, monkeypatch, state)
    _plan(state)
    (state / "rs-gone" / "backend-0.json").chmod(0o666)
    said = gc.collect_recorded("vtb-")
    assert undone == [] and len(said) == 1 and "can be written by other users (mode 0666)" in said[0]


def test_a_raid_plans_members_are_checked_before_use():
    plan = RaidPlan(name="vtb-x-raid", level=0, members=["/dev/nvme0n1", "/dev/nvme1n1"], chunk_kib=64,
                    allow=["/dev/nvme0n1", "/dev/nvme1n1"])
    assert RaidPlan.from_json(plan.to_json()) == plan
    for bad, why in ((dict(members=["/dev/../etc/passwd", "/dev/nvme1n1"]), "members/allow"),
                     (dict(name="../x"), "name '../x' is not a vtb- name"),
                     (dict(mountpoint="/tmp/../etc"), "mountpoint")):
        with pytest.raises(ValueError, match=why):
            RaidPlan.from_json(json.dumps({**json.loads(plan.to_json()), **bad}))


def test_gc_kills_a_process_only_while_its_proof_holds(monkeypatch):
    """The pid gc found may pass to another process before it kills (the daemon exits, the pid is
    reused): the proof taken as it was found decides."""
    monkeypatch.setattr(gc, "connect", lambda uri: (_ for _ in ()).throw(libvirt.libvirtError("not here")))
    monkeypatch.setattr(gc, "state_dirs", lambda: [])
    proc = subprocess.Popen(["sleep", "60"])
    try:
        proof = pids.proof(proc.pid)
        monkeypatch.setattr(gc, "_processes", lambda host, prefix, keep=(): ([({**proof, "start": 1}, "sleep")], []))
        assert f"process {proc.pid} (sleep)" not in gc.collect("vtb-gcproof-", LocalHost())
        assert proc.poll() is None
        monkeypatch.setattr(gc, "_processes", lambda host, prefix, keep=(): ([(proof, "sleep")], []))
        assert f"process {proc.pid} (sleep)" in gc.collect("vtb-gcproof-", LocalHost())
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()
        proc.wait()


def test_the_records_of_other_hosts_are_collected_apart_from_this_machines(tmp_path, monkeypatch, undone):
    """gc undoes what other hosts' records name before this machine's own collection (which may
    remove the nested hosts they are), and the rest after it: each plan once."""
    state = tmp_path / "vtb-ci"
    _registered(tmp_path, monkeypatch, state)
    _plan(state, fleet="here")
    there = HostPlan(prefix="vtb-there", fleet_dir=str(state / "there"), disk={"backend": "rbd"},
                     device=HostDevice(path="/dev/null", kind="block"),
                     host={"kind": "ssh", "name": "n1", "target": "root@10.0.0.2", "port": 22, "remote_dir": "/var/tmp/vtb"})
    (state / "there").mkdir()
    (state / "there" / "backend-0.json").write_text(there.to_json())
    gc.collect_recorded("vtb-", elsewhere=True)
    assert undone == ["vtb-there"] and not (state / "there" / "backend-0.json").exists()
    gc.collect_recorded("vtb-")
    assert undone == ["vtb-there", "vtb-here"]
