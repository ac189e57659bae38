"""Image builds (images/build.sh): an image built where it is first needed, and a build killed
outright, before its own clean-up ran: its tree in the image cache, perhaps with /proc, /sys and
/dev still mounted inside. The build writes its pid into the tree first; gc removes a tree whose
builder is gone, unmounting what is mounted in it first."""
from __future__ import annotations

import subprocess
from pathlib import Path

from harness.common.bounded import heartbeat
from harness.common.exits import StepFailed
from harness.common.paths import CACHE, REPO
from harness.resources.leftovers import Leftover, Scope

PID_FILE = "builder.pid"   # written by images/build.sh as soon as its tree exists
BUILD_S = 3600             # an image from nothing: packages fetched and installed (minutes)


class ImageBuildFailed(StepFailed):
    pass


def built(role: str, what: str) -> None:
    """images/build.sh ROLE: at once where the image of its recipe is built (cached by its hash),
    else built now, its output shown; a failure or a build over BUILD_S raises, with the fix."""
    fix = f"Fix: run `images/build.sh {role}` and read its error"
    try:
        with heartbeat(f"{what} (images/build.sh {role})", BUILD_S):
            failed = subprocess.run([str(REPO / "images" / "build.sh"), role], timeout=BUILD_S).returncode
    except subprocess.TimeoutExpired:
        raise ImageBuildFailed(f"building {what} did not finish within {BUILD_S} s; stopped it. {fix}") from None
    if failed:
        raise ImageBuildFailed(f"building {what} failed (see the output above). {fix}")


def _builder_gone(tree: Path) -> bool:
    try:
        pid = int((tree / PID_FILE).read_text())
    except (OSError, ValueError):
        return False   # a build that has not written it yet: not judged
    return not Path(f"/proc/{pid}").exists()


def remove_dead(builds: Path) -> list[str]:
    """The trees of dead builds in `builds`, unmounted and removed (never crossing into another filesystem)."""
    removed = []
    for tree in sorted(builds.glob(".build-*")):
        if not tree.is_dir() or not _builder_gone(tree):
            continue
        mounted = [f[1] for f in map(str.split, Path("/proc/mounts").read_text().splitlines())
                   if len(f) > 1 and f[1].startswith(f"{tree}/")]
        for point in sorted(mounted, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=60)
        subprocess.run(["rm", "-rf", "--one-file-system", str(tree)], capture_output=True, check=False, timeout=600)
        removed.append(f"image build tree {tree}" + (f" ({len(mounted)} mounts in it)" if mounted else ""))
    return removed


def _dead_builds(s: Scope) -> list[str]:
    return remove_dead(CACHE / "images")


LEFTOVERS = (Leftover("image builds killed before their clean-up", _dead_builds),)
