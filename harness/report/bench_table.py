"""`harness bench`'s figures as the one generated table of docs/benchmarks.md: each figure with
what it measures, and the date, machine and accelerator of the run that measured it."""
from __future__ import annotations

import re

FIGURES = ("<!-- begin: harness bench -->", "<!-- end: harness bench -->")
RUNS = ("<!-- begin: harness bench --runs -->", "<!-- end: harness bench --runs -->")   # the figures read from runs

# figure key -> what it measures; a figure not listed here is shown under its key
LABELS = {
    "first_restore_up_1_vm_s": "the first restore of a new VM shape (a boot and a save make its template, then the restore), s",
    "cold_up_s": "cold `testbed up` (fleet from nothing; image, provider, accelerator probe and template cached), s",
    "warm_up_s": "warm `testbed up` (fleet already up), s",
    "agents_ready_s": "all agents answering after the cold `testbed up`, s",
    "qemu_start_to_guest_ping_s": "QEMU start to guest-ping, a cold boot, s",
    "qemu_start_to_guest_ping_generic_kernel_s": "QEMU start to guest-ping with the generic kernel (f2fs, nilfs2), s",
    "overhead_per_point_s": "orchestration overhead per point (wall minus runtime and ramp, settle wait included), s",
    "settle_wait_per_point_s": "of which the settle wait (the quiet host is checked over `settle.window_s` windows), s",
    "harness_to_plain_ratio": "harness physical IOPS / plain `fio` by hand, same device and job: mean",
    "harness_to_plain_ci95": "the same: 95% CI half-width",
    "harness_to_plain_pairs": "the same: interleaved pairs measured",
    "fio_parse_ms_per_output": "reading one fio report (vtb's one-job parser), ms",
    "fio_parse_jobs_ms_per_output": "reading one fio report per job and direction, ms",
    "ceph_3_nodes_active_clean_s": "a local Ceph cluster of 3 storage nodes (1 OSD each), nothing to every PG active+clean, s",
    "guest_image_qcow2_mib": "the main job's guest image (qcow2, zstd-compressed), MiB",
    "guest_initramfs_mib": "its initramfs (only what mounts the root disk), MiB",
    "full_guest_image_qcow2_mib": "the full guest image (every workload's tools, both kernels), MiB",
    "nested_host_image_qcow2_mib": "the nested host's image (qcow2, the full guest image inside it), MiB",
    "nested_up_s": "`harness host nested up` from nothing (its drives prefilled, boot, libvirtd reachable), s",
    "nested_kvm_probe_s": "the accelerator probe inside it (a kernel boots under nested KVM), s",
    "nested_l2_agents_ready_1_vm_s": "an L2 fleet of 1 VM in it: the agent answering, from the start of `terraform apply`, s",
    "nested_raid5_create_s": "RAID 5 of its drives: `raid create` (safety checks, mdadm, resync wait), s",
    "nested_raid5_destroy_s": "the same array's `raid destroy` (stop, zero superblocks), s",
    "nested_down_s": "`harness host nested down`, s",
    "nested_failed": "the nested host's figures stopped",
    "main_job_run_id": "the main job (`harness run vm-scaling`, its defaults): its last run in the results folder, "
                       "read from its samples",
    "main_job_wall_s": "its wall time, s",
    "main_job_fio_s": "the time fio ran in it (each point run's runtime and ramp), s",
    "main_job_wall_over_fio": "its wall time over its fio time",
    "main_job_overhead_per_point_s": "its overhead per point beyond fio and the settle wait, s",
    "main_job_settle_wait_per_point_s": "its settle wait per point, s",
    "main_job_start_skew_s": "how far apart a point's participants began their measured runs (fio's own times), s",
    "first_result_steps_s": "a fresh machine (`scripts/first-result.sh`): each set-up step's own time (they run side by side), s",
    "first_result_testbed_up_s": "the same: `make testbed up`, from the first command, s",
    "first_result_first_point_s": "the same: the main job's first measured point, from the first command, s",
    "first_result_s": "the same: the main job's result (its run complete), from the first command, s",
    "first_result_measured_on": "the same: measured on",
}
_AGENTS = re.compile(r"agents_ready_(\d+)_vms_(booted|restored)_s")
_MERGED = re.compile(r"percentiles_of_(\d+)_merged_histograms_ms")
_CONTEXT = ("accel", "vms", "runtime_s", "run_id", "measured_on", "machine")


def _label(key: str) -> str:
    if m := _AGENTS.fullmatch(key):
        return f"all agents answering, from the start of `terraform apply`: {m[1]} VM(s) {m[2]}, s"
    if m := _MERGED.fullmatch(key):
        return f"the percentiles of {m[1]} merged fio histograms, ms"
    return LABELS.get(key, key)


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _table(figures: dict) -> str:
    """A row per figure (a figure by part: a row per part), context keys left out."""
    out = ["| figure | value |", "|---|---|"]
    for key, v in figures.items():
        if key in _CONTEXT:
            continue
        if isinstance(v, dict):
            out += [f"| {_label(key)}: {part} | {_value(x)} |" for part, x in v.items()]
        else:
            out.append(f"| {_label(key)} | {_value(v)} |")
    return "\n".join(out)


def markdown(figures: dict) -> str:
    """The table, then the run it came from: when, on what machine, under which accelerator."""
    return (_table(figures) + f"\n\nMeasured on {figures.get('measured_on', 'an unrecorded date')}, "
            f"{figures.get('machine', 'an unrecorded machine')}, accel={figures.get('accel', '?')}, "
            f"{figures.get('vms', '?')} VM(s), fio {figures.get('runtime_s', '?')} s points "
            f"(run {figures.get('run_id', '?')}); generated by `make bench`.\n")


def runs_markdown(figures: dict) -> str:
    """The figures read from the main job's last run and a fresh machine's log, each row named for
    what it was read from."""
    if not figures:
        return ("No main job has completed here, and no fresh machine's log is at hand: run `harness run "
                "vm-scaling`, or `scripts/first-result.sh` on a fresh machine, then `harness bench --runs`.\n")
    return _table(figures) + "\n\nRead from those runs; generated by `harness bench --runs` (and `make bench`).\n"


def is_bench(figures) -> bool:
    """Whether a JSON document is the figures a bench writes (a mapping with its bring-up figures)."""
    return isinstance(figures, dict) and "cold_up_s" in figures and "accel" in figures
