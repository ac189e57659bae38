"""The exit statuses a CI job relies on, each from a real command (the failed-points status from a
real run: tests/integration/test_fleet_lifecycle.py), and the commands' JSON output."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from harness.common.exits import Exit
from harness.results.samples import Sample
from harness.results.store import RunStore

HARNESS = str(Path(sys.executable).parent / "harness")


def harness(*args, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([HARNESS, *args, "--set", f"results_dir={results}"], capture_output=True, text=True,
                          timeout=120)


def a_run(root: Path, run_id: str, mean: float) -> Path:
    store = RunStore(root, run_id)
    store.update_manifest(experiment="vm-scaling", status="completed", environment={"accel": "tcg"})
    meta = {"experiment": "vm-scaling", "point": "virtual-n1", "point_id": "virtual-n1", "env": "virtual",
            "backend": "virtio-blk", "scope": "aggregate", "headline": "aggregate_iops", "better": "higher"}
    values = np.random.default_rng(len(run_id)).normal(mean, mean * 0.02, 5)
    store.add([Sample("aggregate_iops", float(v), "IOPS", {**meta, "repeat": i}) for i, v in enumerate(values)])
    time.sleep(0.01)   # `latest` is the run that started last
    return store.dir


@pytest.mark.parametrize("args", [["compare", "nosuchrun1", "nosuchrun2"], ["baseline", "save", "main", "nosuchrun"],
                                  ["trend", "no_such_metric"], ["report", "nosuchrun"],
                                  ["run", "vm-scaling", "--resume", "nosuchrun"], ["run", "vm-scaling", "--precision", "2"],
                                  ["run", "vm-scaling", "--run-id", "../escape"], ["--set", "fleet.vms=0", "runs"]])
def test_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path, args):
    a_run(tmp_path, "a", 1000)
    out = subprocess.run([HARNESS, *args, "--set", f"results_dir={tmp_path}"] if args[0] != "--set" else
                         [HARNESS, "runs", *args[:2]], capture_output=True, text=True, timeout=120)
    assert out.returncode == Exit.BAD_INPUT, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_a_regression_exits_1_and_no_regression_0_and_both_read_as_json(tmp_path):
    a_run(tmp_path, "a", 1000)
    a_run(tmp_path, "b", 800)
    worse = harness("compare", "a", "--json", results=tmp_path)     # against the latest run: b
    assert worse.returncode == Exit.REGRESSION, worse.stdout + worse.stderr
    data = json.loads(worse.stdout)
    assert data["b"] == "latest" and data["b_folder"] == str(tmp_path / "b")   # the run `latest` named
    assert data["a_folder"] == str(tmp_path / "a") and data["regressions"] == 1 and data["changes"][0]["regression"]
    assert data["changes"][0]["change"] < -0.15 and len(data["changes"][0]["ci95"]) == 2
    same = harness("compare", "a", "a", results=tmp_path)
    assert same.returncode == Exit.OK


def test_runs_baselines_trend_and_compare_read_as_json_of_their_documented_schemas(tmp_path):
    import jsonschema

    from harness.cli import json_outputs
    a_run(tmp_path, "a", 1000)
    a_run(tmp_path, "b", 1010)
    runs = json.loads(harness("runs", "--json", results=tmp_path).stdout)
    assert [r["run_id"] for r in runs] == ["a", "b"] and {r["status"] for r in runs} == {"completed"}
    assert harness("baseline", "save", "main", "latest", results=tmp_path).returncode == 0
    baselines = json.loads(harness("baseline", "list", "--json", results=tmp_path).stdout)
    assert [b["name"] for b in baselines] == ["main"]
    trend = json.loads(harness("trend", "aggregate_iops", "--json", results=tmp_path).stdout)
    assert [t["run_id"] for t in trend] == ["a", "b"] and all(t["n"] == 5 and t["ci95"] > 0 for t in trend)
    assert not list(tmp_path.glob("*.png"))   # --json is for a script: no plot unless --out asks
    compared = json.loads(harness("compare", "a", "b", "--json", results=tmp_path).stdout)
    for name, data in (("runs", runs), ("baseline-list", baselines), ("trend", trend), ("compare", compared)):
        jsonschema.validate(data, json_outputs.schema(name))


def test_each_json_outputs_schema_in_results_is_generated_now():
    from harness.cli import json_outputs
    folder = Path(__file__).parents[3] / "results" / "json"
    assert sorted(p.name for p in folder.glob("*.schema.json")) == sorted(f"{n}.schema.json" for n in json_outputs.OUTPUTS)
    for name in json_outputs.OUTPUTS:
        assert json.loads((folder / f"{name}.schema.json").read_text()) == json_outputs.schema(name), \
            f"results/json/{name}.schema.json is stale: harness results schema --of {name} > it"
    status = json_outputs.schema("runs")["$defs"]["ListedRun"]["properties"]["status"]
    assert "died" in status["enum"]   # a fixed set of values is an enum


def test_runs_offers_to_resume_a_run_with_a_block_that_did_not_come_up(tmp_path):
    a_run(tmp_path, "whole", 1000)
    RunStore.reopened(a_run(tmp_path, "lacking", 1000)).update_manifest(
        status="completed-with-failures", blocks_failed={"raid5-n4-c64k": "terraform apply failed"})
    listed = harness("runs", results=tmp_path).stdout
    assert "harness run vm-scaling --resume lacking" in listed and "--resume whole" not in listed, listed


def test_the_docs_table_of_exit_statuses_is_the_codes():
    import re

    from harness.common import exits
    page = (Path(__file__).parents[3] / "docs" / "measurement.md").read_text()
    table = re.search(r"<!-- begin: exit statuses -->\n<!--.*?-->\n(.*)<!-- end: exit statuses -->", page, re.S)
    assert table and table.group(1) == exits.markdown(), \
        "docs/measurement.md is stale: put `exits.markdown()` (harness/common/exits.py) between its markers"


def test_help_ends_with_the_exit_statuses_and_version_answers():
    out = subprocess.run([HARNESS, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for code in Exit:
        assert f"{int(code):>3}  " in out.stdout, code
    version = subprocess.run([HARNESS, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("harness, version ")
    assert re.search(r"\(git [0-9a-f]{12}(-dirty)?\)$", version.stdout.strip())   # the revision samples record


def test_every_command_refuses_bad_input_of_each_kind_with_exit_2_and_one_error_line(tmp_path):
    """Missing, empty, binary, a directory, a system path, not vtb's shape, out of range: each is
    bad input (2) said in one line with its fix, never a vtb bug (70) or a traceback."""
    from concurrent.futures import ThreadPoolExecutor
    a_run(tmp_path, "a", 1000)
    garbage, binary, empty_dir, empty_file = (tmp_path / "garbage.jsonl", tmp_path / "binary.bin", tmp_path / "empty",
                                              tmp_path / "empty.jsonl")
    garbage.write_text('garbage\n{"x": 1}\n')
    binary.write_bytes(bytes(range(256)) * 4)
    empty_dir.mkdir()
    empty_file.write_text("")
    other_shape = tmp_path / "other.jsonl"
    other_shape.write_text('{"metric": "iops", "value": "fast", "unit": "IOPS", "status": "ok"}\n')
    cases = [["compare", str(garbage), str(binary)], ["compare", "/etc/passwd", "a"], ["compare", str(empty_dir), "a"],
             ["compare", "a", str(empty_file)], ["compare", "a", str(other_shape)], ["compare", "a", "/proc/version"],
             ["trend", "iops", "--runs", str(garbage)], ["predict", str(binary), "--metric", "iops"],
             ["baseline", "save", "main", str(garbage)], ["baseline", "save", "main", str(empty_dir)],
             ["report", "a", "--out", "/proc/version"], ["report", "a", "--out", str(empty_dir)],
             ["compare", "a", "a", "--alpha", "0"], ["compare", "a", "a", "--alpha", "-1"],
             ["compare", "a", "a", "--alpha", "1.5"], ["compare", "a", "a", "--min-change", "5"],
             ["compare", "a", "a", "--min-change", "-5%"], ["compare", "a", "a", "--min-change", "150%"],
             ["compare", "a", "a", "--min-change", "nan"], ["compare", "a", "a", "--min-change", ""],
             ["predict", "a", "--metric", "iops", "--at", "bs=x"], ["predict", "a", "--metric", "iops", "--at", "vm_count="],
             ["predict", "a", "--metric", "nothing"]]
    cases += [["run", "fio-job", "--job", str(f), "--plan"] for f in (tmp_path / "nosuch", empty_file, binary, empty_dir,
                                                                     Path("/proc/version"))]
    cases += [["run", "replay", "--trace", str(f), "--plan"] for f in (tmp_path / "nosuch", empty_file, binary, empty_dir)]
    cases += [["runs", "--config", str(f)] for f in (tmp_path / "nosuch", binary, empty_dir, Path("/proc/version"))]
    cases += [["run", "vm-scaling", "--vm-counts", v, "--plan"] for v in ("0", "x", "")]
    cases = [[*args, "--set", f"results_dir={tmp_path}"] for args in cases]
    cases += [["runs", "--set", "results_dir=/etc/passwd"], ["runs", "--set", "results_dir=/proc/sys"],
              ["runs", "--set", f"results_dir={garbage}"]]

    def tried(args):
        return args, subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=120)
    with ThreadPoolExecutor(4) as pool:
        for args, out in pool.map(tried, cases):
            said = out.stdout + out.stderr
            assert out.returncode == Exit.BAD_INPUT, (args, said)
            assert "Traceback" not in said and "vtb bug" not in said, (args, said)
            errors = [line for line in out.stderr.splitlines() if line.lower().startswith("error:")]
            assert len(errors) == 1 and "Fix" in errors[0] and "error" not in out.stdout.lower(), (args, said)
    assert not (tmp_path / "baselines" / "main").exists()   # a refused baseline is not half made


def test_gc_that_leaves_something_exits_5(monkeypatch, capsys, tmp_path):
    """gc names what it could not remove (a link with a vtb- alias no plan of vtb's records) and exits
    5, as a teardown that leaves something does; nothing on this machine is touched here."""
    from harness import cli
    from harness.fleet import gc as gc_mod
    from harness.hosts import orphans
    note = "(link vtb9 (vtb-x-left) not removed: no Ceph plan of vtb's names it)"
    monkeypatch.setattr(orphans, "stop_orphans", lambda asked: [])
    monkeypatch.setattr(gc_mod, "live_prefixes", lambda dirs: ())
    monkeypatch.setattr(gc_mod, "collect", lambda prefix, host=None, keep=(): [note])
    monkeypatch.setattr(gc_mod, "collect_recorded", lambda *a, **kw: [])
    monkeypatch.setattr(gc_mod, "resume_left_paused", lambda *a: [])
    monkeypatch.setattr(sys, "argv", ["harness", "gc", "--set", f"state_dir={tmp_path}", "--set", f"results_dir={tmp_path}"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    out = capsys.readouterr().out
    assert done.value.code == Exit.LEFTOVERS and "1 left (see above)" in out and "vtb-x-left" in out


def test_a_host_that_refuses_ssh_exits_4_naming_it(tmp_path):
    """Nothing listens on the port: ssh's refusal comes at once, and the command says whose it is."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed once the block ends: nothing listens there
    config = tmp_path / "closed.toml"
    config.write_text(f'state_dir = "{tmp_path}/state"\n\n[fleet]\nname = "closed"\n\n'
                      f'[[hosts]]\nname = "shut"\nssh = "root@127.0.0.1"\nport = {port}\ndevices = ["/dev/vdb"]\n')
    out = harness("testbed", "up", "--config", str(config), results=tmp_path)
    assert out.returncode == Exit.HOST_FAILED, out.stdout + out.stderr
    assert "[[hosts]] shut at 127.0.0.1" in out.stderr and "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "state" / "closed").exists()


def test_a_teardown_that_leaves_something_exits_5_naming_it_and_keeps_its_state(tmp_path):
    """A fleet whose Terraform state is corrupt (terraform destroy fails), and a link with the fleet's
    prefix in its alias that no plan of vtb's records (gc removes such a link only by a record): after
    the failed destroy, `testbed down` removes what it may, checks, and names what remains."""
    fleet = tmp_path / "state" / "exit5"
    fleet.mkdir(parents=True)
    (fleet / "terraform.tfstate").write_text("not a state")
    (fleet / "fleet.tfvars.json").write_text("{}")
    link = f"vtb5-{os.getpid() % 10000}"
    subprocess.run(["ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}p"], check=True, timeout=30)
    try:
        subprocess.run(["ip", "link", "set", link, "alias", "vtb-exit5-left"], check=True, timeout=30)
        out = harness("testbed", "down", "--set", f"state_dir={tmp_path / 'state'}", "--set", "fleet.name=exit5",
                      results=tmp_path)
    finally:
        subprocess.run(["ip", "link", "del", link], timeout=30)
    assert out.returncode == Exit.LEFTOVERS, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert "terraform destroy failed" in said and f"these remain: link {link}" in out.stderr, said
    assert "Traceback" not in out.stdout + out.stderr
    assert (fleet / "fleet.tfvars.json").exists()   # `testbed down` again, once the cause is fixed


@pytest.mark.parametrize("error, code", [(RuntimeError("dictionary changed size during iteration"), Exit.INTERNAL),
                                         (KeyError("x"), Exit.INTERNAL)])
def test_an_exception_vtb_does_not_raise_for_a_step_is_a_bug(monkeypatch, capsys, error, code):
    """Only vtb's own errors of a step (StepFailed) and the few main() names exit 4: a stray
    RuntimeError is a bug, exit 70, not a host that failed."""
    from harness import cli

    def broken(**_):
        raise error
    monkeypatch.setattr(cli, "cli", broken)
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == code and "This is a vtb bug" in capsys.readouterr().err
