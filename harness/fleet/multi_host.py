"""A fleet that spans hosts ([[hosts]] in the config): one Testbed per host, each with its own
Terraform root and state (the libvirt provider takes one URI per provider block and Terraform
cannot for_each over providers, so one root per host is the plain way), applied in parallel.
VMs are numbered across the fleet and placed by harness/hosts/placement.py.

A store the parts share (the rbd backend's Ceph cluster over the hosts, ceph.mode = "hosts") is
the fleet's, not one host's: it is made before the parts and removed after them, by its plan
kept in the fleet's folder until it is gone."""
from __future__ import annotations

import contextlib
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.common.console import step, warn
from harness.config.core import Config
from harness.fleet.testbed import Testbed, TestbedError, TestbedRecord, plan_path
from harness.hosts import Host
from harness.hosts.placement import place
from harness.resources import leftovers as resource_leftovers


class MultiHostFleet:
    def __init__(self, cfg: Config, hosts: list[Host], run_scoped: bool = False):
        """`run_scoped`: an experiment's own fleet, as Testbed's. A host the placement gives no VM
        has no part, but with no VM at all (a sweep that measures the hosts only) each host has
        one: its device."""
        fixed = {h.name: h.vms for h in cfg.hosts}
        order = place(cfg.fleet.vms, [(h.name, fixed.get(h.name)) for h in hosts])
        self.cfg = cfg
        self.parts = [Testbed(cfg, h, indices=[i for i, name in enumerate(order) if name == h.name],
                              run_scoped=run_scoped) for h in hosts if h.name in order or not order]
        self.dir = cfg.state_dir / cfg.fleet.name
        store = self.parts[0].store if self.parts else None
        self.store = store if store is not None and store.spans_hosts else None   # one for the whole fleet

    @property
    def hosts(self) -> list[Host]:
        """The hosts the placement gives VMs, in the parts' order."""
        return [part.host for part in self.parts]

    def _each(self, what: str, call) -> list:
        """call(part) on every host's part at once; every failure named by its host."""
        with ThreadPoolExecutor(len(self.parts)) as pool:
            futures = [(part, pool.submit(call, part)) for part in self.parts]
        results, errors = [], []
        for part, future in futures:
            try:
                results.append(future.result())
            except Exception as e:  # noqa: BLE001 - every host's error is reported, not only the first
                errors.append(f"{part.host.label}: {e}")
        if errors:
            raise TestbedError(f"{what} failed on {len(errors)} of {len(self.parts)} host(s):\n" + "\n".join(errors))
        return results

    def _store_up(self) -> None:
        """The store the whole fleet shares (a Ceph cluster over the hosts), checked, then made."""
        if self.store is None:
            return
        if reason := self.store.size_problem():   # before anything is made on a host
            raise TestbedError(reason)
        self.store.up_across(self.dir, plan_path)

    def up(self) -> list[TestbedRecord]:
        self._store_up()
        return self._each("testbed up", Testbed.up)

    def ensure(self) -> list[TestbedRecord]:
        """The deployed fleet, brought to the config: a host without its part yet gets it now."""
        self._store_up()
        return self._each("bringing the fleet to the config",
                          lambda part: part.ensure() if part.record_path.exists() else part.up())

    def down(self, quiet: bool = False) -> list[str]:
        try:
            return [r for removed in self._each("testbed down", lambda p: p.down(quiet)) for r in removed]
        finally:   # the cluster outlives no part: removed even when a host's teardown failed
            failing = sys.exc_info()[1] is not None
            try:
                for removed in resource_leftovers.removed_by_fleet_records(self.dir, self.cfg.state_dir):
                    step(removed)
            except Exception as e:
                if not failing:
                    raise
                warn(f"removing what the fleet shares (its Ceph cluster) failed too: {e}")   # the hosts' error stays the one said
            for folder in (self.dir / "hosts", self.dir):   # the fleet's folders, once nothing is left in them
                with contextlib.suppress(OSError):
                    folder.rmdir()


def spanning_metadata(hosts: list[Host], parts: list[TestbedRecord]) -> dict:
    """What a point's samples keep of a fleet over hosts: the first part's, with the whole fleet's
    VM count and each host's device."""
    return {**parts[0].metadata(), "fleet_vms": sum(len(p.vms) for p in parts),
            "device": ",".join(f"{h.name}:{p.device_path}" for h, p in zip(hosts, parts))}


@dataclass
class SpanningRecord:
    """A fleet over hosts once up: each host's part, in the hosts' order."""
    hosts: list[Host]
    parts: list[TestbedRecord]

    def metadata(self) -> dict:
        return spanning_metadata(self.hosts, self.parts)


class SweptOverHosts:
    """A sweep block's fleet over the hosts, as the sweep engine holds a fleet: up as one record,
    down with its cluster. A host lost as it comes up fails the block with its reason (a fleet
    over [[hosts]] is not rebuilt)."""

    def __init__(self, fleet: MultiHostFleet):
        self.fleet = fleet
        self.store = fleet.store

    def up(self) -> SpanningRecord:
        return SpanningRecord(self.fleet.hosts, self.fleet.up())

    def down(self, quiet: bool = False) -> list[str]:
        return self.fleet.down(quiet)

    @staticmethod
    def host_not_answering() -> None:
        return None
