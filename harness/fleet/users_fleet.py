"""The user's fleet as the config names it: on one host (this machine, or a nested host booted
when it is not up) or spread over the [[hosts]]. `testbed up` and a run ask it for their hosts
and records, not the config for which it is."""
from __future__ import annotations

from typing import Protocol

from harness import hosts
from harness.config.core import Config
from harness.fleet.multi_host import MultiHostFleet
from harness.fleet.testbed import Testbed, TestbedError, TestbedRecord
from harness.hosts import Host
from harness.resources import nested_l1


class UsersFleet(Protocol):
    @property
    def hosts(self) -> list[Host]: ...

    def up(self) -> list[TestbedRecord]: ...

    def ensure(self) -> list[TestbedRecord]:
        """The deployed fleet, brought to the config."""
        ...


class OnOneHost:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.hosts = [nested_l1.host_for(cfg)]

    def up(self) -> list[TestbedRecord]:
        """Up; a nested host lost as it comes up is rebuilt once, and the fleet made on the new one."""
        host = self.hosts[0]
        tb = Testbed(self.cfg, host)
        try:
            return [tb.up()]
        except TestbedError:
            rebuilt = nested_l1.rebuilt_after_loss(self.cfg, host, tb.host_not_answering)
            if rebuilt is None:
                raise
            self.hosts = [rebuilt]
            return [Testbed(self.cfg, rebuilt).up()]

    def ensure(self) -> list[TestbedRecord]:
        return [Testbed(self.cfg, self.hosts[0]).ensure()]


def for_config(cfg: Config) -> UsersFleet:
    """Over [[hosts]]: one part per host the placement gives VMs, once every host answers."""
    if not cfg.hosts:
        return OnOneHost(cfg)
    hosts.check_answering(cfg)
    return MultiHostFleet(cfg, hosts.all_for_config(cfg))
