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
            row[f"{env}_failed"] = True
            continue
        row[f"{env}_{s.metric}"] = s.value
    return [rows[n] for n in sorted(rows)]


def _cell(row: dict, key: str, digits: int = 0) -> str:
    """A number; 'failed' where the point failed; '-' where it was not measured (e.g. interrupted)."""
    if row.get(key) is not None:
        return f"{row[key]:,.{digits}f}"
    return "failed" if row.get(f"{key.split('_')[0]}_failed") else "-"


def print_vm_scaling(rows: list[dict], accel: str) -> str:
    """Prints the summary and returns it as plain text (kept in the run folder)."""
    table = Table(title=f"vm-scaling (accel={accel}{'; TCG numbers are not performance numbers' if accel == 'tcg' else ''})")
    for col in ("VMs", "phys IOPS", "virt IOPS", "virt IOPS/VM", "virt lat mean us", "p50 us", "p99 us",
                "virt/phys"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(str(r["vm_count"]), _cell(r, "physical_aggregate_iops"), _cell(r, "virtual_aggregate_iops"),
                      _cell(r, "virtual_iops_per_vm"), _cell(r, "virtual_lat_mean", 1),
                      _cell(r, "virtual_lat_p50", 1), _cell(r, "virtual_lat_p99", 1),
                      _cell(r, "virtual_ve_pe_ratio", 3))
    console = Console(record=True, highlight=False, width=max(shared.width, 100))
    console.print(table)
    for r in rows:
        for e in r["errors"]:
            console.print(f"[red]{r['vm_count']} VM point failed[/red]: {e}")
    return console.export_text()
