"""The columns of a run's samples (samples.jsonl, samples.csv): name, JSON type, unit and meaning,
in groups. The core's are here (the sample, the point, fio's figures, the configuration, the
environment, the conditions); each plug-in declares its own as `COLUMNS` in its module (a tuple
of groups), and `harness.experiments.catalog()` collects them all. results/README.md's column
reference and the JSON Schema a run's rows validate against (results/sample.schema.json) are both
generated from that catalog (`harness results reference`, `harness results schema`). Every row
has every column of its run, null where a sample has no such field; a name with <...> in it
stands for a family (one column per label or node)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.common import paths

S, I, N, B, O, A = "string", "integer", "number", "boolean", "object", "array"


@dataclass(frozen=True)
class Column:
    name: str
    type: str | tuple[str, ...]
    unit: str
    what: str

    @property
    def pattern(self) -> str | None:
        """A family's name as a regular expression (None for one column)."""
        if "<" not in self.name:
            return None
        return "^" + re.sub(r"<[^>]+>", "[A-Za-z0-9_]+", self.name) + "$"


def column(name: str, type_: str | tuple[str, ...], what: str, unit: str = "") -> Column:
    return Column(name, type_, unit, what)


_c = column
Group = tuple[str, list[Column]]   # a title, and its columns

CORE: list[Group] = [
    ("The sample", [
        _c("metric", S, "what was measured (the metric list below)"),
        _c("value", N, "the figure; null on a failed sample, never a made-up one"),
        _c("unit", S, "the value's unit (IOPS, KiB/s, us, ms, tx/s, ratio, ...)"),
        _c("status", S, "`ok` or `failed`"),
        _c("error", S, "why it failed (empty when ok)"),
    ]),
    ("The point", [
        _c("run_id", S, "the run"),
        _c("experiment", S, "the experiment that measured it"),
        _c("point", S, "the point's name in its experiment (`physical-n2`, `randread-qd1`, `<job>/<direction>`)"),
        _c("group", S, "the experiment whose point it is within a sweep (latency, iops, bandwidth, ...)"),
        _c("block", S, "the sweep block it was measured in (a backend, a node count)"),
        _c("axis", S, "mysql: the swept axis"),
        _c("point_id", S, "unique in the run; names its raw folder (`<run unit>#<job>/<direction>` for a job file's)"),
        _c("point_key", S, "the point's identity across runs: a hash of everything that decides its result (the point "
                           "and its workload, the fleet, disk and backend, the host, its accelerator, the tools' and the "
                           "harness's versions; not the run id)"),
        _c("baseline_point", S, "a ratio's physical point"),
        _c("resumed_anyway", S, "samples measured after `--resume-anyway`: what had changed"),
        _c("repeat", (I, S), "0, 1, ...; `all` for a value derived over the repeats (a ratio)"),
        _c("round_order", I, "position in its shuffled round"),
        _c("seed", I, "the seed of the shuffled rounds"),
        _c("drop_caches", B, "the host's page cache was dropped before the point"),
        _c("env", S, "`physical` or `virtual`"),
        _c("headline", S, "the metric the point is about, as its experiment declares"),
        _c("better", S, "`higher` or `lower`: the headline's direction"),
        _c("noisy_cv_threshold", N, "the CV over which a point's repeats are flagged noisy"),
        _c("vm_count", I, "VMs in the point (host slots for a physical one)"),
        _c("placement", O, "a fleet over [[hosts]]: VMs (or host clients) per host in the point"),
        _c("scope", S, "`vm` or `slot` for one participant, `aggregate` for the point"),
        _c("vm", S, "the participant: a VM's name or `host-slotN`"),
        _c("raw", S, "path of the raw output, in the run folder"),
        _c("point_wall_s", N, "aggregate rows: the point's wall time", "s"),
        _c("n_physical", I, "a ratio: physical repeats it is over"),
        _c("n_virtual", I, "a ratio: virtual repeats it is over"),
        _c("ratio_of", S, "a ratio: the metric it is of"),
        _c("precision_target", N, "`--precision`: the ratio interval's target half-width", "fraction"),
        _c("ratio_ci_rel", N, "`--precision`: the ratio's 95% CI half-width, relative", "fraction"),
        _c("precision_met", B, "`--precision`: the target was met"),
        _c("budget_ended_first", B, "`--precision`: the time budget ended before the target was met"),
    ]),
    ("fio's figures", [
        _c("direction", S, "`read`, `write`, `trim`, or `mixed` (fio's own figure over both); figures fio reports "
                           "apart are never summed"),
        _c("ios", I, "I/Os fio completed"),
        _c("percentiles_us", O, "latency-percentile samples: the whole completion-latency distribution "
                                "(percentile -> value)", "us"),
        _c("percentiles_from", S, "where a point's percentiles come from: the participants' merged histograms"),
        _c("clock_offsets_s", A, "per participant: its node's clock minus this machine's", "s"),
        _c("window_start_spread_s", N, "how far apart the participants' measured runs started", "s"),
        _c("windows_overlap", N, "time all participants ran together over the shortest run", "fraction"),
        _c("windows_overlap_ok", B, "the overlap is at least 0.9 (otherwise the point counts as noisy)"),
        _c("job", S, "a job file's job"),
        _c("group_id", I, "fio's reporting group"),
        _c("job_file", S, "a user's job file"),
        _c("job_file_sha256", S, "its hash"),
        _c("jobs", A, "the file's job names"),
        _c("job_overrides", O, "`--runtime`/`--ramp` over the file's"),
        _c("sync_ios", I, "a psync job's fsyncs"),
        _c("sync_lat_mean_us", N, "their mean latency", "us"),
        _c("sync_percentiles_us", O, "their latency distribution", "us"),
        _c("precondition", O, "`--precondition`: its settings"),
        _c("precondition_fill_s", N, "the fill's time", "s"),
        _c("precondition_fill_mib", N, "the fill's size", "MiB"),
        _c("steady_state_reached", B, "fio found steady state in time"),
        _c("steady_state_after_s", N, "when", "s"),
        _c("steady_state_criterion", S, "fio's criterion"),
        _c("steady_state_window_s", N, "its window", "s"),
        _c("steady_state_why", S, "why no steady state was looked for"),
        _c("job_file_target_replaced", A, "the file's own targets (filename, directory) vtb replaced with its device"),
        _c("trace", S, "replay: the iolog's path"),
        _c("trace_sha256", S, "its hash"),
        _c("trace_version", I, "its iolog version"),
        _c("trace_records", I, "its I/O records"),
        _c("rate_iops", I, "latency-curve: the step's rate cap", "IOPS"),
    ]),
    ("The configuration", [
        _c("backend", S, "the disk backend (`host` on a physical point)"),
        _c("cache", S, "QEMU's cache mode (`n/a` where the backend has no such knob, as below)"),
        _c("aio", S, "QEMU's aio"),
        _c("iothreads", (I, S), "iothreads per VM"),
        _c("num_queues", (I, S), "the virtual disk's queues"),
        _c("qsd_per", S, "vhost-user-blk-qsd: one storage daemon per VM (`vm`) or per device (`device`)"),
        _c("spdk_target", S, "vhost-user-blk-spdk: `harness` (vtb's own target) or `yours`"),
        _c("spdk_interrupt", B, "vhost-user-blk-spdk: interrupt mode (else polling)"),
        _c("spdk_version", S, "vhost-user-blk-spdk: the target's version"),
        _c("spdk_build", S, "vhost-user-blk-spdk: the target's build folder"),
        _c("rw", S, "fio's rw"),
        _c("bs", S, "fio's block size"),
        _c("iodepth", I, "fio's iodepth"),
        _c("numjobs", I, "fio's numjobs"),
        _c("ioengine", S, "fio's ioengine"),
        _c("direct", B, "O_DIRECT"),
        _c("runtime_s", I, "measured seconds", "s"),
        _c("ramp_s", I, "unmeasured warm-up", "s"),
        _c("data_size_bytes", I, "each VM's slice (or the point's data)", "B"),
        _c("device_kind", S, "the fleet's device: file, block, rbd, ..."),
        _c("device", S, "the host device (or array) the point ran on"),
        _c("fleet_vms", I, "VMs in the fleet"),
        _c("vcpus", I, "vCPUs per VM"),
        _c("memory_mib", I, "memory per VM", "MiB"),
        _c("image", S, "the guest image recipe's hash"),
        _c("guest_kernel", S, "`cloud` or `generic`"),
        _c("vm_start", S, "how the fleet's guests started (boot, restore)"),
    ]),
    ("The environment", [
        _c("host", S, "the host kind's name: `local`, `nested`, or an ssh host's"),
        _c("host_cpus", S, "the host's CPUs"),
        _c("l0_accel", S, "a nested host: the accelerator the L1 runs under; `n/a` otherwise"),
        _c("accel", S, "`kvm` or `tcg`, of the guests"),
        _c("accel_reason", S, "why that accelerator"),
        _c("host_kernel", S, "the host's kernel release"),
        _c("host_cmdline", S, "the host kernel's command line"),
        _c("qemu_version", S, "QEMU"),
        _c("libvirt_version", S, "libvirt"),
        _c("host_fio_version", S, "the host's fio"),
        _c("tool_version", S, "the fio, sysbench or db_bench that produced the sample"),
        _c("cpu_model", S, "the host CPU"),
        _c("harness_rev", S, "git revision, `-dirty` if modified"),
        _c("per_host", O, "a run over [[hosts]]: each host's own environment (the columns above, by host)"),
    ]),
    ("The conditions of the point", [
        _c("settle_wait_s", N, "the wait for a quiet host before it", "s"),
        _c("settle_timed_out", B, "the host did not get quiet within the bound"),
        _c("settle_exempt_busy_pct", N, "CPU of daemons that poll by design, not counted against quiet",
           "% of all CPUs"),
        _c("suspended_vms", I, "idle fleet VMs suspended during the point"),
        _c("host_busy_pct", N, "CPU busy over the point", "% of all CPUs"),
        _c("host_iowait_pct", N, "iowait over the point", "% of all CPUs"),
        _c("host_steal_pct", N, "steal over the point", "% of all CPUs"),
        _c("host_other_busy_pct", N, "what else used the CPU", "% of all CPUs"),
        _c("qemu_cpu_s", N, "CPU time of the participating QEMUs", "s"),
        _c("qemu_cpu_pct", N, "the same over the point", "% of one core"),
        _c("<label>_cpu_s", N, "CPU time of a backend's declared daemons: `daemon` (qemu-storage-daemon), `spdk`, "
                               "`ceph`, `tgt`", "s"),
        _c("<label>_cpu_pct", N, "the same over the point", "% of one core"),
        _c("libvirtd_cpu_s", N, "libvirtd's CPU time", "s"),
        _c("libvirtd_cpu_pct", N, "the same over the point", "% of one core"),
        _c("harness_cpu_s", N, "the harness and the host tools it ran", "s"),
        _c("host_quiet", B, "the conditions were clean"),
        _c("quiet_reason", S, "why not"),
        _c("guests_restarted", S, "why a guest was restarted before the point"),
        _c("host_conditions", O, "a fleet over [[hosts]]: each host's own conditions (the columns above, by host)"),
        _c("fleet_rebuilt_after", S, "the block's fleet was built anew before the point: why"),
        _c("retried_after", S, "a point measured again after its guest came back: the first attempt's error"),
        _c("run_wall_s", N, "the tool's wall time", "s"),
    ]),
]

SCHEMA = paths.REPO / "results" / "sample.schema.json"   # generated from the catalog; a unit test keeps it so


class Catalog:
    """Every column: the core's, then the plug-ins' groups."""

    def __init__(self, plugins: list[Group] = ()):
        self.groups = [*CORE, *plugins]
        self.columns = [c for _, cols in self.groups for c in cols]

    def declared(self, name: str) -> Column | None:
        """The column (or family) a name is, or None."""
        exact = next((c for c in self.columns if c.name == name), None)
        return exact or next((c for c in self.columns if c.pattern and re.match(c.pattern, name)), None)

    def json_schema(self) -> dict:
        """The JSON Schema (2020-12) one row of samples.jsonl validates against: every declared
        column typed (null allowed: a row has every column of its run), families by pattern,
        nothing else."""
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "vtb sample row",
            "type": "object",
            "required": ["metric", "value", "unit", "status"],
            "properties": {c.name: {"type": _types(c), "description": c.what + (f" ({c.unit})" if c.unit else "")}
                           for c in self.columns if c.pattern is None},
            "patternProperties": {c.pattern: {"type": _types(c)} for c in self.columns if c.pattern},
            "additionalProperties": False,
        }

    def markdown(self) -> str:
        """The column reference in results/README.md."""
        out = ["<!-- generated from the columns vtb and its plug-ins declare, by `harness results reference`; "
               "do not edit -->"]
        for title, cols in self.groups:
            out += ["", f"**{title}**", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
            out += [f"| `{c.name}` | {_type_text(c)} | {c.unit} | {c.what} |" for c in cols]
        return "\n".join(out) + "\n"


def generated_schema() -> dict:
    """The schema generated from the whole catalog (results/sample.schema.json): what the layers
    below the plug-ins validate a user's samples against."""
    return json.loads(SCHEMA.read_text())


def _types(c: Column) -> list[str]:
    return [*((c.type,) if isinstance(c.type, str) else c.type), "null"]


def _type_text(c: Column) -> str:
    return " or ".join((c.type,) if isinstance(c.type, str) else c.type)
