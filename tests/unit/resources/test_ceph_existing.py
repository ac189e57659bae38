"""Your cluster (ceph.mode = "existing"): config refusals that name the field, the locator with
its client, the client conf, and the one rule for images: vtb reuses or removes only an image
that carries its fleet's tag, and a cluster that does not answer keeps the record for gc. The
replies are rbd's own words, recorded from Ceph 16.2.15."""
from __future__ import annotations

import json
import subprocess

import pytest

from harness.resources.ceph import existing, images
from harness.resources.ceph.images import RbdImage
from harness.resources.ceph.plan import CephConfig, CephPlan, conf, daemon_keys

NO_IMAGE = b"rbd: error opening image vtb-f-device: (2) No such file or directory\n"
TIMED_OUT = b"rbd: couldn't connect to the cluster!\n"


class RecordedCluster:
    """Answers rbd commands as a cluster holding `images` ({name: owner tag or ""}) would."""
    label = "this machine"

    def __init__(self, images: dict[str, str] | None = None, answers: bool = True):
        self.images, self.answers, self.calls = dict(images or {}), answers, []

    def run(self, argv, check=False, timeout=None, **_):
        self.calls.append(argv)
        verb, rest = argv[7], argv[8:]
        name = rest[0].split("/")[-1] if rest else ""
        if not self.answers:
            return subprocess.CompletedProcess(argv, 110, b"", TIMED_OUT)
        if verb == "info":
            known = name in self.images
            return subprocess.CompletedProcess(argv, 0 if known else 2, b"", b"" if known else NO_IMAGE)
        if verb == "image-meta" and rest[0] == "get":
            tag = self.images.get(rest[1].split("/")[-1], "")
            return subprocess.CompletedProcess(argv, 0 if tag else 2, tag.encode(), b"")
        if verb == "rm":
            self.images.pop(rest[-1].split("/")[-1])
        return subprocess.CompletedProcess(argv, 0, b"", b"")


IMG = RbdImage("rbd", "vtb-f-device", "/s/f/ceph-client.conf", "tenant")


def test_the_locator_carries_pool_image_conf_and_client():
    assert IMG.locator == "rbd:rbd/vtb-f-device@/s/f/ceph-client.conf#tenant"
    assert RbdImage.parse(IMG.locator) == IMG
    admin = RbdImage("p", "i", "/c")
    assert admin.locator == "rbd:p/i@/c" and RbdImage.parse(admin.locator) == admin
    assert IMG.rbd("ls", "rbd")[:5] == ["rbd", "-c", "/s/f/ceph-client.conf", "--id", "tenant"]


@pytest.mark.parametrize("settings,says", [
    ({"mode": "existing", "pool": "rbd"}, "ceph.conf is needed"),
    ({"mode": "existing", "conf": "/etc/hostname"}, "ceph.pool is needed"),
    ({"pool": "rbd"}, 'ceph.pool is for ceph.mode="existing"'),
    ({"mode": "existing", "conf": "/etc/hostname", "pool": "rbd", "client": "a b"}, "client"),
])
def test_bad_existing_settings_are_refused_by_name(settings, says):
    with pytest.raises(ValueError, match=says):
        CephConfig(**settings)


def test_the_client_conf_is_yours_plus_the_keyring_for_the_client(tmp_path):
    (tmp_path / "ceph.conf").write_text("[global]\nmon_host = 10.0.0.1\n")
    (tmp_path / "k").write_text("[client.tenant]\n\tkey = x\n")
    c = CephConfig(mode="existing", conf=str(tmp_path / "ceph.conf"), keyring=str(tmp_path / "k"), client="tenant",
                   pool="rbd")
    text = existing.client_conf(c)
    assert text.startswith("[global]\nmon_host = 10.0.0.1\n")
    assert text.endswith(f"[client.tenant]\nkeyring = {tmp_path / 'k'}\n")
    assert existing.image(c, tmp_path, "vtb-f-device").locator == f"rbd:rbd/vtb-f-device@{tmp_path}/ceph-client.conf#tenant"


def test_an_image_of_the_same_name_without_the_fleets_tag_is_refused_and_left():
    cluster = RecordedCluster({"vtb-f-device": ""})
    with pytest.raises(images.ImageError, match="did not make"):
        images.create(cluster, IMG, 64 << 20, "vtb-f")
    assert not any(c[7] in ("create", "rm", "bench") for c in cluster.calls)
    assert "left as it is" in images.remove(cluster, IMG, "vtb-f") and "vtb-f-device" in cluster.images


def test_the_fleets_own_image_is_made_tagged_reused_and_removed():
    cluster = RecordedCluster()
    assert "made and prefilled" in images.create(cluster, IMG, 64 << 20, "vtb-f")
    assert [c[7] for c in cluster.calls] == ["info", "create", "image-meta", "bench"]
    assert cluster.calls[2][8:] == ["set", "rbd/vtb-f-device", images.OWNER_KEY, "vtb-f"]
    cluster.images["vtb-f-device"] = "vtb-f"
    assert "already made" in images.create(cluster, IMG, 64 << 20, "vtb-f")
    assert images.remove(cluster, IMG, "vtb-f") == "rbd image rbd/vtb-f-device" and not cluster.images
    assert "nothing to remove" in images.remove(cluster, IMG, "vtb-f")


def test_a_cluster_that_does_not_answer_keeps_the_record_for_gc(tmp_path):
    fleet, state = tmp_path / "f", tmp_path
    fleet.mkdir()
    record = fleet / existing.RECORD
    record.write_text(json.dumps({"locator": IMG.locator, "owner": "vtb-f"}))
    said = existing.remove_recorded(RecordedCluster(answers=False), record, set_aside_in=state)
    assert "gc` will retry" in said[0] and not record.exists()
    kept = state / f"vtb-f-{existing.RECORD}"
    assert existing.records(state) == [kept]
    assert existing.remove_recorded(RecordedCluster({"vtb-f-device": "vtb-f"}), kept) == ["rbd image rbd/vtb-f-device"]
    assert existing.records(state) == []


def test_a_local_cluster_with_cephx_holds_every_daemons_key_before_its_mon_is_made():
    plan = CephPlan(name="vtb-ci-ceph", dir="/s/vtb-ci-ceph", nodes=2, osds_per_node=2, cephx=True)
    assert "auth_client_required = cephx" in conf(plan, "fsid")
    assert "auth_client_required = none" in conf(CephPlan(name="vtb-ci-ceph", dir="/s/vtb-ci-ceph"), "fsid")
    assert CephConfig().cephx   # every cluster vtb makes authenticates unless the user turns it off
    assert [k for k, _ in daemon_keys(plan)] == ["client.admin", "mgr.x", "osd.0", "osd.1", "osd.2", "osd.3"]
    assert dict(daemon_keys(plan))["osd.3"][:2] == ["mon", "allow profile osd"]


def test_missing_files_are_refused_at_bring_up_not_when_the_config_loads():
    # a config whose conf has gone must still load, so that `testbed down` and `gc` can remove the image
    gone = CephConfig(mode="existing", conf="/nope/ceph.conf", pool="rbd")
    assert "ceph.conf=/nope/ceph.conf: no readable file" in existing.access_problem(RecordedCluster(), gone)
    no_key = CephConfig(mode="existing", conf="/etc/hostname", pool="rbd", keyring="/nope")
    assert "ceph.keyring=/nope" in existing.access_problem(RecordedCluster(), no_key)


def test_two_installations_with_the_same_fleet_name_name_their_images_apart(tmp_path, monkeypatch):
    """Two machines (or two state dirs) whose fleets are both `default` and share your pool: each
    has its own image, so neither reuses nor removes the other's (#28)."""
    machine = tmp_path / "machine-id"
    machine.write_text("a" * 32 + "\n")
    monkeypatch.setattr(existing, "MACHINE_ID", str(machine))
    here = existing.installation(tmp_path / "state")
    assert here == existing.installation(tmp_path / "state") and len(here) == 8
    assert existing.installation(tmp_path / "other-state") != here
    machine.write_text("b" * 32 + "\n")
    assert existing.installation(tmp_path / "state") != here


class SlowMonHost:
    """`ceph health` on a mon host whose CPU a point saturates: each call times out or answers."""
    label = "nested0"

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def run(self, argv, check=False, timeout=None, **_):
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if outcome == "timeout":
            raise subprocess.TimeoutExpired(argv, timeout)
        return subprocess.CompletedProcess(argv, 0, outcome, b"")


def test_one_slow_answer_to_ceph_health_is_not_a_fault_and_two_are(fixture_text):
    """A TCG L1 under a point's load missed one 30 s bound in a real run (the point was stopped for
    nothing); a cluster that misses two in a row is not answering."""
    healthy, full = b'{"status": "HEALTH_OK", "checks": {}}', fixture_text("ceph/health-full.json").encode()
    assert images.health_fault(SlowMonHost("timeout", healthy), IMG) is None
    assert images.health_fault(SlowMonHost("timeout", full), IMG) == "HEALTH_ERR: 2 full osd(s); 3 pool(s) full"
    host = SlowMonHost("timeout", "timeout")
    said = images.health_fault(host, IMG)
    assert host.calls == images.HEALTH_TRIES == 2
    assert said == ("the Ceph cluster (/s/f/ceph-client.conf) did not answer `ceph health` within 30 s, "
                    "2 times in a row")


def test_an_image_recorded_under_an_older_name_is_removed_before_the_new_record(tmp_path, monkeypatch):
    """A fleet made before image names carried the installation: its first `up` after that removes
    the old tagged image (from its record), so nothing is forgotten in your pool."""
    fleet = tmp_path / "f"
    fleet.mkdir()
    (fleet / existing.RECORD).write_text(json.dumps({"locator": IMG.locator, "owner": "vtb-f"}))
    cluster = RecordedCluster({"vtb-f-device": "vtb-f"})
    monkeypatch.setattr(existing, "LocalHost", lambda: cluster)
    (tmp_path / "ceph.conf").write_text("[global]\nmon_host = 10.0.0.1\n")
    c = CephConfig(mode="existing", conf=str(tmp_path / "ceph.conf"), pool="rbd", client="tenant")
    new = existing.image(c, fleet, "vtb-f-0123abcd-device")
    assert existing.prepare(c, fleet, new, "vtb-f", tmp_path) == ["rbd image rbd/vtb-f-device"]
    assert not cluster.images and json.loads((fleet / existing.RECORD).read_text())["locator"] == new.locator
    assert existing.prepare(c, fleet, new, "vtb-f", tmp_path) == []   # the same name: nothing to undo
