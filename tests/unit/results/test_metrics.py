"""Every metric is declared once (harness/results/metrics.py): results/README.md's table is that
declaration now, and what the tools' parsers and the pipeline write, read from recorded real
outputs and from the code, is declared with its unit."""
import ast
import re
from pathlib import Path

import pytest

from harness.measure.aggregate import aggregate
from harness.results import metrics
from harness.workloads import db_bench, fio, ioping, sysbench

ROOT = Path(__file__).parents[3]
MARKS = re.compile(r"<!-- begin: harness results metrics -->\n(.*)<!-- end: harness results metrics -->", re.S)


def test_the_readme_table_is_the_declaration_now():
    assert MARKS.search((ROOT / "results" / "README.md").read_text()).group(1) == metrics.markdown(), \
        "results/README.md is stale: put `harness results metrics` between its markers"


def declared(figures: dict) -> list[str]:
    """What of {metric: (value, unit, ...)} is not declared, or not in a declared unit."""
    return [f"{m} in {f[1]}" for m, f in figures.items()
            if m not in metrics.METRICS or f[1] not in metrics.METRICS[m].units]


@pytest.mark.parametrize("parse, fixture", [
    (fio.parse, "fio/host-randread-qd16.json"),
    (sysbench.parse, "sysbench/host-oltp_read_write.txt"),
    (db_bench.parse, "db_bench/readrandom.txt"),
    (ioping.parse, "ioping/ioping-1.3-randread-runner.txt"),
])
def test_what_each_tools_parser_writes_is_declared_in_its_unit(parse, fixture, fixture_text):
    assert declared(parse(fixture_text(fixture)).metrics()) == []


def test_what_a_points_aggregates_write_is_declared_in_its_unit(fixture_text):
    assert declared(aggregate([fio.parse(fixture_text("fio/guest-randread-qd16.json"))] * 2)) == []
    assert declared(sysbench.aggregate([sysbench.parse(fixture_text("sysbench/host-oltp_read_only.txt"))] * 2)) == []


def test_every_sample_the_code_names_is_declared_in_its_unit():
    """Sample("name", value, "unit", ...) anywhere in harness/: the name and unit as written."""
    named = {}
    for path in (ROOT / "harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Sample" and len(node.args) >= 3
                    and all(isinstance(a, ast.Constant) for a in (node.args[0], node.args[2]))):
                named[node.args[0].value] = (None, node.args[2].value)
    assert {"ve_pe_ratio", "ios_per_cpu_s", "expected_bw"} <= set(named)
    assert declared(named) == []
