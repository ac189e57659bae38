"""The cluster a plan names, made or removed wherever it lives: on this machine (local mode) or
over the fleet's hosts (hosts mode). What Terraform's hook and every teardown call."""
from __future__ import annotations

from harness.ceph import hosts, local
from harness.ceph.plan import CephPlan
from harness.hosts import LocalHost


def create(plan: CephPlan) -> str:
    return hosts.create(plan) if plan.hosts else local.create(LocalHost(), plan)


def destroy(plan: CephPlan) -> str:
    return hosts.destroy(plan) if plan.hosts else local.destroy(LocalHost(), plan)
