"""vfio preflight against sysfs trees (tests/fixtures/sysfs) and this machine's real /sys."""
import json
import os
from pathlib import Path

import pytest

from harness.backends import HostDevice, HostPlan, VmSlot
from harness.backends.vfio import Sysfs, Vfio, hostdev_xml, refuse_reason

FIXTURES = Path(__file__).parents[2] / "fixtures" / "sysfs"
ADDR = "0000:01:00.0"


def materialize(tmp_path: Path, name: str = "nvme-alone.json", edit=None) -> Sysfs:
    tree = json.loads((FIXTURES / name).read_text())
    if edit:
        edit(tree)
    for rel, content in tree["files"].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content)
    for rel, target in tree["links"].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, tmp_path / rel)
    return Sysfs(tmp_path)


def test_a_lone_nvme_controller_passes(tmp_path):
    assert refuse_reason(ADDR, materialize(tmp_path)) is None


def test_this_machine_has_no_iommu_and_is_refused():
    if Path("/sys/kernel/iommu_groups").is_dir() and any(Path("/sys/kernel/iommu_groups").iterdir()):
        pytest.skip("this machine has an IOMMU")
    reason = refuse_reason(ADDR, Sysfs(Path("/")))
    assert "IOMMU is off" in reason and "intel_iommu=on" in reason


def test_iommu_off_is_refused(tmp_path):
    def no_groups(tree):
        tree["files"] = {k: v for k, v in tree["files"].items() if "iommu_groups" not in k}
        tree["links"] = {k: v for k, v in tree["links"].items() if not k.startswith("sys/kernel/iommu_groups")}
    assert "IOMMU is off" in refuse_reason(ADDR, materialize(tmp_path, edit=no_groups))


def test_missing_address_and_missing_device(tmp_path):
    s = materialize(tmp_path)
    assert "needs disk.pci_address" in refuse_reason(None, s)
    assert "no PCI device 0000:09:00.0" in refuse_reason("0000:09:00.0", s)


def test_not_nvme_is_refused(tmp_path):
    s = materialize(tmp_path, edit=lambda t: t["files"].update(
        {"sys/bus/pci/devices/0000:01:00.0/class": "0x020000\n"}))
    assert "not an NVMe controller" in refuse_reason(ADDR, s)


def test_shared_iommu_group_is_refused(tmp_path):
    s = materialize(tmp_path, edit=lambda t: t["links"].update(
        {"sys/kernel/iommu_groups/14/devices/0000:01:00.1": "../../../../devices/pci0000:00/0000:00:01.1/0000:01:00.1"}))
    assert "shares IOMMU group 14 with 0000:01:00.1" in refuse_reason(ADDR, s)


def test_root_disk_controller_is_refused(tmp_path):
    def second_controller(tree):  # the fixture's root filesystem is on nvme1n1p2, behind 0000:02:00.0
        tree["files"]["sys/bus/pci/devices/0000:02:00.0/class"] = "0x010802\n"
        tree["links"]["sys/bus/pci/devices/0000:02:00.0/iommu_group"] = "../../../../kernel/iommu_groups/3"
    reason = refuse_reason("0000:02:00.0", materialize(tmp_path, edit=second_controller))
    assert "holds the host's root filesystem (/dev/nvme1n1p2)" in reason


def test_mounted_namespace_is_refused(tmp_path):
    s = materialize(tmp_path, edit=lambda t: t["files"].update({"proc/mounts": "/dev/nvme0n1 /data xfs rw 0 0\n"}))
    assert "a filesystem mounted on /data" in refuse_reason(ADDR, s)


def test_one_vm_only(tmp_path):
    assert "fleet.vms=1" in refuse_reason(ADDR, materialize(tmp_path), vms=2)


def test_preflight_uses_the_plan(tmp_path):
    plan = HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path), disk={"pci_address": ADDR},
                    device=HostDevice(path="/dev/null", kind="block"), vms=[VmSlot(0, "vtb-t-vm0", 0, 1)])
    assert Vfio(materialize(tmp_path / "sys")).preflight(None, plan) is None


def test_hostdev_xml():
    xml = hostdev_xml("0000:41:00.0")
    assert "bus='0x41' slot='0x00' function='0x0'" in xml.replace('"', "'")
    assert "slot='0x10'" in xml.replace('"', "'")  # the guest address the runner looks for


def test_a_namespace_under_lvm_or_md_is_refused(tmp_path):
    """Nothing is mounted from it, but a dm or md device holds it: host-up would pull it from under them."""
    held = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1/holders/dm-0"
    reason = refuse_reason(ADDR, materialize(tmp_path, edit=lambda t: t["files"].update({held: ""})))
    assert "holds /dev/nvme0n1, refused: it is held by dm-0" in reason


def test_on_this_machine_each_namespace_passes_the_device_gate(tmp_path, monkeypatch):
    """On the live machine the namespaces go through devices.refuse_reason, with disk.pci_wipe."""
    from harness.backends import vfio
    from harness.resources import devices
    asked = []
    monkeypatch.setattr(devices, "refuse_reason",
                        lambda dev, allow_signature, wipe_field, allow, allow_field:
                        asked.append((str(dev), allow_signature, wipe_field, allow, allow_field))
                        or "it carries a zfs_member signature")
    live = materialize(tmp_path)
    live.live = True   # the recorded tree, checked as this machine's
    reason = vfio.refuse_reason(ADDR, live, wipe=True, allow=["/dev/disk/by-id/nvme-x"])
    # on this machine's allowlist too (#28): a mistyped address that names another, blank controller is refused
    assert asked == [("/dev/nvme0n1", True, "disk.pci_wipe", ["/dev/disk/by-id/nvme-x"], "raid.allow")]
    assert "zfs_member" in reason


def test_host_up_checks_again_before_it_unbinds_the_driver(tmp_path):
    """#28: the gate runs again at the moment of use (Terraform's hook, after preflight): a namespace
    mounted in between keeps its controller on its driver."""
    s = materialize(tmp_path / "sys", edit=lambda t: t["files"].update({"proc/mounts": "/dev/nvme0n1 /data xfs rw 0 0\n"}))
    plan = HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path), disk={"pci_address": ADDR},
                    device=HostDevice(path="/dev/null", kind="block"), vms=[VmSlot(0, "vtb-t-vm0", 0, 1)])
    with pytest.raises(RuntimeError, match=f"vfio: not unbinding {ADDR}: .*mounted on /data"):
        Vfio(s).host_up(None, plan)
    assert not (s.device(ADDR) / "driver_override").exists() or (s.device(ADDR) / "driver_override").read_text() != "vfio-pci"


# --- #43: native NVMe multipath, and a controller whose namespaces cannot be found ----------
MULTIPATH = "nvme-multipath.json"   # the controller shows a hidden path nvme0c0n1; /dev/nvme0n1 is its subsystem's


def test_a_multipath_controller_whose_namespace_is_free_passes(tmp_path):
    assert refuse_reason(ADDR, materialize(tmp_path, MULTIPATH)) is None


def test_a_multipath_controller_whose_namespace_is_mounted_is_refused(tmp_path):
    """The mount is of the head, /dev/nvme0n1, which is not under the controller in sysfs."""
    s = materialize(tmp_path, MULTIPATH, edit=lambda t: t["files"].update({"proc/mounts": "/dev/nvme0n1p1 /data xfs rw 0 0\n"}))
    assert "a filesystem mounted on /data (/dev/nvme0n1p1)" in refuse_reason(ADDR, s)


def test_a_multipath_controllers_namespace_passes_the_allowlist_and_device_gate(tmp_path, monkeypatch):
    from harness.resources import devices
    asked = []
    monkeypatch.setattr(devices, "refuse_reason", lambda dev, allow_signature, wipe_field, allow, allow_field:
                        asked.append(str(dev)) or "not on raid.allow; add it there only if ...")
    live = materialize(tmp_path, MULTIPATH)
    live.live = True
    assert "holds /dev/nvme0n1, refused: not on raid.allow" in refuse_reason(ADDR, live, allow=["/dev/nvme9n1"])
    assert asked == ["/dev/nvme0n1"]


def test_a_multipath_head_held_by_lvm_is_refused(tmp_path):
    held = "sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1/holders/dm-0"
    s = materialize(tmp_path, MULTIPATH, edit=lambda t: t["files"].update({held: ""}))
    assert "holds /dev/nvme0n1, refused: it is held by dm-0" in refuse_reason(ADDR, s)


def test_a_path_that_leads_to_no_head_of_its_subsystem_is_refused(tmp_path):
    def headless(tree):
        tree["files"] = {k: v for k, v in tree["files"].items() if "nvme-subsys0/nvme0n1" not in k}
        del tree["links"]["sys/class/block/nvme0n1"]
    reason = refuse_reason(ADDR, materialize(tmp_path, MULTIPATH, edit=headless))
    assert "cannot be proved free: its namespace path nvme0c0n1 leads to no namespace of its NVMe subsystem" in reason


def test_a_controller_with_no_namespace_is_refused_naming_the_fix(tmp_path):
    """Nothing to check it by: no allowlist entry, no system-disk check can prove it free."""
    def no_namespace(tree):
        tree["files"] = {k: v for k, v in tree["files"].items() if "nvme0/nvme0n1" not in k}
        del tree["links"]["sys/class/block/nvme0n1"]
    reason = refuse_reason(ADDR, materialize(tmp_path, edit=no_namespace), allow=["/dev/nvme0n1"])
    assert "cannot be proved free: no namespace of it was found" in reason and "raid.allow" in reason
    assert "Fix: let the nvme driver bind it" in reason


def test_this_fleets_controller_on_vfio_pci_passes_preflight_and_anothers_does_not(tmp_path):
    """Bound, its namespaces are out of view: the fleet's own binding (its saved driver, written
    after the gate passed) is what proves it; a controller someone else put on vfio-pci is refused."""
    def on_vfio(tree):
        tree["files"] = {k: v for k, v in tree["files"].items() if "nvme0/nvme0n1" not in k}
        del tree["links"]["sys/class/block/nvme0n1"]
        tree["files"]["sys/bus/pci/drivers/vfio-pci/bind"] = ""
        tree["links"]["sys/bus/pci/devices/0000:01:00.0/driver"] = "../../../../bus/pci/drivers/vfio-pci"
    plan = HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path), disk={"pci_address": ADDR},
                    device=HostDevice(path="/dev/null", kind="block"), vms=[VmSlot(0, "vtb-t-vm0", 0, 1)])
    vfio = Vfio(materialize(tmp_path / "sys", edit=on_vfio))
    assert "no namespace of it was found" in vfio.preflight(None, plan)
    plan.run_dir.mkdir()
    (plan.run_dir / f"{ADDR}.driver").write_text("nvme")
    assert vfio.preflight(None, plan) is None


def test_a_plans_address_that_is_not_a_pci_address_is_never_joined_into_a_sysfs_path(tmp_path):
    """#43: gc undoes a dead fleet's vfio plan with host_down; `../../..` in its address would
    write driver_override wherever it led."""
    s = materialize(tmp_path / "sys")
    target = tmp_path / "elsewhere"
    target.mkdir()
    addr = "../../../../../elsewhere"
    assert (s.device(addr)).resolve() == target.resolve()
    plan = HostPlan(prefix="vtb-t", fleet_dir=str(tmp_path), disk={"pci_address": addr},
                    device=HostDevice(path="/dev/null", kind="block"), vms=[VmSlot(0, "vtb-t-vm0", 0, 1)])
    for step in (Vfio(s).host_down, Vfio(s).host_up):
        with pytest.raises(ValueError, match="is not a PCI address"):
            step(None, plan)
    assert list(target.iterdir()) == []
