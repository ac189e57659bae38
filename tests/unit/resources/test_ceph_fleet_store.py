"""What a fleet sees of Ceph (resources/ceph/fleet_store.py), given by the rbd backend only."""
import shlex
import sys
from pathlib import Path

from harness import backends
from harness.config.core import Config
from harness.hosts import LocalHost
from harness.resources.ceph.fleet_store import FleetCeph


def store(tmp_path, **ceph) -> FleetCeph:
    cfg = Config.model_validate({"state_dir": str(tmp_path), "disk": {"backend": "rbd"}, "ceph": ceph})
    return backends.get("rbd").disk_store(cfg.ceph_fleet, lambda: [LocalHost()], LocalHost(), tmp_path / "default",
                                            cfg.prefix)


def test_only_a_backend_whose_disks_are_not_host_slices_gives_a_store(tmp_path):
    cfg = Config.model_validate({"state_dir": str(tmp_path)})
    assert backends.get("virtio-blk").disk_store(cfg.ceph_fleet, lambda: [LocalHost()], LocalHost(), tmp_path, cfg.prefix) is None
    assert isinstance(store(tmp_path), FleetCeph)


def test_a_local_cluster_is_made_and_removed_by_the_fleets_hooks(tmp_path):
    s = store(tmp_path)
    written = {}

    def hook_file(kind: str, text: str) -> Path:
        written[kind] = text
        return tmp_path / "my plans" / f"{kind}.json"
    hooks = s.hooks(hook_file)
    python = shlex.quote(sys.executable)
    assert hooks == {"create": f"{python} -m harness.resources ceph create '{tmp_path}/my plans/ceph.json'",
                     "destroy": f"{python} -m harness.resources ceph destroy '{tmp_path}/my plans/ceph.json'"}
    assert written["ceph"] == s.plan.to_json() and not s.spans_hosts and s.kept_by_parts() == ()
    assert s.metadata()["mode"] == "local" and s.image().locator.startswith(f"rbd:{s.plan.pool(s.plan.nodes)}/")
    assert s.refusal() is None and s.prepare(tmp_path, "vtb-default") == []


def test_your_cluster_is_only_read_and_its_image_named_for_this_installation(tmp_path):
    s = store(tmp_path, mode="existing", conf="/nope/ceph.conf", pool="tenant-pool", client="tenant")
    assert s.plan is None and s.hooks(lambda kind, text: tmp_path) == {"create": "", "destroy": ""}
    assert s.metadata() == {"mode": "existing", "conf": "/nope/ceph.conf", "pool": "tenant-pool", "client": "tenant"}
    img = s.image()
    assert img.pool == "tenant-pool" and img.image.endswith("-device") and img.client == "tenant"
    assert img.image != "vtb-default-device"   # named for this machine and state dir too
    assert s.refusal().startswith("ceph (existing): ") and s.size_problem() is None


def test_a_fleet_whose_disks_need_no_store_never_reaches_its_hosts(tmp_path):
    """A Testbed for a nested host that is gone (a teardown removed it; `testbed down --all`'s
    fallback) is made without reaching any host: only a Ceph cluster over the hosts asks for them."""
    from harness.fleet.testbed import Testbed
    cfg = Config.model_validate({"state_dir": str(tmp_path), "host": {"kind": "nested"}})
    assert Testbed(cfg, LocalHost()).store is None

    def unreachable():
        raise AssertionError("the fleet's hosts were asked for")
    assert backends.get("virtio-blk").disk_store(cfg.ceph_fleet, unreachable, LocalHost(), tmp_path, cfg.prefix) is None
    assert store(tmp_path).plan is not None   # a local cluster's plan: made from [ceph], the hosts asked
