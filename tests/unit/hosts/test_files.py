"""One `stat` for many paths: each that exists, with its number; a missing one left out."""
import os

from harness.hosts import LocalHost
from harness.hosts.files import stat_numbers


def test_each_existing_path_gets_its_number_and_a_missing_one_is_left_out(tmp_path):
    (tmp_path / "a").write_bytes(b"xyz")
    dash = tmp_path / "-n b"   # a name stat could take for an option, with a space
    dash.write_bytes(b"x")
    paths = [str(tmp_path / "a"), str(dash), str(tmp_path / "missing")]
    assert stat_numbers(LocalHost(), "%s", paths) == {paths[0]: 3, paths[1]: 1}
    assert stat_numbers(LocalHost(), "%u", paths[:1]) == {paths[0]: os.getuid()}
    assert stat_numbers(LocalHost(), "%s", []) == {}
