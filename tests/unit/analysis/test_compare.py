"""compare, baselines, trend and the runs index on synthetic runs with a known change."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from harness.analysis.compare import compare, load_rows, values_by_key
from harness.analysis.trend import trend
from harness.results.samples import Sample
from harness.results.store import RunIndex, RunStore

HARNESS = str(Path(sys.executable).parent / "harness")


def write_run(root: Path, run_id: str, iops: list[float], lat: list[float]) -> Path:
    store = RunStore(root, run_id)
    meta = {"experiment": "vm-scaling", "point": "virtual-n1", "env": "virtual", "backend": "virtio-blk",
            "scope": "aggregate", "headline": "aggregate_iops", "better": "higher"}  # as the pipeline records
    store.add([Sample("aggregate_iops", v, "IOPS", {**meta, "repeat": i}) for i, v in enumerate(iops)]
              + [Sample("lat_mean", v, "us", {**meta, "repeat": i}) for i, v in enumerate(lat)]
              + [Sample("ve_pe_ratio", 0.5, "ratio", meta)])
    store.update_manifest(experiment="vm-scaling", status="completed", environment={"accel": "tcg"})
    return store.dir


def noisy(mean, n=6, seed=0):
    return list(np.random.default_rng(seed).normal(mean, mean * 0.02, n))


def test_planted_20_percent_drop_is_a_regression(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    b = write_run(tmp_path, "b", noisy(800, seed=3), noisy(100, seed=4))
    changes, unpaired = compare(load_rows(a), load_rows(b), alpha=0.05, min_change=0.05)
    by_metric = {c.key[-1]: c for c in changes}
    assert unpaired == 0 and set(by_metric) == {"aggregate_iops", "lat_mean"}  # ratios are derived, not compared
    assert by_metric["aggregate_iops"].regression and by_metric["aggregate_iops"].rel_change < -0.15
    assert not by_metric["lat_mean"].regression and not by_metric["lat_mean"].improvement


def test_no_change_and_small_change_are_not_regressions(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    b = write_run(tmp_path, "b", noisy(1000, seed=5), noisy(103, seed=6))
    changes, _ = compare(load_rows(a), load_rows(b), alpha=0.05, min_change=0.05)
    assert not any(c.regression for c in changes)


def test_higher_latency_is_a_regression(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    b = write_run(tmp_path, "b", noisy(1000, seed=1), noisy(130, seed=7))
    changes, _ = compare(load_rows(a), load_rows(b), alpha=0.05, min_change=0.05)
    assert [c.key[-1] for c in changes if c.regression] == ["lat_mean"]


def test_the_direction_a_sample_declares_decides_what_a_regression_is(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    b = write_run(tmp_path, "b", noisy(1200, seed=3), noisy(100, seed=4))
    for run in (a, b):  # the experiment declares its headline lower-is-better (e.g. a cost)
        rows = [{**r, "better": "lower"} for r in load_rows(run)]
        (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    changes, _ = compare(load_rows(a), load_rows(b), alpha=0.05, min_change=0.05)
    assert [c.key[-1] for c in changes if c.regression] == ["aggregate_iops"]


def test_cli_exit_code_gates_on_regression_and_baseline_file(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    write_run(tmp_path, "b", noisy(800, seed=3), noisy(100, seed=4))
    baseline = tmp_path / "baseline.jsonl"
    baseline.write_text((a / "samples.jsonl").read_text())  # a stored baseline is a copy of a run's samples
    env_args = ["--set", f"results_dir={tmp_path}"]
    bad = subprocess.run([HARNESS, "compare", str(baseline), "b", *env_args], capture_output=True, text=True)
    assert bad.returncode == 1 and "regression" in bad.stdout
    good = subprocess.run([HARNESS, "compare", "a", str(a), *env_args], capture_output=True, text=True)
    assert good.returncode == 0 and "0 regression(s)" in good.stdout
    missing = subprocess.run([HARNESS, "compare", "nope", "a", *env_args], capture_output=True, text=True)
    assert missing.returncode != 0 and "not a run folder" in missing.stderr + missing.stdout


def test_runs_index(tmp_path):
    write_run(tmp_path, "r1", [1.0], [1.0])
    write_run(tmp_path, "r2", [1.0], [1.0])
    index = RunIndex(tmp_path)
    assert [r["run_id"] for r in index.list()] == ["r1", "r2"]
    assert index.find("r2") == tmp_path / "r2" and index.find("r3") is None
    index.path.unlink()
    index.rebuild()
    assert {r["status"] for r in index.list()} == {"completed"}


def test_html_report_lists_failures_skips_and_the_pe_ve_table(tmp_path):
    from harness.report.html import render
    run = write_run(tmp_path, "r", [900.0, 1100.0], [100.0, 110.0])
    store_rows = (run / "samples.jsonl").read_text()
    failed = {"metric": "aggregate_iops", "value": None, "status": "failed", "error": "vm0: fio exited 1",
              "experiment": "vm-scaling", "point": "virtual-n2", "env": "virtual", "scope": "aggregate"}
    retried = {**failed, "value": 95.0, "status": "ok", "error": None, "point_id": "virtual-n1", "repeat": 1,
               "point": "virtual-n1", "retried_after": "vm1: guest agent is not responding\nvm1 restarted"}
    (run / "samples.jsonl").write_text(store_rows + json.dumps(failed) + "\n" + json.dumps(retried) + "\n")
    manifest = json.loads((run / "run.json").read_text())
    manifest["skipped"] = {"4": "exceeds fleet size"}
    (run / "run.json").write_text(json.dumps(manifest))
    page = render([run])
    assert "vm0: fio exited 1" in page and "exceeds fleet size" in page
    assert "measured again, repeat 1 of virtual-n1: its guest was lost and restarted: vm1: guest agent" in page
    assert "1,000.0 ±" in page  # mean and CI of the two repeats
    assert "emulated CPU" in page  # accel=tcg is called out


def test_html_pe_ve_table_keeps_a_sweeps_blocks_apart():
    from harness.report.html import pe_ve_table
    rows = [{"experiment": "ceph-scaling", "point": "write-4k-j1", "block": f"n{n}-uncapped", "backend": "rbd",
             "env": env, "scope": "aggregate", "status": "ok", "metric": "aggregate_bw", "headline": "aggregate_bw",
             "repeat": 0, "value": value} for n, env, value in ((2, "physical", 100.0), (3, "physical", 300.0),
                                                                 (2, "virtual", 50.0), (3, "virtual", 150.0))]
    page = str(pe_ve_table(rows, {}))   # its rows as data, for the template
    assert "ceph-scaling n2-uncapped write-4k-j1" in page and "ceph-scaling n3-uncapped write-4k-j1" in page
    assert "100.0" in page and "300.0" in page and "200.0" not in page   # never averaged over node counts
    matrix = [{**r, "block": "rbd"} for r in rows[:1]]   # fio's matrix: the block is the backend, a column
    assert "ceph-scaling write-4k-j1" in str(pe_ve_table(matrix, {}))
    arrays = [{**r, "experiment": "raid-levels", "group": "raid_levels", "block": None, "setup": setup}
              for r, setup in zip(rows, ("single", "raid5-n4-c512k", "single", "raid5-n4-c512k"))]
    page = str(pe_ve_table(arrays, {}))   # a RAID sweep's arrays: each its own row, never pooled
    assert "raid_levels single write-4k-j1" in page and "raid_levels raid5-n4-c512k write-4k-j1" in page
    assert "200.0" not in page


def test_three_repeats_a_side_decide_a_20_percent_drop(tmp_path):
    """The default repeat count can reach a verdict: the drop with its CI, its p Holm-adjusted."""
    a = write_run(tmp_path, "a", noisy(1000, n=3, seed=1), noisy(100, n=3, seed=2))
    b = write_run(tmp_path, "b", noisy(800, n=3, seed=3), noisy(100, n=3, seed=4))
    changes, _ = compare(load_rows(a), load_rows(b), alpha=0.05, min_change=0.05)
    iops = next(c for c in changes if c.key[-1] == "aggregate_iops")
    assert iops.regression and iops.diff.high < 0.9 and iops.p_value == min(1.0, 2 * iops.diff.p_value)


def test_junit_xml_has_a_case_per_point_and_metric_and_fails_the_regression(tmp_path):
    from junitparser import Failure, JUnitXml
    write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    write_run(tmp_path, "b", noisy(800, seed=3), noisy(100, seed=4))
    out = tmp_path / "ci" / "compare.xml"
    done = subprocess.run([HARNESS, "compare", "a", "b", "--junit", str(out), "--set", f"results_dir={tmp_path}"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "JUnit XML" in done.stdout
    (suite,) = list(JUnitXml.fromfile(str(out)))
    cases = {c.name: c for c in suite}
    assert set(cases) == {"virtual-n1 virtio-blk aggregate_iops", "virtual-n1 virtio-blk lat_mean"}
    (failure,) = cases["virtual-n1 virtio-blk aggregate_iops"].result
    assert isinstance(failure, Failure) and "-> B" in failure.message and "95% CI" in failure.message
    assert cases["virtual-n1 virtio-blk lat_mean"].is_passed


def harness(*args, tmp_path):
    return subprocess.run([HARNESS, *args, "--set", f"results_dir={tmp_path}"], capture_output=True, text=True,
                          timeout=120)


def test_a_baseline_outlives_its_run_and_compare_takes_its_name(tmp_path):
    a = write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    write_run(tmp_path, "b", noisy(800, seed=3), noisy(100, seed=4))
    assert harness("baseline", "save", "main", "a", tmp_path=tmp_path).returncode == 0
    (a / "samples.jsonl").unlink()   # the run folder cleaned away: the baseline keeps its samples
    listed = harness("baseline", "list", tmp_path=tmp_path)
    assert "main" in listed.stdout and str(a) in listed.stdout
    gate = harness("compare", "main", "b", tmp_path=tmp_path)
    assert gate.returncode == 1 and "1 regression(s)" in gate.stdout
    bad = harness("baseline", "save", "no/slash", "b", tmp_path=tmp_path)
    assert bad.returncode != 0 and "Fix:" in bad.stderr and not (tmp_path / "baselines" / "no").exists()
    missing = harness("compare", "nope", "b", tmp_path=tmp_path)
    assert missing.returncode != 0 and "baseline" in missing.stderr


def test_trend_follows_each_point_over_runs_oldest_first(tmp_path):
    runs = [(name, write_run(tmp_path, name, noisy(mean, seed=i), noisy(100, seed=10 + i)))
            for i, (name, mean) in enumerate((("r1", 1000), ("r2", 990), ("r3", 800)))]
    seen = trend(runs, "aggregate_iops")
    assert [s.run_id for s in seen] == ["r1", "r2", "r3"] and seen[2].summary.mean < 850
    assert trend(runs, "aggregate_iops", point="nvme") == []
    out = harness("trend", "aggregate_iops", "--point", "virtual-n1", tmp_path=tmp_path)
    assert out.returncode == 0 and "r3" in out.stdout and (tmp_path / "trend-aggregate_iops.png").exists()
    none = harness("trend", "tps", tmp_path=tmp_path)
    assert none.returncode != 0 and "no run has tps" in none.stderr and "Fix:" in none.stderr


def test_a_point_of_several_vms_is_compared_on_its_own_figures_not_each_vms():
    rows = []
    for rep in range(3):
        meta = {"experiment": "fio-job", "group": "fio-job", "point": "n2/a/read", "backend": "virtio-blk",
                "env": "virtual", "status": "ok", "repeat": rep, "point_id": "fio-job/x-n2/virtio-blk#n2/a/read"}
        rows += [{**meta, "scope": "vm", "vm": v, "metric": "iops", "value": 100.0 + rep} for v in ("vm0", "vm1")]
        rows += [{**meta, "scope": "aggregate", "metric": "aggregate_iops", "value": 200.0 + 2 * rep},
                 {**meta, "scope": "aggregate", "metric": "lat_mean", "value": 50.0}]
    values = values_by_key(rows)
    assert {k[-1]: len(v) for k, v in values.items()} == {"aggregate_iops": 3, "lat_mean": 3}
    one = [{**r, "point": "a/read"} for r in rows if r["scope"] == "vm" and r["vm"] == "vm0"]
    assert {k[-1]: len(v) for k, v in values_by_key(one).items()} == {"iops": 3}   # one VM: its own figures


def test_a_folder_here_never_stands_in_for_a_baseline_of_its_name(tmp_path):
    """`compare main b` run where a folder `main` lies is refused naming both: `baseline:main` and
    `./main` each name one."""
    write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    b = write_run(tmp_path, "b", noisy(800, seed=3), noisy(100, seed=4))
    assert harness("baseline", "save", "main", "a", tmp_path=tmp_path).returncode == 0
    here = tmp_path / "work"
    (here / "main").mkdir(parents=True)
    (here / "main" / "samples.jsonl").write_text((b / "samples.jsonl").read_text())   # no regression against b

    def compare_here(*runs):
        return subprocess.run([HARNESS, "compare", *runs, "--set", f"results_dir={tmp_path}"], capture_output=True,
                              text=True, timeout=120, cwd=here)
    both = compare_here("main", "b")
    assert both.returncode != 0 and "regression" not in both.stdout
    assert "baseline:main" in both.stderr and "./main" in both.stderr and "Fix:" in both.stderr
    assert str(here / "main") in both.stderr and str(tmp_path / "baselines" / "main") in both.stderr
    assert compare_here("baseline:main", "b").returncode == 1   # the baseline: a's samples, and b regressed
    assert compare_here("./main", "b").returncode == 0
    assert "no baseline of that name" in compare_here("baseline:nope", "b").stderr


def test_a_point_the_baseline_measured_and_the_run_lost_fails_the_gate(tmp_path):
    """The run under test failed the point that would have regressed: not a pass. Exit 3 (its points
    failed), the error named, a failed JUnit case; --allow-failed-points accepts it, still listed."""
    from junitparser import Failure, JUnitXml
    write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    store = RunStore(tmp_path, "b")
    meta = {"experiment": "vm-scaling", "point": "virtual-n1", "env": "virtual", "backend": "virtio-blk",
            "scope": "aggregate", "headline": "aggregate_iops", "better": "higher", "repeat": 0}
    store.add([Sample("aggregate_iops", None, "IOPS", meta, status="failed", error="fio on vtb-ci-vm0 did not finish")])
    store.update_manifest(experiment="vm-scaling", status="completed-with-failures")
    out = tmp_path / "compare.xml"
    gate = harness("compare", "a", "b", "--junit", str(out), tmp_path=tmp_path)
    assert gate.returncode == 3, gate.stdout + gate.stderr
    assert "lost" in gate.stdout and "did not finish" in gate.stdout and "1 point(s) measured in A were lost" in gate.stdout
    (suite,) = list(JUnitXml.fromfile(str(out)))
    (lost,) = [c for c in suite if c.result]
    assert lost.name == "virtual-n1 virtio-blk" and isinstance(lost.result[0], Failure)
    assert "failed in B: fio on vtb-ci-vm0 did not finish" in lost.result[0].message
    allowed = harness("compare", "a", "b", "--allow-failed-points", "--json", tmp_path=tmp_path)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert json.loads(allowed.stdout)["lost"] == [{"experiment": "vm-scaling", "group": "", "point": "virtual-n1",
                                                   "backend": "virtio-blk", "env": "virtual",
                                                   "why": "failed in B: fio on vtb-ci-vm0 did not finish"}]


def test_min_change_reads_a_percentage_and_refuses_a_bare_number_above_one(tmp_path):
    """--min-change 5 once meant 500% and passed a 50% drop: a percentage or a fraction now."""
    write_run(tmp_path, "a", noisy(1000, seed=1), noisy(100, seed=2))
    write_run(tmp_path, "b", noisy(500, seed=3), noisy(100, seed=4))
    for given in ("5%", "0.05"):
        gate = harness("compare", "a", "b", "--min-change", given, tmp_path=tmp_path)
        assert gate.returncode == 1 and "at least 5%" in gate.stdout, gate.stdout + gate.stderr
    ambiguous = harness("compare", "a", "b", "--min-change", "5", tmp_path=tmp_path)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr and "5%" in ambiguous.stderr
