"""Repeating a measured point: a fixed count, or adaptively until the 95% CI is tight enough.
Optionally drops the page cache everywhere before each repeat (recorded with every sample)."""
from __future__ import annotations

from typing import Callable

import libvirt

from harness.agent import AgentError, GuestAgent
from harness.analysis.stats import enough
from harness.config import RepeatConfig
from harness.console import step
from harness.hosts import Host, LocalHost


def drop_caches(conn: libvirt.virConnect | None, vm_names: list[str], host: Host = LocalHost()) -> None:
    """Host page cache, and each listed guest's, so a repeat does not read what the last one cached."""
    host.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])
    for name in vm_names:
        res = GuestAgent(conn.lookupByName(name)).exec("/bin/sh", ["-c", "sync; echo 3 > /proc/sys/vm/drop_caches"],
                                                        timeout=30)
        if res.exitcode != 0:
            raise AgentError(f"{name}: dropping the page cache failed")


def repeat(cfg: RepeatConfig, measure: Callable[[int], float | None], before: Callable[[], None] | None = None,
           what: str = "") -> list[float]:
    """Calls measure(i) for repeat i and returns the headline values. A failed repeat (None)
    ends the point: later repeats would not make it trustworthy."""
    values: list[float] = []
    limit = cfg.max_count if cfg.adaptive else cfg.count
    for i in range(limit):
        if limit > 1:
            step(f"      repeat {i + 1}{'' if cfg.adaptive else f'/{limit}'} {what}")
        if cfg.drop_caches and before:
            before()
        value = measure(i)
        if value is None:
            break
        values.append(value)
        if cfg.adaptive and enough(values, cfg.target_rel_ci, minimum=cfg.count):
            break
    return values
