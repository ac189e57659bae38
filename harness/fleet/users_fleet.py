"""The user's fleet as the config names it: on one host (this machine, or a nested host booted
when it is not up) or spread over the [[hosts]]. `testbed up`, `testbed down` and a run ask it for
their hosts, records and teardown, not the config for which it is."""
from __future__ import annotations

from typing import Protocol

from harness import hosts
from harness.common import paths
from harness.config.core import Config
from harness.fleet import gc
from harness.fleet.multi_host import MultiHostFleet
from harness.fleet.testbed import BRING_UP_FAILURES, Testbed, TestbedError, TestbedRecord
from harness.hosts import Host, LocalHost
from harness.hosts.nested import NestedHostError
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
        self.hosts = [nested_l1.host_for(cfg.host.kind, cfg.nested_place)]

    def up(self) -> list[TestbedRecord]:
        """Up; a nested host lost as it comes up is rebuilt once, and the fleet made on the new one."""
        host = self.hosts[0]
        tb = Testbed(self.cfg, host)
        try:
            return [tb.up()]
        except BRING_UP_FAILURES:
            rebuilt = nested_l1.rebuilt_after_loss(self.cfg.nested_place, host, tb.host_not_answering)
            if rebuilt is None:
                raise
            self.hosts = [rebuilt]
            return [Testbed(self.cfg, rebuilt).up()]

    def ensure(self) -> list[TestbedRecord]:
        return [Testbed(self.cfg, self.hosts[0]).ensure()]

    @staticmethod
    def tear_down(cfg: Config, everything: bool) -> tuple[list[str], list[str]]:
        """The fleet torn down without booting its host; with `everything`, every other fleet with
        state here (sweep and bench fleets too), the nested hosts and any stray vtb- resource, a
        fleet whose teardown fails said at the end while the others still go. (removed, failed)."""
        failed: list[str] = []

        def down(fleet_cfg: Config) -> list[str]:
            try:
                return _testbed_for_down(fleet_cfg).down()
            except TestbedError as e:
                if not everything:
                    raise
                failed.append(str(e))
                return []
        removed = down(cfg)
        if everything:
            for fleet_dir in sorted(p.parent for p in cfg.state_dir.glob("*/fleet.tfvars.json")):
                removed += down(cfg.model_copy(update={"fleet": cfg.fleet.model_copy(update={"name": fleet_dir.name})}))
            # on other hosts, before the nested hosts they may be are removed; what is left, tried again after
            removed += gc.collect_recorded(paths.PREFIX, elsewhere=True)
            removed += nested_l1.down(cfg.state_dir)  # everything built inside it goes with it
            removed += gc.collect(paths.PREFIX)
        return removed, failed


def _testbed_for_down(cfg: Config) -> Testbed:
    """The fleet to tear down; when its nested host is already gone, the fleet went with it and
    only this machine's side (state, leftovers) is left to remove."""
    try:
        return Testbed(cfg)
    except NestedHostError:
        return Testbed(cfg, LocalHost())


def tear_down(cfg: Config, asked: dict[str, str | None], everything: bool) -> tuple[list[str], list[str]]:
    """`testbed down`: the fleet torn down, with `everything` every vtb- resource on its hosts too
    (`asked`: the [[hosts]]' answers). (removed, failed): with `everything`, the teardowns that
    failed, said after the others went; without it, a failure raises TestbedError."""
    if not cfg.hosts:
        return OnOneHost.tear_down(cfg, everything)
    hosts.check_answering(cfg.placement, asked)   # a host that does not answer keeps its fleet: say so before touching any
    over = hosts.all_placed(cfg.placement)
    removed = MultiHostFleet(cfg, over).down()
    if everything:
        removed += [f"{r} (on {h.label})" for h in over for r in gc.collect(paths.PREFIX, h)]
    return removed, []


def for_config(cfg: Config) -> UsersFleet:
    """Over [[hosts]]: one part per host the placement gives VMs, once every host answers."""
    if not cfg.hosts:
        return OnOneHost(cfg)
    hosts.check_answering(cfg.placement)
    return MultiHostFleet(cfg, hosts.all_placed(cfg.placement))
