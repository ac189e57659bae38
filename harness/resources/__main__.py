"""`python -m harness.resources raid|ceph create|destroy PLAN`: the fleet's Terraform hooks that
make and remove a RAID array or a Ceph cluster from its plan (idempotent). Destroying from a plan
file that is gone does nothing: nothing was made from it, or it is already removed."""
import sys
from pathlib import Path

from harness.hosts import from_descriptor
from harness.resources import entry, raid
from harness.resources.ceph import clusters
from harness.resources.ceph.plan import CephPlan


def _raid(path: Path, make: bool) -> str | None:
    if not make and not path.exists():
        return None
    plan = entry.plan_in(path, raid.RaidPlan.from_json)
    return (raid.create if make else raid.destroy)(from_descriptor(plan.host), plan)


def _ceph(path: Path, make: bool) -> str | None:
    if not make and not path.exists():
        return None
    plan = entry.plan_in(path, CephPlan.from_json)
    return clusters.create(plan) if make else clusters.destroy(plan)


if __name__ == "__main__":
    entry.main({"raid create": lambda p: _raid(p, True), "raid destroy": lambda p: _raid(p, False),
                "ceph create": lambda p: _ceph(p, True), "ceph destroy": lambda p: _ceph(p, False)},
               sys.argv[1:], "python -m harness.resources")
