"""A point suspends the idle VMs of vtb's fleets, and gc resumes those a killed run left paused, by
record: a user's `vtb-` domain is neither suspended nor resumed."""
from __future__ import annotations

from harness.libvirt import pausing
from harness.libvirt.libvirt_xml import owner_metadata


class FakeDomain:
    def __init__(self, name: str, metadata: str):
        self._name, self._xml = name, f"<domain><name>{name}</name>{metadata}</domain>"
        self.resumed = self.suspended = False

    def name(self) -> str:
        return self._name

    def XMLDesc(self, flags: int = 0) -> str:
        return self._xml

    def resume(self) -> int:
        self.resumed = True
        return 0

    def suspend(self) -> int:
        self.suspended = True
        return 0


class FakeConn:
    def __init__(self, doms):
        self.doms = doms

    def listAllDomains(self, flags: int = 0):
        return self.doms


def test_only_paused_domains_that_record_vtb_defined_them_are_resumed():
    ours = FakeDomain("vtb-ci-vm0", owner_metadata("vtb-ci"))
    users = FakeDomain("vtb-ci-mine", "")
    other = FakeDomain("web0", owner_metadata("vtb-web"))
    assert pausing.resume_paused(FakeConn([ours, users, other]), ("vtb-ci-",)) == ["vtb-ci-vm0"]
    assert ours.resumed and not users.resumed and not other.resumed


def test_a_point_suspends_only_the_idle_domains_that_record_vtb_defined_them():
    ours, users = FakeDomain("vtb-ci-vm1", owner_metadata("vtb-ci")), FakeDomain("vtb-ci-mine", "")
    with pausing.suspended(FakeConn([ours, users]), ("vtb-ci-",), keep=set()) as paused:
        assert paused == ["vtb-ci-vm1"]
    assert ours.suspended and ours.resumed and not users.suspended
