"""`harness doctor`: what the host has and lacks, each with what to do about it."""
from __future__ import annotations

import os
import shutil

import libvirt
from rich.table import Table

from harness import accel, paths
from harness.environment import libvirt_version
from harness.config import Config
from harness.console import console


def checks(cfg: Config) -> list[tuple[str, bool, str]]:
    out = []
    try:
        libvirt.open(paths.LIBVIRT_URI).close()
        out.append(("libvirtd", True, f"{paths.LIBVIRT_URI}, libvirt {libvirt_version(paths.LIBVIRT_URI)}"))
    except libvirt.libvirtError as e:
        out.append(("libvirtd", False, f"not reachable ({e.get_error_message()}); run `make testbed up`"))
    kernel = paths.IMAGE_DIR / "vmlinuz"
    if kernel.exists():
        choice = accel.choose("auto", kernel, cfg.state_dir)
        out.append(("accelerator", True, f"{choice.accel}: {choice.reason}"))
    else:
        out.append(("accelerator", False, "not probed: the guest image (its kernel) is not built"))
    from harness import raid
    from harness.hosts import LocalHost
    from harness.hosts.nested import HOST_IMAGE_DIR
    md_missing = raid.md_support(LocalHost())
    out.append(("host md (software RAID)", md_missing is None, md_missing or "available"))
    host_image = HOST_IMAGE_DIR / "rootfs.qcow2"
    out.append(("nested host image", host_image.exists(), str(host_image.resolve()) if host_image.exists() else
                "not built (`harness host nested up` builds it, or `make host-image`)"))
    for tool, why, fix in (("qemu-system-x86_64", "runs the guests", "run `make testbed up`"),
                           ("qemu-storage-daemon", "vhost-user-blk backend", "run `make testbed up`"),
                           ("fio", "the physical baseline", "run `make testbed up`"),
                           ("mdadm", "RAID arrays on this host (a nested host has its own)", "apt install mdadm")):
        path = shutil.which(tool)
        out.append((tool, path is not None, path or f"missing ({why}); {fix}"))
    image = paths.IMAGE_DIR / "rootfs.qcow2"
    out.append(("guest image", image.exists(), str(image.resolve()) if image.exists() else
                "not built; run `make testbed up`"))
    tf = paths.TERRAFORM_CACHE / "bin" / "terraform"
    out.append(("terraform", tf.exists(), str(tf) if tf.exists() else "missing; run `make testbed up`"))
    mirror = list((paths.TERRAFORM_CACHE / "mirror").rglob("terraform-provider-libvirt_*")) \
        if paths.TERRAFORM_CACHE.exists() else []
    out.append(("terraform-provider-libvirt", bool(mirror), str(mirror[0]) if mirror else
                "not built; run `make testbed up`"))
    out.append(("/dev/kvm", os.path.exists("/dev/kvm"), "present (only the probe says whether it works)"
                if os.path.exists("/dev/kvm") else "absent: guests run under TCG"))
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
