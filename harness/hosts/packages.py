"""Debian packages a plug-in needs on a host, installed on its first use. `make testbed up` installs
what the main job needs only; a backend, resource or experiment declares what it adds (`host_packages`)
and gets it here, where the host lets vtb install (`installs_packages`: this machine). Elsewhere (a
nested host's image has them all; an ssh host is the user's) a missing package stays the plug-in's
own refusal, with its fix."""
from __future__ import annotations

import subprocess
from collections.abc import Iterable

from harness.common import paths
from harness.common.bounded import heartbeat
from harness.common.console import step
from harness.common.exits import StepFailed

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
    step(f"installing {names} on {host.label}: {needed_by} needs them (first use; apt, about a minute)")
    with heartbeat(f"apt to install {names}", INSTALL_BOUND_S):
        try:
            done = host.run([str(INSTALLER), "--packages", *lacking], check=False, timeout=INSTALL_BOUND_S)
        except subprocess.TimeoutExpired:
            raise PackagesFailed(f"installing {names} for {needed_by} did not finish within {INSTALL_BOUND_S} s. "
                                 f"Fix: run `dpkg --configure -a`, then `{INSTALLER} --packages {names}`, and see "
                                 "where it stops") from None
    if done.returncode != 0 or (still := missing(host, lacking)):
        said = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-3:]
        raise PackagesFailed(f"installing {names} for {needed_by} failed (exit {done.returncode}"
                             + (f"; still missing: {' '.join(still)}" if done.returncode == 0 else "")
                             + f"): {' / '.join(said) or 'apt said nothing'}. Fix: run `{INSTALLER} --packages {names}`, "
                             "or `make bootstrap` (every experiment's packages up front), and retry")
