"""docs/testing.md's measured times (`make test-times`): each live test's tier, lane and time, and
each tier's phases, from the JUnit reports that the last run of each tier left in $TEST_TIMES
(scripts/tests.sh). Usage: test_times.py PAGE."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from junitparser import JUnitXml

ROOT = Path(__file__).parents[1]
TIMES = Path(os.environ.get("TEST_TIMES", "/var/tmp/vtb-test-times"))
BEGIN, END = "<!-- begin: test-times (make test-times) -->", "<!-- end: test-times -->"
TIERS = ("core", "extended")
PHASES = ("lanes", "alone")


def live_tests() -> list[dict]:
    """Every live test as pytest collects it (tests/conftest.py: VTB_TEST_TIERS_OUT)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tiers.json"
        env = {**os.environ, "VTB_TEST_TIERS_OUT": str(out), "VTB_TEST_HAND_OVER": "", "VTB_TEST_FLEET_HAND_OVER": ""}
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "tests/integration"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            sys.exit(f"test_times: collecting the live tests failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        return json.loads(out.read_text())


def reports() -> dict[tuple[str, str], JUnitXml]:
    """{(tier, phase): report} of the reports there are."""
    return {(t, p): JUnitXml.fromfile(str(f)) for t in TIERS for p in PHASES
            if (f := TIMES / f"{t}-{p}.xml").exists()}


def case_id(case) -> str:
    """The test's pytest id, without the `@lane` that pytest-xdist's groups add to its name."""
    name = re.sub(r"@[\w-]+$", "", case.name)
    return f"{case.classname.replace('.', '/')}.py::{name}"


def phase_rows(found: dict) -> list[str]:
    """A row per tier and phase, and each tier's total: `make test` is the core tier, `make test-all`
    the core tier and then the extended one."""
    rows = ["| tier | phase | started (UTC) | tests | failed | wall time |", "|---|---|---|---|---|---|"]
    total = dict.fromkeys(TIERS, 0.0)
    for (tier, phase), xml in found.items():
        for suite in xml:
            total[tier] += suite.time
            rows.append(f"| {tier} | {phase} | {suite.timestamp[:16].replace('T', ' ')} | {suite.tests} "
                        f"| {suite.failures + suite.errors} | {suite.time / 60:.1f} min |")
    for tier, phase in ((t, p) for t in TIERS for p in PHASES if (t, p) not in found and total[t]):
        rows.append(f"| {tier} | {phase} | | | | not measured |")
    rows.append(f"| core | `make test`'s tests | | | | {total['core'] / 60:.1f} min |")
    if total["extended"]:
        rows.append(f"| both | `make test-all`'s tests (the phases measured) | | | | "
                    f"{(total['core'] + total['extended']) / 60:.1f} min |")
    return rows


def test_rows(found: dict, live: list[dict]) -> list[str]:
    """A row per live test, its time in the last run of its tier, and a row for the unit tests together."""
    times: dict[str, float] = {}
    for xml in found.values():
        for suite in xml:
            for case in suite:
                times[case_id(case)] = case.time
    unit = {k: v for k, v in times.items() if k.startswith("tests/unit/")}
    rows = ["| test | tier | lane | seconds | why it is not in `make test` |", "|---|---|---|---|---|",
            f"| the unit tests ({len(unit)}) | core | either | {sum(unit.values()):.0f} | |"]

    for t in sorted(live, key=lambda t: (t["tier"], -times.get(t["id"], 0), t["id"])):
        s = times.get(t["id"])
        lane = "alone" if t["alone"] else t["lane"]
        rows.append(f"| `{t['id'].removeprefix('tests/integration/')}` | {t['tier']} | {lane} | "
                    f"{'not measured' if s is None else f'{s:.0f}'} | {t['why']} |")
    return rows


def main(page: Path) -> None:
    found = reports()
    if not found:
        print(f"test_times: no JUnit report in {TIMES} (`make test` and `make test-all` leave them): "
              "every test is listed as not measured", file=sys.stderr)
    text = page.read_text()
    head, rest = text.split(BEGIN)
    tail = rest.split(END)[1]
    body = "\n".join(["", *phase_rows(found), "", *test_rows(found, live_tests()), ""])
    page.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
