"""`python -m harness.resources raid|ceph create|destroy PLAN`: the fleet's Terraform hooks that
make and remove a RAID array or a Ceph cluster from its plan (idempotent)."""
import sys

from harness.hosts import from_descriptor
from harness.resources import entry, raid
from harness.resources.ceph import clusters
from harness.resources.ceph.plan import CephPlan

if __name__ == "__main__":
    read_raid = raid.RaidPlan.from_json
    entry.main({"raid create": entry.on_plan(read_raid, lambda p: raid.create(from_descriptor(p.host), p)),
                "raid destroy": entry.on_plan(read_raid, lambda p: raid.destroy(from_descriptor(p.host), p), undo=True),
                "ceph create": entry.on_plan(CephPlan.from_json, clusters.create),
                "ceph destroy": entry.on_plan(CephPlan.from_json, clusters.destroy, undo=True)},
               sys.argv[1:], "python -m harness.resources")
