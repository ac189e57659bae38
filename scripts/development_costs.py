"""harness/measure/development-costs.json, the costs a fresh host's plan starts from: the figures
of the development machine's default runs, merged from their results folders' costs.json (each
figure's last values, as a host keeps them). Usage: development_costs.py RESULTS_DIR..."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.common.files import write_atomic
from harness.measure.plan import KEEP, SHIPPED

KINDS = ("local", "nested")   # the host kinds a fresh host may be; an ssh host's costs are its own


def merged(folders: list[Path]) -> dict:
    out: dict = {}
    for folder in folders:
        for host, kinds in json.loads((folder / "costs.json").read_text()).items():
            if host not in KINDS:
                continue
            for kind, figures in kinds.items():
                for key, values in figures.items():
                    kept = out.setdefault(host, {}).setdefault(kind, {}).setdefault(key, [])
                    kept += values
                    del kept[:-KEEP]
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    write_atomic(SHIPPED, json.dumps(merged([Path(a) for a in sys.argv[1:]]), indent=1, sort_keys=True) + "\n")
    print(f"{SHIPPED}: from {', '.join(sys.argv[1:])}")
