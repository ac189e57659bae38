"""`harness doctor`: what the host has and lacks, each with what to do about it."""
from __future__ import annotations

import os

import libvirt
from rich.table import Table

from harness.common import paths
from harness.common.console import console
from harness.config.core import Config
from harness.hosts import Host, accel, packages
from harness.hosts.environment import libvirt_version
from harness.libvirt.libvirt_conn import connect

TOOLS = (("qemu-system-x86_64", "runs the guests", "run `make testbed up`"),
         ("qemu-storage-daemon", "vhost-user-blk backend", "run `make testbed up`"),
         ("fio", "the physical baseline", "run `make testbed up`"),
         ("bwrap", "the sandbox vtb runs its tools in on a host", "apt-get install bubblewrap"),
         ("mdadm", "RAID arrays on this host (a nested host has its own)", "apt install mdadm"))


def host_checks(host: Host) -> list[tuple[str, bool, str]]:
    """What any host needs, checked through the host itself (this machine, or a nested one)."""
    from harness.resources import raid
    label = "" if host.is_this_machine else f"{host.label}: "
    out = []
    try:
        connect(host.uri).close()
        out.append((f"{label}libvirtd", True, f"{host.uri}, libvirt {libvirt_version(host.uri)}"))
    except libvirt.libvirtError as e:
        out.append((f"{label}libvirtd", False, f"not reachable ({e.get_error_message()}); run `make testbed up`"))
    md_missing = raid.md_support(host)
    out.append((f"{label}md (software RAID)", md_missing is None, md_missing or "available"))
    for tool, why, fix in TOOLS:
        found = host.run(["sh", "-c", f"command -v {tool}"], timeout=30, check=False)
        path = found.stdout.decode().strip()
        out.append((f"{label}{tool}", found.returncode == 0, path or f"missing ({why}); {fix}"))
    return out


def plugin_packages(cfg: Config) -> list[str]:
    """Every Debian package a backend, a Ceph cluster vtb makes, an experiment or a workload tool
    declares it needs on this machine beyond the main job's (each installed on its first use)."""
    from harness import backends, workloads
    from harness.experiments import registry
    from harness.resources.ceph.bootstrap import PACKAGES as CEPH
    declared = list(CEPH)   # a cluster vtb makes under an rbd fleet
    declared += [p for b in backends.all_backends().values() for p in b.host_packages]
    declared += [p for t in workloads.tools().values() for p in t.host_packages]
    declared += [p for e in registry().values() if hasattr(e, "host_packages") for p in e.host_packages(cfg)]
    return sorted(set(declared))


def checks(cfg: Config) -> list[tuple[str, bool, str]]:
    from harness.hosts import LocalHost
    from harness.hosts.nested import HOST_IMAGE_DIR, NestedHost, NestedHostError
    out = host_checks(LocalHost())
    lacking = packages.missing(LocalHost(), plugin_packages(cfg))
    out.append(("experiments' and backends' host packages", not lacking,
                "all installed" if not lacking else f"missing {' '.join(lacking)}: each is installed on its first use; "
                "`harness doctor --install` (or `make bootstrap`) installs them now"))
    kernel = paths.IMAGE_DIR / "vmlinuz"
    if kernel.exists():
        choice = accel.choose("auto", kernel)
        out.append(("accelerator", True, f"{choice.accel}: {choice.reason}"))
    else:
        out.append(("accelerator", False, "not probed: the guest image (its kernel) is not built"))
    host_image = HOST_IMAGE_DIR / "rootfs.qcow2"
    out.append(("nested host image", host_image.exists(), str(host_image.resolve()) if host_image.exists() else
                "not built (`harness host nested up` builds it, or `make host-image`)"))
    image = paths.IMAGE_DIR / "rootfs.qcow2"
    out.append(("guest image", image.exists(), str(image.resolve()) if image.exists() else
                "not built; run `make testbed up`"))
    full = paths.FULL_IMAGE_DIR / "rootfs.qcow2"
    out.append(("full guest image", full.exists(), str(full.resolve()) if full.exists() else
                "not built (the first fleet whose guests need more than fio builds it, or `make bootstrap`)"))
    tf = paths.TERRAFORM_CACHE / "bin" / "terraform"
    out.append(("terraform", tf.exists(), str(tf) if tf.exists() else "missing; run `make testbed up`"))
    mirror = list((paths.TERRAFORM_CACHE / "mirror").rglob("terraform-provider-libvirt_*")) \
        if paths.TERRAFORM_CACHE.exists() else []
    out.append(("terraform-provider-libvirt", bool(mirror), str(mirror[0]) if mirror else
                "not built; run `make testbed up`"))
    from harness.backends import spdk_target
    missing_spdk = spdk_target.missing_build(cfg.disk.spdk_build)
    out.append(("SPDK vhost target", missing_spdk is None,
                missing_spdk or f"{spdk_target.build_dir(cfg.disk.spdk_build).resolve()} (vhost-user-blk-spdk)"))
    out.append(("/dev/kvm", os.path.exists("/dev/kvm"), "present (only the probe says whether it works)"
                if os.path.exists("/dev/kvm") else "absent: guests run under TCG"))
    try:  # a nested host that is up is checked the same way, from inside
        nested = NestedHost.load(cfg.state_dir / "nested")
    except NestedHostError as e:
        out.append(("nested host", True, f"not up ({e})"))
        return out
    out.append(("nested host", True, f"up, {nested.uri}, L1 under {nested.l0_accel}"))
    out += host_checks(nested)
    kvm = nested.run(["test", "-c", "/dev/kvm"], timeout=30, check=False).returncode == 0
    out.append((f"{nested.label}: /dev/kvm", kvm, "present" if kvm else "absent: its guests cannot use KVM"))
    return out


def report(cfg: Config) -> bool:
    table = Table(title="harness doctor")
    for col in ("check", "ok", "detail"):
        table.add_column(col)
    results = checks(cfg)
    for name, ok, detail in results:
        table.add_row(name, "[green]yes[/green]" if ok else "[red]no[/red]", detail)
    console.print(table)
    required = {"libvirtd", "qemu-system-x86_64", "fio", "guest image", "terraform", "terraform-provider-libvirt"}
    return all(ok for name, ok, _ in results if name in required)
