"""Summary tables from samples."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from harness.console import console as shared

from harness.samples import Sample


def vm_scaling_rows(samples: list[Sample]) -> list[dict]:
    """One row per VM count: physical and virtual aggregates side by side (None where failed)."""
    rows: dict[int, dict] = {}
    for s in samples:
        if s.metadata.get("scope") != "aggregate":
            continue
        row = rows.setdefault(s.metadata["vm_count"], {"vm_count": s.metadata["vm_count"], "errors": []})
        env = s.metadata["env"]
        if s.status != "ok":
            row["errors"].append(f"{env}: {s.error}")
            continue
        row[f"{env}_{s.metric}"] = s.value
    return [rows[n] for n in sorted(rows)]


def _fmt(v: float | None, digits: int = 0) -> str:
    return "failed" if v is None else f"{v:,.{digits}f}"


def print_vm_scaling(rows: list[dict], accel: str) -> str:
    """Prints the summary and returns it as plain text (kept in the run folder)."""
    table = Table(title=f"vm-scaling (accel={accel}{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    for col in ("VMs", "phys IOPS", "virt IOPS", "virt IOPS/VM", "virt lat mean us", "p50 us", "p99 us",
                "virt/phys"):
        table.add_column(col, justify="right")
    for r in rows:
        g = r.get
        table.add_row(str(r["vm_count"]), _fmt(g("physical_aggregate_iops")), _fmt(g("virtual_aggregate_iops")),
                      _fmt(g("virtual_iops_per_vm")), _fmt(g("virtual_lat_mean"), 1), _fmt(g("virtual_lat_p50"), 1),
                      _fmt(g("virtual_lat_p99"), 1), _fmt(g("virtual_ve_pe_ratio"), 3))
    console = Console(record=True, highlight=False, width=max(shared.width, 100))
    console.print(table)
    for r in rows:
        for e in r["errors"]:
            console.print(f"[red]{r['vm_count']} VM point failed[/red]: {e}")
    return console.export_text()
