"""Where things live: repo, caches, state. One place so nothing hard-codes a path twice."""
from __future__ import annotations

import os
from pathlib import Path

PREFIX = "vtb-"  # every resource the harness creates starts with this; `harness gc` relies on it
REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("VTB_CACHE", "/var/cache/vtb"))
DEFAULT_STATE_DIR = Path("/var/lib/vtb")
DEFAULT_RESULTS_DIR = REPO / "results"
TERRAFORM_DIR = REPO / "terraform"
GUEST_AGENTS = REPO / "guest-agents"
IMAGE_DIR = CACHE / "images" / "current"            # the main job's guest image (fio's guests)
FULL_IMAGE_DIR = CACHE / "images" / "full-current"  # every workload's (images/build.sh guest-full)
TERRAFORM_CACHE = CACHE / "terraform" / "current"
STATE_REGISTRY = Path(os.environ.get("VTB_STATE_REGISTRY", "/var/lib/vtb-registry/state-dirs"))  # for gc
LIBVIRT_URI = os.environ.get("VTB_LIBVIRT_URI", "qemu:///system")


def safe_path(path) -> bool:
    """An absolute path that cannot climb out of where it names (one read back from a record)."""
    return isinstance(path, str) and path.startswith("/") and ".." not in path.split("/") and "\0" not in path


def mem_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 0
