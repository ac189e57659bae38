"""A fleet's disks in Ceph, as the rbd backend asks for them: in a cluster vtb makes under the
fleet (ceph.mode = "local": network namespaces on this machine, made and removed by the fleet's
Terraform hooks; "hosts": over the [[hosts]], made once by the fleet that spans them), or in your
own pool (ceph.mode = "existing": only the fleet's image is made, by its record). The fleet
(harness/fleet/testbed.py) asks this store for its image, its checks, its hooks, its record and
its teardown, and knows nothing else of Ceph."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from harness.common.console import step
from harness.common.files import write_atomic
from harness.hosts import Host, LocalHost
from harness.resources import entry
from harness.resources.ceph import clusters, existing
from harness.resources.ceph.bootstrap import PACKAGES
from harness.resources.ceph.images import RbdImage
from harness.resources.ceph.plan import CephFleet, CephPlan, fleet_image, fleet_images, osd_size_problem, plan_for


class FleetCeph:
    what = "Ceph"          # where the fleet's disks are, in a refusal's words
    device_kind = "rbd"    # the kind of the fleet's device (HostDevice.kind)

    def __init__(self, fleet: CephFleet, hosts: Callable[[], list[Host]], host: Host, host_dir: Path, image_base: str):
        """`hosts()`: the fleet's; in hosts mode the storage nodes are the first of them. `image_base`:
        the fleet's image name before its suffix (a host's part has its own)."""
        self.fleet, self.ceph = fleet, fleet.ceph
        self.host, self.host_dir, self.image_base = host, host_dir, image_base
        self.plan: CephPlan | None = (plan_for(fleet, host_dir, hosts()) if self.ceph.mode != "existing"
                                      else None)   # None: your cluster, not made by vtb

    @property
    def spans_hosts(self) -> bool:
        """A cluster over the [[hosts]]: made once for the whole fleet, not by a host's part."""
        return self.plan is not None and bool(self.plan.hosts)

    def image(self) -> RbdImage:
        """In the made cluster's pool over ceph.pool_nodes nodes, or in your pool (named for this
        installation too: a pool may serve several)."""
        c = self.ceph
        if self.plan is not None:
            return fleet_image(self.plan, f"{self.image_base}-device", c.pool_nodes)
        return existing.image(c, self.host_dir, f"{self.image_base}-{existing.installation(self.fleet.state_dir)}-device")

    def host_packages(self) -> tuple[str, ...]:
        """What the fleet's host needs for a cluster vtb makes there (its daemons); none for yours or
        one over the [[hosts]] (their packages are their owner's)."""
        return PACKAGES if self.plan is not None and not self.spans_hosts else ()

    def size_problem(self) -> str | None:
        """Why a cluster vtb makes would fill under the fleet's images, before anything is made."""
        return None if self.plan is None else osd_size_problem(self.ceph, fleet_images(self.fleet))

    def refusal(self) -> str | None:
        """Why your cluster cannot serve the fleet (reads only)."""
        if self.plan is None and (reason := existing.access_problem(self.host, self.ceph)):
            return f"ceph (existing): {reason}"
        return None

    def hooks(self, hook_file: Callable[[str, str], Path]) -> dict[str, str]:
        """The fleet's Terraform hooks that make and remove a local cluster (none otherwise)."""
        if self.plan is None or self.spans_hosts:
            return {"create": "", "destroy": ""}
        plan_file = hook_file("ceph", self.plan.to_json())
        return {what: entry.command("resources", f"ceph {what}", plan_file) for what in ("create", "destroy")}

    def prepare(self, fleet_dir: Path, owner: str) -> list[str]:
        """Your cluster's client conf and the image's record, before Terraform makes the image."""
        if self.plan is not None:
            return []
        return [f"ceph (existing): the fleet's earlier image: {said}"
                for said in existing.prepare(self.ceph, fleet_dir, self.image(), owner, self.fleet.state_dir)]

    def metadata(self) -> dict:
        """The cluster under the fleet: the made one's plan, or which pool of yours and as whom (no key)."""
        if self.plan is not None:
            return {"mode": "hosts" if self.plan.hosts else "local", **json.loads(self.plan.to_json())}
        c = self.ceph
        return {"mode": "existing", "conf": c.conf, "pool": c.pool, "client": c.client}

    def kept_by_parts(self) -> tuple[str, ...]:
        """Name prefixes a host's part leaves when it goes: a cluster over the hosts outlives it."""
        return (self.plan.name,) if self.spans_hosts else ()

    def up_across(self, fleet_dir: Path, plan_path: Callable[[Path, str, str], Path]) -> None:
        """The cluster over the hosts (idempotent), its plan recorded first: a create cut short is
        still found and removed by `down_across`. Another plan's cluster (the config changed) goes first."""
        if not self.spans_hosts:
            return
        text = self.plan.to_json()
        path = plan_path(fleet_dir, "ceph", text)
        if not path.exists():
            for removed in clusters.destroy_recorded(fleet_dir):
                step(removed)
            fleet_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text)
        step(clusters.create(self.plan))



def _removed_by_records(fleet_dir: Path, state_dir: Path) -> list[str]:
    """A made cluster whose plan the fleet's folder keeps, removed again (idempotent), and the image
    in your pool its record names."""
    return clusters.destroy_recorded(fleet_dir) + existing.remove_recorded(LocalHost(), fleet_dir / existing.RECORD,
                                                                           state_dir)


FLEET_RECORDS = (_removed_by_records,)
