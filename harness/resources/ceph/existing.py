"""Your own Ceph cluster (ceph.mode = "existing", as CBT's use_existing): vtb reads its conf and
keyring and uses one pool, where it makes and removes only its own image (harness/resources/ceph/images.py).
Nothing in the cluster is configured, started or stopped, and the pool itself is never changed.

The fleet keeps a client conf (your ceph.conf with the keyring named for the client) and a record
of its image in its folder: `testbed down` and `gc` remove the image from that record even after
the run that made it was killed."""
from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from pathlib import Path

from harness.common.files import write_atomic
from harness.hosts import LocalHost
from harness.resources.ceph import images
from harness.resources.ceph.images import RbdImage

CLIENT_CONF = "ceph-client.conf"
RECORD = "rbd-image.json"
MACHINE_ID = "/etc/machine-id"


def client_conf(c) -> str:
    """Your ceph.conf as it is, then the client's keyring in a section of its own: a later section
    of the same name adds to an earlier one, and wins where both set a key."""
    text = Path(c.conf).read_text()
    if c.keyring:
        text += f"\n[client.{c.client}]\nkeyring = {Path(c.keyring).resolve()}\n"
    return text


def installation(state_dir: Path) -> str:
    """A short id of this installation: this machine's id and the state dir. It goes into the
    image's name, so that two machines (or state dirs) that use the same fleet name and the same
    pool never share an image, nor remove each other's."""
    try:
        machine = Path(MACHINE_ID).read_text().strip()
    except OSError:
        machine = socket.gethostname()
    return hashlib.sha256(f"{machine}\n{Path(state_dir).resolve()}".encode()).hexdigest()[:8]


def image(c, fleet_dir: Path, name: str) -> RbdImage:
    """The fleet's image in your pool, reached through the fleet's client conf."""
    return RbdImage(c.pool, name, str(fleet_dir / CLIENT_CONF), c.client)


def access_problem(host, c) -> str | None:
    """Why the client cannot use the pool, checked before anything is made (reads only)."""
    for name in ("conf", "keyring"):
        path = getattr(c, name)
        if path and not (Path(path).is_file() and os.access(path, os.R_OK)):
            return (f"ceph.{name}={path}: no readable file there; give the path of your cluster's "
                    f"{'ceph.conf' if name == 'conf' else 'client keyring'}")
    with tempfile.NamedTemporaryFile("w", prefix="vtb-ceph-", suffix=".conf") as f:
        f.write(client_conf(c))
        f.flush()
        problem = images.access_problem(host, RbdImage(c.pool, "", f.name, c.client))
    return problem.replace(f.name, c.conf) if problem else None


def prepare(c, fleet_dir: Path, img: RbdImage, owner: str, set_aside_in: Path) -> list[str]:
    """The client conf, and the record that lets teardown find the image whatever happens next.
    An image the fleet recorded under another name (before names carried the installation) is
    removed first, or its record set aside for gc: never forgotten in your pool."""
    write_atomic(fleet_dir / CLIENT_CONF, client_conf(c))
    record, said = fleet_dir / RECORD, []
    if record.exists() and json.loads(record.read_text()).get("locator") != img.locator:
        said = remove_recorded(LocalHost(), record, set_aside_in)
    write_atomic(record, json.dumps({"locator": img.locator, "owner": owner}))
    return said


def records(state_dir: Path) -> list[Path]:
    """The image records in a state dir: in fleets' folders, and those set aside by a teardown whose
    cluster did not answer (kept at the top, so that removing the fleet's folder loses none)."""
    if not state_dir.is_dir():
        return []
    return [*state_dir.glob(f"*-{RECORD}"), *state_dir.glob(f"*/{RECORD}"), *state_dir.glob(f"*/hosts/*/{RECORD}")]


def remove_recorded(host, record: Path, set_aside_in: Path | None = None) -> list[str]:
    """The image a record names, removed if it is still there and still carries the fleet's tag;
    the record goes once the image has. When the cluster does not answer, the record is moved to
    `set_aside_in` (if given) for a later `gc`."""
    if not record.exists():
        return []
    r = json.loads(record.read_text())
    try:
        said = images.remove(host, RbdImage.parse(r["locator"]), r["owner"])
    except images.ImageError as e:
        if set_aside_in is not None:
            record.replace(set_aside_in / f"{r['owner']}-{RECORD}")
        return [f"(rbd image not removed, `harness gc` will retry: {e})"]
    record.unlink()
    return [] if "nothing to remove" in said else [said]
