"""Debian packages a plug-in needs on a host, installed on its first use. `make testbed up` installs
what the main job needs only; a backend, resource or experiment declares what it adds (`host_packages`)
and gets it here, where the host lets vtb install (`installs_packages`: this machine). Elsewhere (a
nested host's image has them all; an ssh host is the user's) a missing package stays the plug-in's
own refusal, with its fix."""
from __future__ import annotations

from collections.abc import Iterable

from harness.common import paths
from harness.common.console import step
from harness.common.exits import StepFailed
from harness.hosts import last_words, long_step

INSTALLER = paths.REPO / "scripts" / "host-packages.sh"
# apt after another apt's lock (the script waits for it up to 10 min, twice) and the install itself
INSTALL_BOUND_S = 2700


class PackagesFailed(StepFailed):
    """The host packages a plug-in needs could not be installed: nothing of the run was made."""


def missing(host, packages: Iterable[str]) -> list[str]:
    """The packages of `packages` dpkg does not have installed on the host."""
    wanted = sorted(set(packages))
    if not wanted:
        return []
    out = host.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n", *wanted], check=False, timeout=60)
    installed = {name for name, _, status in (line.partition(" ") for line in out.stdout.decode().splitlines())
                 if status == "installed"}
    return [p for p in wanted if p not in installed]


def ensure(host, packages: Iterable[str], needed_by: str) -> None:
    """Installs on the host what of `packages` is missing, saying so first, where the host lets vtb
    install; raises PackagesFailed with apt's last words and the fix when apt fails."""
    if not host.installs_packages or not (lacking := missing(host, packages)):
        return
    names = " ".join(lacking)
    what = f"installing {names} for {needed_by}"
    fix = (f"run `{INSTALLER} --packages {names}` (after `dpkg --configure -a` where apt was stopped), or "
           "`make bootstrap` (every experiment's packages up front), and retry")
    step(f"installing {names} on {host.label}: {needed_by} needs them (first use; apt, about a minute)")
    done = long_step(host, [str(INSTALLER), "--packages", *lacking], what, INSTALL_BOUND_S, PackagesFailed, fix)
    if still := missing(host, lacking):
        raise PackagesFailed(f"{what} failed (exit 0; still missing: {' '.join(still)}): {last_words(done)}. Fix: {fix}")
