"""The tuning study for real under TCG, at its smallest: two knobs of virtio-blk with two values
each, one at a time around the configured disk (three fleets), one workload of seconds-long points;
its answer, every configuration's row, and the winning configuration's XML, which libvirt accepts."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import libvirt
import pytest

from harness.common import paths
from harness.experiments.tuning import IN_DEVICES, IN_DOMAIN
from harness.fleet import gc

pytestmark = pytest.mark.integration
CONFIG = Path(__file__).parents[1] / "ci.toml"
HARNESS = str(Path(sys.executable).parent / "harness")
PREFIX = "vtb-tu-ci-"


@pytest.mark.core
@pytest.mark.covers(experiments="tuning")
def test_tuning_two_knobs_of_virtio_blk_names_an_answer_and_its_xml_defines(tmp_path):
    out = subprocess.run([HARNESS, "run", "tuning", "--backend", "virtio-blk", "--knob", "aio=native,io_uring",
                          "--knob", "iothreads=1,0", "--set", 'tuning.workloads=["randread-j1-qd16"]', "--runtime", "2",
                          "--ramp", "0", "--set", "repeat.count=2", "--set", f"results_dir={tmp_path}",
                          "--config", str(CONFIG)], capture_output=True, text=True, timeout=1200)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]
    measured = {(r["choice"], r["env"]) for r in rows if r.get("group") == "tuning" and r["metric"] == "iops"}
    assert measured == {(c, e) for c in ("default", "aio=io_uring", "iothreads=0") for e in ("physical", "virtual")}
    assert {r["aio"] for r in rows if r["env"] == "virtual" and r["choice"] == "aio=io_uring"} == {"io_uring"}
    summary = (run / "summary.txt").read_text()
    assert summary.startswith("randread-j1-qd16: ")                     # the answer first
    assert all(c in summary for c in ("default", "aio=io_uring", "iothreads=0"))   # every configuration's row
    said = re.search(r"the (best configuration|configured virtio-blk) \((.+?)\).*?: its libvirt XML:\n(.*)", summary, re.S)
    assert said and "<driver name='qemu'" in said[3], summary
    xml = said[3]
    in_domain = xml.split(IN_DOMAIN, 1)[1].split(IN_DEVICES, 1)[0] if IN_DOMAIN in xml else ""
    disk = xml.split(IN_DEVICES, 1)[1]
    domain = (f"<domain type='qemu'><name>vtb-tu-ci-xmlcheck</name><memory unit='MiB'>64</memory>{in_domain}"
              f"<os><type arch='x86_64'>hvm</type></os><devices>{disk}</devices></domain>")
    conn = libvirt.open(paths.LIBVIRT_URI)
    try:
        defined = conn.defineXML(domain)      # libvirt accepts the configuration as vtb gives it
        defined.undefine()
    finally:
        conn.close()
    assert gc.leftovers(PREFIX) == []
