"""An image build killed outright leaves its tree in the cache: gc removes the trees whose
builder is gone, and never one whose builder still runs or has not said who it is."""
import subprocess

from harness.resources import image_builds


def _tree(builds, name, pid):
    tree = builds / f".build-{name}"
    (tree / "root" / "usr").mkdir(parents=True)
    if pid is not None:
        (tree / image_builds.PID_FILE).write_text(f"{pid}\n")
    return tree


def test_a_dead_builders_tree_is_removed_and_a_live_ones_kept(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = _tree(tmp_path, "dead", gone.pid)
    live = _tree(tmp_path, "live", subprocess.os.getpid())
    unsaid = _tree(tmp_path, "new", None)
    finished = tmp_path / "3cbdab6bbc50cd4e"
    finished.mkdir()
    assert image_builds.remove_dead(tmp_path) == [f"image build tree {dead}"]
    assert not dead.exists() and live.exists() and unsaid.exists() and finished.exists()

