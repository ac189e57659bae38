"""`testbed up` on a host lost as it comes up: a TestbedError or a guest agent's error (vtb drives
a nested host through its agent) leads to the rebuild check; a host that is not lost keeps the
error, and a rebuilt one gets the fleet. The live case is test_nested_raid's silent agent."""
from __future__ import annotations

import pytest

from harness.engine import settings
from harness.fleet import users_fleet
from harness.libvirt.agent import AgentError


class Bed:
    """A Testbed whose bring-up fails on the first host and succeeds on any other."""
    def __init__(self, cfg, host):
        self.host = host

    def up(self):
        if self.host == "first":
            raise AgentError("vtb-nested: guest agent guest-exec-status failed: not available for now")
        return f"fleet on {self.host}"

    def host_not_answering(self):
        return None


def fleet(tmp_path, monkeypatch, rebuilt):
    monkeypatch.setattr(users_fleet, "Testbed", Bed)
    monkeypatch.setattr(users_fleet.nested_l1, "host_for", lambda kind, place: "first")
    asked = []
    monkeypatch.setattr(users_fleet.nested_l1, "rebuilt_after_loss",
                        lambda place, host, why: asked.append(host) or rebuilt)
    return users_fleet.OnOneHost(settings.load(None, [f"state_dir={tmp_path}"])), asked


def test_an_agent_error_at_up_on_a_lost_host_rebuilds_it_and_brings_the_fleet_up_there(tmp_path, monkeypatch):
    one, asked = fleet(tmp_path, monkeypatch, rebuilt="second")
    assert one.up() == ["fleet on second"] and asked == ["first"] and one.hosts == ["second"]


def test_an_agent_error_on_a_host_that_is_not_lost_stands(tmp_path, monkeypatch):
    one, asked = fleet(tmp_path, monkeypatch, rebuilt=None)
    with pytest.raises(AgentError, match="not available for now"):
        one.up()
    assert asked == ["first"]
