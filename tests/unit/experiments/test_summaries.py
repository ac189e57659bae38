"""Each experiment's own summary (rows over repeats, table, plot) renders from samples as the
pipeline stores them: the matrix family's, with latency percentiles, and vm-scaling's."""
from harness.experiments import matrix_summary, vm_scaling
from harness.report import tables
from harness.results.samples import Sample


def matrix_samples(group: str, metric: str, unit: str) -> list[Sample]:
    out = []
    for backend, base in (("host", 100.0), ("virtio-blk", 160.0), ("nvme", 150.0)):
        for rep, jitter in enumerate((0.0, 4.0, -3.0)):
            meta = {"group": group, "point": "randread-qd1", "backend": backend, "repeat": rep,
                    "env": "physical" if backend == "host" else "virtual", "noisy_cv_threshold": 0.10,
                    "host_quiet": rep != 2, "quiet_reason": "other work used 30% of the host's CPU"}
            out += [Sample(metric, base + jitter, unit, meta)]
            out += [Sample(m, base + jitter + k, "us", meta) for k, m in enumerate(("lat_p50", "lat_p99", "lat_p999"))]
    return out


def test_matrix_table_and_plot(tmp_path):
    rows = matrix_summary.matrix_rows(matrix_samples("latency", "lat_mean", "us"), "latency")
    text = matrix_summary.print_matrix(rows, "latency", "lat_mean", accel="tcg")
    assert "latency: lat_mean (us)" in text and "latency percentiles" in text
    assert "nvme: lat_mean -6%" in " ".join(text.split()) and "p=0.025" in text  # lower is better; 3 repeats decide
    assert "noisy randread-qd1 host lat_mean: conditions not clean in 1 repeat(s)" in " ".join(text.split())
    png = matrix_summary.backends_bars(rows, tmp_path / "latency.png", metric="lat_mean", title="t")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_vm_scaling_table_and_plot(tmp_path):
    samples = []
    for n in (1, 2):
        for env, base in (("physical", 1000.0 * n), ("virtual", 100.0 * n)):
            for rep in range(3):
                meta = {"scope": "aggregate", "vm_count": n, "env": env, "repeat": rep, "host_quiet": True}
                samples.append(Sample("aggregate_iops", base + rep, "IOPS", meta))
    rows = vm_scaling.vm_scaling_rows(samples)
    assert [r["vm_count"] for r in rows] == [1, 2]
    text = vm_scaling.print_vm_scaling(rows, accel="tcg")
    assert "2,001 ±" in text and "VMs" in text
    assert vm_scaling.plot(rows, tmp_path / "v.png", title="t").read_bytes()[:4] == b"\x89PNG"


def test_vm_scaling_of_two_backends_has_a_curve_each_efficiencies_and_a_verdict_per_count(tmp_path):
    """Two backends, each block with its own host baseline: rows per backend, the scaling table, a
    knee per curve, and a best backend named only at the count where the test allows it."""
    samples = []
    for block, per_vm in (("virtio-blk", (100.0, 200.0)), ("nvme", (100.0, 150.0))):
        for i, n in enumerate((1, 2)):
            for env, base in (("physical", 1000.0 * n), ("virtual", per_vm[i])):
                for rep, jitter in enumerate((0.0, 2.0, -2.0)):
                    meta = {"scope": "aggregate", "vm_count": n, "env": env, "repeat": rep, "host_quiet": True,
                            "group": "vm-scaling", "block": block, "point": f"{env}-n{n}",
                            "point_id": f"{block}/{env}-n{n}"}
                    samples.append(Sample("aggregate_iops", base + jitter * (n if block == "nvme" else 1), "IOPS", meta))
    rows = vm_scaling.vm_scaling_rows(samples)
    assert [(r["block"], r["vm_count"]) for r in rows] == [("virtio-blk", 1), ("virtio-blk", 2), ("nvme", 1), ("nvme", 2)]
    text = " ".join(vm_scaling.print_scaling(rows).split())
    assert "virtio-blk: kept rising to 2 VMs" in text and "nvme: kept rising to 2 VMs" in text
    assert "2 VM(s): virtio-blk scales best, +33%" in text
    assert "1 VM(s): no significant difference between" in text
    assert "backend" in vm_scaling.print_vm_scaling(rows, accel="tcg")
    assert vm_scaling.plot(rows, tmp_path / "v.png", title="t").read_bytes()[:4] == b"\x89PNG"


def test_every_summary_names_a_nested_host_and_its_accelerator():
    from harness.results.environment import accel_label
    nested = accel_label({"accel": "kvm", "l0_accel": "tcg"})
    assert nested == "kvm in a nested host under tcg" and accel_label({"accel": "tcg", "l0_accel": "n/a"}) == "tcg"
    text = " ".join(vm_scaling.print_vm_scaling([], accel=nested).split())
    assert "accel=kvm in a nested host under tcg; TCG numbers are not performance numbers" in text


def test_vm_scaling_of_a_job_file_keeps_each_job_and_direction_apart(tmp_path):
    """A job file's facets at the same VM count are rows of their own, never one merged figure."""
    samples = []
    for key, base in (("mix/read", 700.0), ("mix/write", 300.0)):
        for n in (1, 2):
            for env in ("physical", "virtual"):
                for rep in range(2):
                    meta = {"scope": "aggregate", "vm_count": n, "env": env, "repeat": rep, "host_quiet": True,
                            "point": key, "point_id": f"{env}-n{n}#{key}"}
                    samples.append(Sample("aggregate_iops", base * n + rep, "IOPS", meta))
    rows = vm_scaling.vm_scaling_rows(samples)
    assert [(r["facet"], r["vm_count"]) for r in rows] == [("mix/read", 1), ("mix/read", 2), ("mix/write", 1),
                                                           ("mix/write", 2)]
    assert rows[0]["virtual_aggregate_iops"] == 700.5 and rows[2]["virtual_aggregate_iops"] == 300.5
    text = vm_scaling.print_vm_scaling(rows, accel="tcg")
    assert "job/direction" in text and "mix/write" in text
    assert vm_scaling.plot(rows, tmp_path / "v.png", title="t").read_bytes()[:4] == b"\x89PNG"


def test_vm_scaling_takes_a_job_file_with_its_runtime_over_the_files(tmp_path):
    from harness.engine import settings
    from harness.experiments.vm_scaling import EXPERIMENT
    from harness.workloads.fio import FioJob
    assert isinstance(EXPERIMENT.workload(settings.load(None, [])), FioJob)   # vtb's own job by default
    cfg = settings.load(None, ["vm_scaling.profile=oltp-70-30", "vm_scaling.job.runtime_s=3"])
    assert EXPERIMENT.refusal(cfg) is None
    job = EXPERIMENT.workload(cfg)
    assert job.overrides == (("runtime", "3"),) and "runtime=3" in job.render(0)
    bad = tmp_path / "bad.fio"
    bad.write_text("[a]\nrw=randread\nruntime=1\nexec_prerun=id\n")
    said = EXPERIMENT.refusal(settings.load(None, [f"vm_scaling.job_file={bad}"]))
    assert said.startswith(f"{bad} line 4: `exec_prerun`") and "Fix:" in said
    assert "not both" in EXPERIMENT.refusal(settings.load(None, [f"vm_scaling.job_file={bad}",
                                                                 "vm_scaling.profile=oltp-70-30"]))
    assert "rbd" in EXPERIMENT.refusal(settings.load(None, ["vm_scaling.profile=oltp-70-30", "disk.backend=rbd"]))


def test_a_matrix_point_of_several_vms_is_judged_on_their_sum():
    """fio-job --vm-counts 2: each VM's figures are kept, the row shows their sum (and the
    aggregate's merged latency), never a VM's own figure among the repeats."""
    samples = []
    for backend, env, scope_of in (("host", "physical", "slot"), ("virtio-blk", "virtual", "vm")):
        for rep in range(2):
            meta = {"group": "fio-job", "point": "n2/a/read", "backend": backend, "env": env, "repeat": rep,
                    "point_id": f"fio-job/x-n2/{backend}#n2/a/read"}   # as the pipeline names it
            samples += [Sample("iops", 100.0 + rep, "IOPS", {**meta, "scope": scope_of, "vm": w}) for w in ("0", "1")]
            samples += [Sample("aggregate_iops", 200.0 + 2 * rep, "IOPS", {**meta, "scope": "aggregate"}),
                        Sample("lat_mean", 50.0, "us", {**meta, "scope": "aggregate"})]
    (row,) = matrix_summary.matrix_rows(samples, "fio-job")
    assert row["results"]["host"]["iops" + tables.VALUES] == [200.0, 202.0]
    assert row["results"]["virtio-blk"]["iops"] == 201.0 and row["results"]["virtio-blk"]["lat_mean"] == 50.0


def test_fio_job_vm_counts_name_each_counts_points_and_size_the_sweep_fleet():
    from harness.engine import settings
    from harness.experiments.fio_job import EXPERIMENT
    cfg = settings.load(None, ["fio_job.profile=oltp-70-30", "fio_job.vm_counts=[2, 1]"])
    points = EXPERIMENT.points(cfg)
    assert [(p.label, p.vms) for p in points] == [("oltp-70-30-n1", 1), ("oltp-70-30-n2", 2)]
    assert EXPERIMENT.sweep_config(cfg).fleet.vms == 2
    one = settings.load(None, ["fio_job.profile=oltp-70-30"])
    assert [(p.label, p.vms) for p in EXPERIMENT.points(one)] == [("oltp-70-30", 1)]
