"""The samples' columns are declared once, the core's in harness/results/columns.py and each
plug-in's in its module: results/README.md's reference and the JSON Schema are that catalog now,
a recorded real run's rows validate against the schema, and the README's pandas example loads
them."""
import json
import re
from pathlib import Path

import jsonschema
import pandas as pd

from harness.experiments import catalog
from harness.results import columns

ROOT = Path(__file__).parents[3]
README = ROOT / "results" / "README.md"
SCHEMA = ROOT / "results" / "sample.schema.json"
RUN = ROOT / "tests" / "fixtures" / "runs" / "vm-scaling.samples.jsonl"   # a real run's headline and ratio rows
MARKS = re.compile(r"<!-- begin: harness results reference -->\n(.*)<!-- end: harness results reference -->", re.S)


def test_the_readme_reference_and_the_schema_are_the_declaration_now():
    assert MARKS.search(README.read_text()).group(1) == catalog().markdown(), \
        "results/README.md is stale: put `harness results reference` between its markers"
    assert json.loads(SCHEMA.read_text()) == catalog().json_schema(), \
        "results/sample.schema.json is stale: harness results schema > it"


def test_a_real_runs_rows_validate_and_an_undeclared_column_does_not():
    validator = jsonschema.Draft202012Validator(catalog().json_schema())
    rows = [json.loads(line) for line in RUN.read_text().splitlines()]
    for row in rows:
        validator.validate(row)
    assert not validator.is_valid({**rows[0], "made_up_column": 1})
    assert not validator.is_valid({**rows[0], "host_busy_pct": "busy"})
    assert validator.is_valid({**rows[0], "link_n3_rx_mbit_s": 12.5, "spdk_cpu_s": 0.5})   # families


def test_the_readme_pandas_example_pivots_physical_against_virtual():
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    scope: dict = {}
    exec(code.replace("results/RUN/samples.jsonl", str(RUN)), scope)
    table = scope["table"]
    assert list(table.index) == [1, 2, 4] and {"physical", "virtual", "virtual / physical"} <= set(table.columns)
    assert (table["virtual / physical"] > 0).all() and isinstance(scope["rows"], pd.DataFrame)


def test_every_column_is_declared_once():
    names = [c.name for c in catalog().columns]
    assert len(names) == len(set(names))


def test_each_plug_in_declares_its_own_columns_in_its_module():
    """A plug-in's columns are its module's (`COLUMNS`): the core's declare none of them, and the
    catalog has each plug-in's group as declared there."""
    from harness.experiments import ceph_scaling
    from harness.workloads import ioping
    for module in (ceph_scaling, ioping):
        for group in module.COLUMNS:
            assert group in catalog().groups and group not in columns.CORE
    core = {c.name for _, cols in columns.CORE for c in cols}
    assert not core & {c.name for m in (ceph_scaling, ioping) for _, cols in m.COLUMNS for c in cols}
    assert columns.generated_schema() == catalog().json_schema()   # what the layers below validate against
