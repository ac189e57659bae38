"""docs/benchmarks.md's table from `harness bench`'s figures: every figure with what it measures,
the run's date and machine under it, and only the page's marked section rewritten."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.report import bench_table, sections

HARNESS = str(Path(sys.executable).parent / "harness")

# the shape `harness bench` writes (results/bench-*.json), its values from a bench on the development machine
FIGURES = {
    "first_restore_up_1_vm_s": 17.1, "agents_ready_1_vms_booted_s": 11.0, "agents_ready_1_vms_restored_s": 6.2,
    "qemu_start_to_guest_ping_generic_kernel_s": 12.9, "cold_up_s": 10.6, "agents_ready_s": 8.4, "warm_up_s": 0.68,
    "qemu_start_to_guest_ping_s": 9.9,
    "overhead_per_point_s": {"physical-n1": 1.39, "virtual-n1": 2.63},
    "settle_wait_per_point_s": {"physical-n1": 1.01, "virtual-n1": 1.02},
    "harness_to_plain_ratio": 1.0, "harness_to_plain_ci95": 0.049, "harness_to_plain_pairs": 40,
    "accel": "tcg", "vms": 2, "runtime_s": 3, "run_id": "20261127-233000-vm-scaling-1",
    "measured_on": "2026-11-27", "machine": "Intel Xeon, 2 cores, 24 GiB",
    "fio_parse_ms_per_output": 0.8, "percentiles_of_12_merged_histograms_ms": 3.1,
    "ceph_3_nodes_active_clean_s": 38.3,
}


def test_every_figure_has_a_row_and_the_run_is_named():
    text = bench_table.markdown(FIGURES)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "figure" not in line]
    assert len(rows) == 18   # 16 figures, two of them per point
    assert "| all agents answering, from the start of `terraform apply`: 1 VM(s) restored, s | 6.200 |" in rows
    assert ("| orchestration overhead per point (wall minus runtime and ramp, settle wait included), s: virtual-n1 "
            "| 2.630 |") in rows
    assert "| the percentiles of 12 merged fio histograms, ms | 3.100 |" in rows
    assert not any("run_id" in r or "machine" in r for r in rows)
    assert "Measured on 2026-11-27, Intel Xeon, 2 cores, 24 GiB, accel=tcg, 2 VM(s), fio 3 s points" in text


def test_the_images_and_the_nested_host_have_rows_of_their_own():
    nested = {**FIGURES, "guest_image_qcow2_mib": 129.7, "full_guest_image_qcow2_mib": 258.5, "nested_up_s": 15.2,
              "nested_kvm_probe_s": 7.7, "nested_l2_agents_ready_1_vm_s": 44.0, "nested_raid5_create_s": 8.4,
              "nested_raid5_destroy_s": 3.1, "nested_down_s": 1.2}
    text = bench_table.markdown(nested)
    assert "| the main job's guest image (qcow2, zstd-compressed), MiB | 129.7 |" in text
    assert "| the full guest image (every workload's tools, both kernels), MiB | 258.5 |" in text
    assert "| an L2 fleet of 1 VM in it: the agent answering, from the start of `terraform apply`, s | 44.0 |" in text
    assert not [line for line in text.splitlines() if line.startswith(("| nested_", "| guest_", "| full_"))]


def test_only_the_marked_section_changes(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\nbefore\n\n{bench_table.FIGURES[0]}\nold\n{bench_table.FIGURES[1]}\n\nafter\n")
    assert sections.has_section(page, bench_table.FIGURES)
    sections.splice(page, "new table\n", bench_table.FIGURES)
    assert page.read_text() == f"# B\n\nbefore\n\n{bench_table.FIGURES[0]}\nnew table\n{bench_table.FIGURES[1]}\n\nafter\n"


def test_the_command_writes_an_earlier_runs_table(tmp_path):
    figures, page = tmp_path / "bench.json", tmp_path / "benchmarks.md"
    figures.write_text(json.dumps(FIGURES))
    page.write_text(f"# B\n{bench_table.FIGURES[0]}\n{bench_table.FIGURES[1]}\n")
    done = subprocess.run([HARNESS, "bench", "--from", str(figures), "--docs", str(page)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "| warm `testbed up` (fleet already up), s | 0.680 |" in page.read_text()


def test_a_page_without_the_section_is_refused_unchanged(tmp_path):
    figures, page = tmp_path / "bench.json", tmp_path / "benchmarks.md"
    figures.write_text(json.dumps(FIGURES))
    page.write_text("# B\nno markers\n")
    done = subprocess.run([HARNESS, "bench", "--from", str(figures), "--docs", str(page)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--docs" in done.stderr and "fix: add both markers" in done.stderr
    assert page.read_text() == "# B\nno markers\n"


def test_docs_page_has_the_section():
    assert sections.has_section(Path(__file__).parents[3] / "docs" / "benchmarks.md", bench_table.FIGURES)


def test_an_earlier_run_without_a_page_prints_its_table_and_other_json_is_refused(tmp_path):
    figures, other = tmp_path / "bench.json", tmp_path / "run.json"
    figures.write_text(json.dumps(FIGURES))
    other.write_text(json.dumps({"status": "completed"}))
    done = subprocess.run([HARNESS, "bench", "--from", str(figures)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "| warm `testbed up` (fleet already up), s | 0.680 |" in done.stdout
    done = subprocess.run([HARNESS, "bench", "--from", str(other)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--from" in done.stderr and "Traceback" not in done.stderr
