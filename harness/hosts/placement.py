"""Placement: which host each VM of a fleet that spans several hosts runs on.

VMs are numbered across the fleet and dealt round-robin over the hosts that still have room, so
that the first n VMs (what a vm-scaling point of n uses) are spread as evenly as the counts allow.
A host with a fixed count (`vms` in its [[hosts]] table) takes exactly that many."""
from __future__ import annotations


class PlacementError(ValueError):
    pass


def place(total: int, hosts: list[tuple[str, int | None]]) -> list[str]:
    """The host name of each VM 0..total-1. `hosts`: (name, fixed count or None), in config order."""
    if not hosts:
        raise PlacementError("no hosts to place VMs on")
    fixed = sum(n for _, n in hosts if n is not None)
    free = [name for name, n in hosts if n is None]
    if fixed > total or (fixed < total and not free):
        counts = ", ".join(f"{name}={n}" for name, n in hosts if n is not None)
        raise PlacementError(f"the per-host VM counts ({counts}) add up to {fixed}, but the fleet has {total} VMs; "
                             "make them add up to fleet.vms, or leave one host's vms unset to take the rest")
    room = {name: n for name, n in hosts if n is not None}
    # the rest dealt round-robin over the hosts without a fixed count
    for i in range(total - fixed):
        room[free[i % len(free)]] = room.get(free[i % len(free)], 0) + 1
    order, left = [], dict(room)
    while len(order) < total:
        for name, _ in hosts:
            if left.get(name, 0) > 0:
                order.append(name)
                left[name] -= 1
    return order
