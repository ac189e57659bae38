"""Resources declare what they leave behind; gc finds the declarations (harness/resources/leftovers.py)."""
from pathlib import Path

from harness.hosts import LocalHost
from harness.resources import hugepages, image_builds, leftovers, raid, scratch
from harness.resources.ceph import leftovers as ceph_leftovers


def test_every_resource_modules_leftovers_are_found_in_module_order():
    found = leftovers.registered()
    assert [*ceph_leftovers.LEFTOVERS, *hugepages.LEFTOVERS, *image_builds.LEFTOVERS, *raid.LEFTOVERS,
            *scratch.LEFTOVERS] == found
    assert "mariadbd" in leftovers.processes()   # a host slot's database server (resources/database_server.py)


class Elsewhere(LocalHost):
    is_this_machine = False

    def descriptor(self):
        return {"kind": "ssh"}   # no remote_dir: nothing of a Ceph cluster's can be there


def test_each_pass_runs_only_the_leftovers_that_fit_it(tmp_path):
    record = tmp_path / f"vtb-t-x{scratch.BRD_RECORD_SUFFIX}"
    record.write_text("brd\n")
    here = leftovers.Scope(LocalHost(), "vtb-t-", (), (tmp_path,))
    assert leftovers.remove_all(here) == [] and record.exists()   # a record waits for gc's pass over records
    assert leftovers.remove_all(leftovers.Scope(Elsewhere(), "vtb-t-", (), (tmp_path,))) == []
    if not Path("/sys/module/brd").exists():   # never unload a brd some test or user is using
        assert leftovers.remove_all(here, by_record=True) == [] and not record.exists()
