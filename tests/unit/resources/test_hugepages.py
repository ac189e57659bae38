"""The hugepage plan and its refusals, on a recorded /proc/meminfo of the development machine
(24 GiB, no hugepages reserved). Applying and reverting on a live kernel is in
tests/integration/test_spdk_live.py."""
import json
import subprocess
from pathlib import Path

import pytest

from harness.resources import hugepages
from harness.resources.hugepages import HugepagePlan

MEMINFO = (Path(__file__).parents[2] / "fixtures" / "proc" / "meminfo-24g").read_text()


class RecordedProc:
    """A node whose /proc/meminfo is the recorded one (other files are absent)."""
    label = "recorded-host"

    def __init__(self, meminfo=MEMINFO):
        self.meminfo = meminfo

    def run(self, argv, check=True, timeout=None, **_):
        if argv == ["cat", "/proc/meminfo"]:
            return subprocess.CompletedProcess(argv, 0, self.meminfo.encode(), b"")
        return subprocess.CompletedProcess(argv, 1, b"", b"no such file")


def test_a_plan_rounds_up_to_whole_2_mib_pages():
    assert HugepagePlan.for_mib(1280, "/m", "/r").pages == 640
    assert HugepagePlan.for_mib(1281, "/m", "/r").pages == 641


def test_a_fleet_that_fits_is_not_refused():
    assert hugepages.refusal(RecordedProc(), HugepagePlan.for_mib(2 * 512 + 256, "/m", "/r"), "2 VMs") is None


def test_more_than_the_host_has_is_refused_naming_the_fields_to_lower():
    reason = hugepages.refusal(RecordedProc(), HugepagePlan.for_mib(64 * 512, "/m", "/r"), "64 VM(s) x 512")
    assert "64 VM(s) x 512 needs 32768 MiB of 2 MiB hugepages" in reason and "recorded-host has 22536 MiB" in reason
    assert "fleet.vms or fleet.memory_mib" in reason


def test_pages_already_reserved_and_free_count_toward_the_need():
    reserved = MEMINFO.replace("HugePages_Free:        0", "HugePages_Free:    12000")
    plan = HugepagePlan.for_mib(30000, "/m", "/r")
    assert hugepages.refusal(RecordedProc(), plan, "x") is not None
    assert hugepages.refusal(RecordedProc(reserved), plan, "x") is None


def test_the_headroom_is_kept_for_everything_else():
    avail_mib = 22536
    just_over = HugepagePlan.for_mib(avail_mib - hugepages.HEADROOM_MIB + 2, "/m", "/r")
    assert hugepages.refusal(RecordedProc(), just_over, "x") is not None
    assert hugepages.refusal(RecordedProc(), HugepagePlan.for_mib(avail_mib - hugepages.HEADROOM_MIB, "/m", "/r"),
                             "x") is None


class KilledWhileRaising(RecordedProc):
    """The recorded host, with files of its own and nr_hugepages; killed (SIGKILL) as it raises."""

    def __init__(self, record: str):
        super().__init__(MEMINFO.replace("HugePages_Free:        0", "HugePages_Free:       10"))
        self.files = {hugepages.NR_HUGEPAGES: "10", "/r": record}

    def run(self, argv, check=True, timeout=None, input=None, **_):
        if argv[0] == "cat" and argv[1] in self.files:
            return subprocess.CompletedProcess(argv, 0, self.files[argv[1]].encode(), b"")
        if argv[:2] == ["sh", "-c"] and "> /proc/sys/vm/nr_hugepages" in argv[2]:
            raise KeyboardInterrupt   # the kill lands after the record, before the kernel's answer
        if argv[:2] == ["sh", "-c"] and "mv" in argv[2]:
            self.files[argv[-1]] = input.decode()
            return subprocess.CompletedProcess(argv, 0, b"", b"")
        return super().run(argv, check, timeout)


def test_top_up_records_the_pages_before_it_raises_them():
    host = KilledWhileRaising(json.dumps({"nr_hugepages_before": 0, "pages": 10, "mount": "/m", "record": "/r"}))
    with pytest.raises(KeyboardInterrupt):
        hugepages.top_up(host, HugepagePlan(10, "/m", "/r"), free_pages=16)
    assert json.loads(host.files["/r"])["pages"] == 16   # gc gives back all it may have raised
