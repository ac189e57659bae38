"""The report's verdict: per workload, the backends ranked against bare metal, a winner named only
where Welch's test (Holm over the workloads) allows, a tie otherwise, and one recommendation per
priority; the page opens with it, and every summary table is an HTML table."""
import json
import re
from pathlib import Path

from harness.report import tables, verdict
from harness.report.html import render
from harness.results.store import RunStore


def matrix_rows(shift: dict[str, float], point: str = "randread-qd16", reps=(0.0, 2.0, -1.5)) -> list[dict]:
    """A backends run as the pipeline stores it: per backend's block, host and VM repeats of the
    headline, p99 and I/Os per CPU-second."""
    rows = []
    for backend, factor in shift.items():
        for i, jitter in enumerate(reps):
            base = {"experiment": "backends", "group": "iops", "point": point, "block": backend, "repeat": i,
                    "status": "ok", "headline": "iops", "better": "higher", "scope": "vm"}
            rows.append({**base, "env": "physical", "backend": "host", "metric": "iops", "value": 1000 + jitter})
            rows.append({**base, "env": "virtual", "backend": backend, "metric": "iops", "value": factor * (100 + jitter)})
            rows.append({**base, "env": "virtual", "backend": backend, "metric": "lat_p99", "value": 500 / factor + jitter})
            rows.append({**base, "env": "virtual", "backend": backend, "metric": "ios_per_cpu_s",
                         "value": 50 * factor + jitter})
    return rows


def test_three_repeats_name_a_clear_winner_with_its_share_of_bare_metal():
    (w,) = verdict.workloads(matrix_rows({"virtio-blk": 2.0, "nvme": 1.0}))
    assert [e.backend for e in w.entries] == ["virtio-blk", "nvme"]
    assert w.winner["iops"] == "virtio-blk" and w.said["iops"].startswith("virtio-blk: iops +100%")
    share = w.entries[0].of_host
    assert 0.19 < share.low < share.ratio < share.high < 0.21   # 0.2x bare metal, with its CI
    assert w.winner["latency"] == "virtio-blk" and w.winner["efficiency"] == "virtio-blk"
    assert verdict.recommendation([w], "iops").startswith("Prefer virtio-blk for the headline metric: significantly "
                                                          "best on 1 of 1 tested workload(s)")


def test_a_difference_within_the_noise_is_a_tie_with_its_bound():
    (w,) = verdict.workloads(matrix_rows({"virtio-blk": 1.01, "nvme": 1.0}, reps=(0.0, 9.0, -8.0)))
    assert w.winner["iops"] is None and re.match(r"tie: virtio-blk and nvme differ by no more than \d+% in iops",
                                                  w.said["iops"])
    assert "No backend is significantly ahead" in verdict.recommendation([w], "iops")


def test_holm_over_many_workloads_can_withhold_a_winner_a_single_test_would_name():
    edge = {"virtio-blk": 1.08, "nvme": 1.0}
    (alone,) = verdict.workloads(matrix_rows(edge, reps=(0.0, 3.0, -3.0)))
    many = verdict.workloads(matrix_rows(edge, reps=(0.0, 3.0, -3.0)) + [
        r for i in range(8) for r in matrix_rows({"virtio-blk": 1.0, "nvme": 1.0}, point=f"p{i}", reps=(0.0, 9.0, -8.0))])
    assert alone.winner["iops"] == "virtio-blk"
    assert next(w for w in many if w.name.endswith("randread-qd16")).winner["iops"] is None


def test_the_page_opens_with_the_verdict_and_every_summary_table_is_html(tmp_path):
    store = RunStore(tmp_path, "r")
    (store.dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in matrix_rows(
        {"virtio-blk": 2.0, "nvme": 1.0})))
    store.update_manifest(experiment="backends", status="completed", environment={"accel": "tcg"}, config={"a": 1})
    from rich.table import Table
    t = Table(title="iops: iops (IOPS)", caption="mean ± 95% CI")
    t.add_column("point")
    t.add_column("host", justify="right")
    t.add_row("randread-qd16", "1,000.2 ±4.3 (CV 0%)")
    with tables.recorded() as shown:
        tables.render([t], [("randread-qd16", "vm0: boom")], notes=[("randread-qd16 host iops", "CV 12% > 10%")])
        tables.record_text("Method and limits", ["The first\nparagraph.", "", "The second."])
        tables.record_text("scaling verdict", ["virtio-blk: it kept rising"], verdict=True)   # the study's answer
        tables.record_text("F2FS against EXT4:", ["raid0: 5.0x"], verdict=True)
    (store.dir / "summary.json").write_text(json.dumps(shown))
    page = render([store.dir], prefer="latency")
    assert page.index("Verdict") < page.index("Physical against virtual") < page.index("<h3>Summary")
    assert "Prefer virtio-blk for p99 latency" in page and "0.20x (0.19-0.2" in page
    assert "<caption>iops: iops (IOPS)</caption>" in page and "<td class=\"l\">randread-qd16</td>" in page
    assert "vm0: boom" in page and "CV 12% &gt; 10%" in page
    assert page.count("<pre>") == 1 and "<details><summary>Configuration</summary><pre>" in page   # only the config
    assert "<h4>Method and limits</h4><p>The first paragraph.</p><p>The second.</p>" in page
    assert page.index("Verdict") < page.index("<b>Scaling verdict</b><p>virtio-blk: it kept rising</p>") < page.index(
        "Prefer virtio-blk") and page.count("it kept rising") == 1   # opens the verdict, not repeated in the summary
    assert "<b>F2FS against EXT4:</b>" in page   # its title as written
    (store.dir / "summary.json").unlink()   # a run from before: its summary.txt, kept whole
    (store.dir / "summary.txt").write_text("┏━━┓ old table")
    assert "<summary>summary.txt</summary><pre>┏━━┓ old table</pre>" in render([store.dir])


def test_a_sweeps_block_names_the_workload_and_its_host_baseline_pairs_with_it():
    """ceph-scaling: the block (a node count) names the workload, host and rbd alike."""
    rows = [{"experiment": "ceph-scaling", "point": "write-4k-j1", "block": f"n{n}-uncapped", "repeat": i,
             "backend": "host" if env == "physical" else "rbd", "env": env, "scope": "aggregate", "status": "ok",
             "metric": "aggregate_bw", "headline": "aggregate_bw", "better": "higher", "value": value + i}
            for n, env, value in ((2, "physical", 100.0), (3, "physical", 300.0), (2, "virtual", 50.0),
                                  (3, "virtual", 150.0)) for i in range(3)]
    found = {w.name: w for w in verdict.workloads(rows)}
    assert set(found) == {"ceph-scaling n2-uncapped write-4k-j1", "ceph-scaling n3-uncapped write-4k-j1"}
    assert all(0.45 < w.entries[0].of_host.ratio < 0.55 for w in found.values())


def test_raid_setups_are_workloads_of_their_own_and_old_runs_get_their_headline():
    rows = [{**r, "setup": setup, "value": r["value"] * k} for setup, k in (("single", 1), ("raid0-n4-c512k", 3))
            for r in matrix_rows({"virtio-blk": 2.0, "nvme": 1.0})]
    names = {w.name for w in verdict.workloads(rows)}
    assert names == {"iops single randread-qd16", "iops raid0-n4-c512k randread-qd16"}
    old = [{k: v for k, v in r.items() if k not in ("headline", "better")} for r in matrix_rows({"virtio-blk": 2.0})]
    assert verdict.workloads(old) == [] and verdict.workloads(old, {"iops": "iops"})[0].entries[0].backend == "virtio-blk"


def test_a_priority_nothing_measured_makes_no_recommendation():
    rows = [r for r in matrix_rows({"virtio-blk": 2.0, "nvme": 1.0}) if r["metric"] != "ios_per_cpu_s"]
    found = verdict.workloads(rows)
    assert verdict.recommendation(found, "efficiency").startswith("No workload could be tested on I/Os per CPU-second")
    assert found[0].said["efficiency"] == "not measured (I/Os per CPU-second)"


def test_backends_are_ranked_by_what_the_test_compares_and_a_winner_needs_its_whole_ci_ahead():
    """X's mean (50.5) is above Y's (40), its geometric mean (10), which the test compares, far
    below: ranked by the mean, the verdict said "X: iops -75% (95% CI -92% to -24%) against Y" and
    "Prefer X"."""
    x, y = [1.0] * 10 + [100.0] * 10, [36 + 8 * i / 19 for i in range(20)]
    rows = [{"experiment": "backends", "group": "iops", "point": "p", "block": backend, "repeat": i, "status": "ok",
             "headline": "iops", "better": "higher", "scope": "vm", "env": "virtual", "backend": backend,
             "metric": "iops", "value": v} for backend, values in (("X", x), ("Y", y)) for i, v in enumerate(values)]
    (w,) = verdict.workloads(rows)
    assert [e.backend for e in w.entries] == ["Y", "X"]
    assert w.winner["iops"] == "Y" and w.said["iops"].startswith("Y: iops +")
    assert verdict.recommendation([w], "iops").startswith("Prefer Y")


def raid_rows(levels: dict[str, float], reps=(0.0, 2.0, -1.5)) -> list[dict]:
    """A raid-levels run as the pipeline stores it: one backend, each array a setup whose points
    declare it as the choice, with the host measured on the same array."""
    rows = []
    for setup, factor in levels.items():
        for i, jitter in enumerate(reps):
            base = {"experiment": "raid-levels", "group": "raid_levels", "point": "randwrite-direct", "setup": setup,
                    "choice": setup, "workload": "randwrite-direct", "repeat": i, "status": "ok", "headline": "bw",
                    "better": "higher", "scope": "vm", "metric": "bw"}
            rows.append({**base, "env": "physical", "backend": "host", "value": factor * (1000 + jitter)})
            rows.append({**base, "env": "virtual", "backend": "virtio-blk", "value": factor * (800 + jitter)})
    return rows


def test_a_raid_sweep_ranks_its_arrays_each_against_its_own_host():
    (w,) = verdict.workloads(raid_rows({"single": 1.0, "raid0-n4-c512k": 3.0, "raid5-n4-c512k": 1.5}))
    assert w.name == "raid_levels randwrite-direct" and w.noun == "setup"
    assert [e.backend for e in w.entries] == ["raid0-n4-c512k", "raid5-n4-c512k", "single"]
    assert all(0.79 < e.of_host.ratio < 0.81 for e in w.entries)   # each array's VM against its own host
    assert w.winner["iops"] == "raid0-n4-c512k"
    said = verdict.recommendation([w], "iops")
    assert said.startswith("Prefer raid0-n4-c512k") and "virtio-blk" not in said


def test_a_raid_sweeps_report_names_its_setups(tmp_path):
    store = RunStore(tmp_path, "raid")
    store.update_manifest(experiment="raid-levels", status="completed", environment={"accel": "kvm"})
    rows = raid_rows({"single": 1.0, "raid0-n4-c512k": 3.0})
    (store.dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = render([store.dir])
    assert "Each workload's setups, best first" in page and "Prefer raid0-n4-c512k" in page


def test_a_report_reads_rows_whose_unset_columns_are_null(tmp_path):
    """A run's rows carry every column, null where a sample has none (a VM's own sample has no
    overlap of participants, a failed one no conditions): the page reads a null as not measured."""
    fixture = Path(__file__).parents[2] / "fixtures" / "runs" / "vm-scaling.samples.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines()]
    columns = {k for r in rows for k in r}
    store = RunStore(tmp_path, "nulls")
    store.update_manifest(experiment="vm-scaling", status="completed", environment={"accel": "tcg"})
    (store.dir / "samples.jsonl").write_text("".join(json.dumps({k: r.get(k) for k in sorted(columns)}) + "\n"
                                                     for r in rows))
    assert "Verdict" in render([store.dir])
    assert tables.unquiet_reasons({"host_quiet": None, "windows_overlap_ok": None}) == []


def test_a_block_whose_fleet_did_not_come_up_is_on_the_page(tmp_path):
    store = RunStore(tmp_path, "lost")
    store.update_manifest(experiment="raid-levels", status="completed-with-failures", environment={"accel": "kvm"},
                          blocks_failed={"raid5-n4-c512k": "host nested0 lost"})
    rows = raid_rows({"single": 1.0})
    (store.dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "not measured: block raid5-n4-c512k (its fleet did not come up: host nested0 lost)" in render([store.dir])
