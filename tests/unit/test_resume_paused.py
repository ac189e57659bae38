"""gc resumes the paused VMs a killed run left, by record: a user's paused `vtb-` domain stays paused."""
from __future__ import annotations

from harness import conditions
from harness.libvirt_xml import owner_metadata


class FakeDomain:
    def __init__(self, name: str, metadata: str):
        self._name, self._xml, self.resumed = name, f"<domain><name>{name}</name>{metadata}</domain>", False

    def name(self) -> str:
        return self._name

    def XMLDesc(self, flags: int = 0) -> str:
        return self._xml

    def resume(self) -> int:
        self.resumed = True
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
    assert conditions.resume_paused(FakeConn([ours, users, other]), ("vtb-ci-",)) == ["vtb-ci-vm0"]
    assert ours.resumed and not users.resumed and not other.resumed
