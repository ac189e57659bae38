"""A fleet that spans hosts ([[hosts]] in the config): one Testbed per host, each with its own
Terraform root and state (the libvirt provider takes one URI per provider block and Terraform
cannot for_each over providers, so one root per host is the plain way), applied in parallel.
VMs are numbered across the fleet and placed by harness/placement.py."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness.config import Config
from harness.hosts import Host
from harness.placement import place
from harness.testbed import Testbed, TestbedError, TestbedRecord


class Cluster:
    def __init__(self, cfg: Config, hosts: list[Host]):
        fixed = {h.name: h.vms for h in cfg.hosts}
        order = place(cfg.fleet.vms, [(h.name, fixed.get(h.name)) for h in hosts])
        self.cfg = cfg
        self.parts = [Testbed(cfg, h, indices=[i for i, name in enumerate(order) if name == h.name])
                      for h in hosts if h.name in order]

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

    def up(self) -> list[TestbedRecord]:
        return self._each("testbed up", Testbed.up)

    def ensure(self) -> list[TestbedRecord]:
        """The deployed fleet, brought to the config: a host without its part yet gets it now."""
        return self._each("bringing the fleet to the config",
                          lambda part: part.ensure() if part.record_path.exists() else part.up())

    def down(self) -> list[str]:
        return [r for removed in self._each("testbed down", lambda p: p.down()) for r in removed]
