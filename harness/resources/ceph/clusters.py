"""The cluster a plan names, made or removed wherever it lives: on this machine (local mode) or
over the fleet's hosts (hosts mode). What Terraform's hook and every teardown call."""
from __future__ import annotations

from pathlib import Path

from harness.hosts import LocalHost
from harness.resources.ceph import hosts, local
from harness.resources.ceph.plan import CephPlan


def create(plan: CephPlan) -> str:
    return hosts.create(plan) if plan.hosts else local.create(LocalHost(), plan)


def destroy(plan: CephPlan) -> str:
    return hosts.destroy(plan) if plan.hosts else local.destroy(LocalHost(), plan)


def destroy_recorded(folder: Path) -> list[str]:
    """Removes the clusters whose plans the folder keeps (a plan is kept before its cluster is
    made, so a create cut short is found too), each plan once its cluster is gone; says what went."""
    done = []
    for plan_file in sorted(folder.glob("ceph-*.json")) if folder.is_dir() else []:
        result = destroy(CephPlan.from_json(plan_file.read_text()))
        plan_file.unlink()
        if "nothing" not in result:
            done.append(result)
    return done
