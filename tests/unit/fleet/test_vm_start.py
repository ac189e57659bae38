"""Restoring a fleet from a saved template: which domains share a template (real inactive XMLs of
two VMs of one fleet), and the save image's identity rewrite (the header of a real libvirt 9.0
save image). The live restore is run by tests/integration/test_vm_restore.py."""
import shutil
from pathlib import Path

import pytest

from harness.fleet.vm_start import template_key
from harness.libvirt.save_image import SaveImageError, set_identity

FIXTURES = Path(__file__).parents[2] / "fixtures" / "libvirt"
VM0, VM1 = ((FIXTURES / f"fleet-vm{i}-inactive.xml").read_text() for i in (0, 1))
V = "libvirt 9000000 qemu 7002022"


def test_two_vms_of_one_fleet_share_a_template():
    assert template_key(VM0, "img", V) == template_key(VM1, "img", V)


QEMU_ARGS = ("<qemu:commandline xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>"
             "<qemu:arg value='driver=file,node-name=f,filename=/pool/{fleet}-device.raw,aio=native'/>"
             "<qemu:arg value='driver=raw,node-name=d,file=f,offset={offset},size=134217728'/>"
             "<qemu:arg value='driver=rbd,pool=p,image={vm}-data,conf=/state/{fleet}/ceph.conf'/></qemu:commandline>")


def _with_args(xml: str, fleet: str, offset: int) -> str:
    name = xml.split("<name>")[1].split("</name>")[0]
    return xml.replace("</domain>", QEMU_ARGS.format(fleet=fleet, offset=offset, vm=name) + "</domain>")


def test_a_backends_qemu_arguments_for_each_vm_share_a_template():
    """A backend's per-VM arguments (its region's offset, its image named after the VM, paths under
    the fleet's directory) do not make another shape."""
    assert template_key(_with_args(VM0, "a", 0), "img", V) == template_key(_with_args(VM1, "b", 1 << 27), "img", V)
    assert template_key(_with_args(VM0, "a", 0), "img", V) != template_key(VM0, "img", V)


@pytest.mark.parametrize("change", [
    ("<memory unit='KiB'>524288</memory>", "<memory unit='KiB'>1048576</memory>"),   # another memory size
    ("size='134217728'", "size='268435456'"),                                         # another data disk size
    ("<target dev='vdb' bus='virtio'/>", "<target dev='sda' bus='scsi'/>"),          # another disk model
    ("init=/sbin/vtb-init", "init=/sbin/other"),                                      # another kernel command line
])
def test_a_changed_shape_needs_another_template(change):
    assert change[0] in VM0
    assert template_key(VM0.replace(*change), "img", V) != template_key(VM0, "img", V)


def test_another_image_or_version_needs_another_template():
    assert template_key(VM0, "img2", V) != template_key(VM0, "img", V)
    assert template_key(VM0, "img", "libvirt 9000000 qemu 8000000") != template_key(VM0, "img", V)


def _xml_of(data: bytes) -> str:
    return data[92:data.index(b"\0", 92)].decode()


def test_identity_is_rewritten_and_the_cookie_kept(tmp_path):
    save = tmp_path / "state.save"
    shutil.copyfile(FIXTURES / "save-header-v2.bin", save)
    before = save.read_bytes()
    tail = before[before.index(b"QEVM"):]
    name = "vtb-a-much-longer-fleet-name-vm12"
    set_identity(save, name, "00000000-1111-2222-3333-444444444444")
    after = save.read_bytes()
    xml = _xml_of(after)
    assert f"<name>{name}</name>" in xml and "<uuid>00000000-1111-2222-3333-444444444444</uuid>" in xml
    assert xml.replace(name, "vtb-sdev-vm0").split("<uuid>")[0] == _xml_of(before).split("<uuid>")[0]
    assert len(after) == len(before) and after.endswith(tail)   # the QEMU stream is where it was
    cookie = int.from_bytes(after[32:36], "little")
    assert after[92 + cookie:].startswith(b"<cookie>")


def test_a_file_that_is_not_a_save_image_is_refused(tmp_path):
    f = tmp_path / "x.save"
    f.write_bytes(b"\0" * 200)
    with pytest.raises(SaveImageError, match="not an uncompressed libvirt save image"):
        set_identity(f, "x", "y")


def test_the_header_is_set_by_the_file_alone_as_on_another_host(tmp_path):
    """set_identity_on runs save_image.py as a script on a host without vtb: the standard library only."""
    import subprocess

    from harness.libvirt import save_image
    save = tmp_path / "state.save"
    shutil.copyfile(FIXTURES / "save-header-v2.bin", save)
    script = Path(save_image.__file__).read_text() + "\nmain()\n"
    system_python = shutil.which("python3", path="/usr/bin:/bin")   # not the venv's, which has vtb
    done = subprocess.run([system_python, "-I", "-c", script, str(save), "vtb-x-vm0", "00000000-1111-2222-3333-444444444444"],
                          cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "<name>vtb-x-vm0</name>" in _xml_of(save.read_bytes())


def test_the_owner_record_is_not_part_of_a_shape():
    """Every fleet's domains record their owner (gc's proof): VMs of two fleets still share a template."""
    from harness.libvirt.libvirt_xml import owner_metadata, owner_of
    ours = VM0.replace("</domain>", owner_metadata("vtb-a") + "</domain>")
    assert owner_of(ours) == "vtb-a" and owner_of(VM0) is None and owner_of("not xml") is None
    assert template_key(ours, "img", V) == template_key(VM0.replace("</domain>", owner_metadata("vtb-b") + "</domain>"),
                                                        "img", V) == template_key(VM0, "img", V)
