"""A guest whose agent channel is closed for now (libvirt sent nothing) is asked again within a
bound; any other agent error, and a ping (its callers poll), fail at once."""
from __future__ import annotations

import json

import libvirt
import pytest

from harness.libvirt import agent


class Domain:
    def name(self):
        return "vtb-t-vm0"


def answering_after(monkeypatch, failures: list[str]) -> list[str]:
    sent = []

    def command(domain, cmd, timeout, flags):
        sent.append(json.loads(cmd)["execute"])
        if failures:
            raise libvirt.libvirtError(failures.pop(0))
        return json.dumps({"return": {"pid": 7}})
    monkeypatch.setattr(agent.libvirt_qemu, "qemuAgentCommand", command)
    monkeypatch.setattr(agent._asked_again.retry, "sleep", lambda s: None)
    return sent


def test_a_closed_channel_is_asked_again_and_the_command_goes_through(monkeypatch):
    away = "Guest agent is not responding: Guest agent not available for now"
    sent = answering_after(monkeypatch, [away, away])
    assert agent.GuestAgent(Domain()).command("guest-exec", {"path": "/bin/true"}) == {"pid": 7}
    assert sent == ["guest-exec"] * 3


def test_another_agent_error_and_a_ping_fail_at_once(monkeypatch):
    sent = answering_after(monkeypatch, ["Guest agent is not responding: QEMU guest agent is not connected"])
    with pytest.raises(agent.AgentError, match="vtb-t-vm0: guest agent guest-exec failed"):
        agent.GuestAgent(Domain()).command("guest-exec")
    answering_after(monkeypatch, ["Guest agent not available for now"])
    assert agent.GuestAgent(Domain()).ping() is False and sent == ["guest-exec"]
