import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TAIL_LINES = 40


@pytest.fixture
def fixture_text():
    return lambda rel: (FIXTURES / rel).read_text()


def _consoles_since(t0: float) -> list[Path]:
    """Console logs written while the test ran: the nested host's own, and those kept in run folders."""
    from harness.config import settings
    found = []
    for toml in ("ci.toml", "nested.toml"):
        cfg = settings.load(Path(__file__).parent / toml)
        found += [p for p in (cfg.state_dir / "nested" / "console.log", *cfg.results_dir.glob("*/consoles/*.log"))
                  if p.exists() and p.stat().st_mtime >= t0]
    return sorted(set(found))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed integration test shows the tails of the guests' and the nested host's consoles."""
    if call.when == "setup":
        item.stash[START] = time.time()
    outcome = yield
    report = outcome.get_result()
    if report.failed and item.get_closest_marker("integration") and START in item.stash:
        for log in _consoles_since(item.stash[START] - 1):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-TAIL_LINES:])
            report.sections.append((f"console {log}", tail or "(empty)"))


START = pytest.StashKey[float]()
