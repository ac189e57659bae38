"""Host packages on first use: what is missing is read from dpkg, installed only where the host lets
vtb install, and a failed apt is an error that names the packages and the fix."""
import subprocess
from dataclasses import dataclass, field

import pytest

from harness.cli.doctor_checks import plugin_packages
from harness.engine import settings
from harness.hosts import LocalHost, packages

# `dpkg-query -W -f '${Package} ${db:Status-Status}\n' fio ioping vtb-none` on a host with fio only, as recorded
DPKG_QUERY = b"fio installed\nioping not-installed\n"
DPKG_QUERY_ERR = b"dpkg-query: no packages found matching vtb-none\n"


@dataclass
class Recorded:
    """A host that answers dpkg-query as recorded and apt with `apt_rc` (what apt printed: `apt_said`)."""
    installs_packages: bool = True
    apt_rc: int = 0
    apt_said: bytes = b""
    label: str = "the recorded host"
    ran: list = field(default_factory=list)

    def run(self, argv, *, check=True, timeout=None, **_):
        self.ran.append(argv)
        if argv[0] == "dpkg-query":
            return subprocess.CompletedProcess(argv, 1, DPKG_QUERY, DPKG_QUERY_ERR)
        return subprocess.CompletedProcess(argv, self.apt_rc, b"", self.apt_said)


def test_missing_reads_dpkg_as_it_answers():
    assert packages.missing(Recorded(), ["fio", "ioping", "vtb-none"]) == ["ioping", "vtb-none"]
    assert packages.missing(Recorded(), []) == []


def test_missing_on_this_machine():
    assert packages.missing(LocalHost(), ["dpkg", "vtb-no-such-package"]) == ["vtb-no-such-package"]


def test_a_host_that_does_not_install_is_only_asked_nothing():
    host = Recorded(installs_packages=False)
    packages.ensure(host, ["ioping"], "a test")
    assert host.ran == []


def test_nothing_missing_installs_nothing():
    host = Recorded()
    packages.ensure(host, ["fio"], "a test")
    assert [a[0] for a in host.ran] == ["dpkg-query"]


def test_the_missing_ones_only_are_installed_and_said(capsys):
    host = Recorded()
    with pytest.raises(packages.PackagesFailed, match="still missing: ioping"):   # the recorded dpkg still lacks it
        packages.ensure(host, ["fio", "ioping"], "the latency experiment")
    assert host.ran[1] == [str(packages.INSTALLER), "--packages", "ioping"]
    assert "installing ioping on the recorded host: the latency experiment needs them" in capsys.readouterr().out


def test_a_failed_apt_names_the_packages_and_the_fix():
    said = b"E: Unable to locate package ioping\n"
    with pytest.raises(packages.PackagesFailed) as e:
        packages.ensure(Recorded(apt_rc=100, apt_said=said), ["ioping"], "the latency experiment")
    assert "installing ioping for the latency experiment failed (exit 100): E: Unable to locate package ioping" in str(e.value)
    assert "make bootstrap" in str(e.value)


def test_every_declared_package_is_in_the_all_list_and_none_in_the_main_jobs():
    def listed(*args):
        return subprocess.run([str(packages.INSTALLER), *args, "--list"], capture_output=True, text=True,
                              check=True).stdout.split()
    declared = plugin_packages(settings.load(None, ["latency.tools=[\"fio\", \"ioping\"]"]))
    assert {"tgt", "ceph-osd", "sysbench", "ioping", "qemu-block-extra"} <= set(declared)
    assert set(declared) <= set(listed("--all"))
    assert not set(declared) & set(listed())
