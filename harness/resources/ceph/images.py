"""vtb's own RBD images, in its local cluster or in a user's: named by a locator, made and
prefilled, checked for access, and removed. One rule keeps a user's cluster safe: vtb removes
only an image it made, which carries its owner tag (RBD image metadata), and it never reuses an
image of the same name that lacks the tag."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from harness.common.exits import StepFailed

OWNER_KEY = "vtb.owner"
MOUNT_TIMEOUT_S = 30   # a cluster that does not answer fails the command instead of hanging it
HEALTH_TIMEOUT_S = 10
HEALTH_TRIES = 2
NO_SUCH_IMAGE = "(2) No such file or directory"   # rbd's words for an image (or pool) that is not there


@dataclass(frozen=True)
class RbdImage:
    pool: str
    image: str
    conf: str               # the client's ceph.conf (with its keyring, for cephx)
    client: str = "admin"   # the cephx id, without "client."

    @property
    def locator(self) -> str:
        """How runners name it (find-disk.sh): rbd:POOL/IMAGE@CONF, then #CLIENT unless admin."""
        tail = "" if self.client == "admin" else f"#{self.client}"
        return f"rbd:{self.pool}/{self.image}@{self.conf}{tail}"

    @classmethod
    def parse(cls, locator: str) -> "RbdImage":
        spec, _, rest = locator.removeprefix("rbd:").partition("@")
        conf, _, client = rest.partition("#")
        pool, _, image = spec.partition("/")
        return cls(pool, image, conf, client or "admin")

    def rbd(self, *args: str) -> list[str]:
        return ["rbd", "-c", self.conf, "--id", self.client, "--client-mount-timeout", str(MOUNT_TIMEOUT_S), *args]

    @property
    def spec(self) -> str:
        return f"{self.pool}/{self.image}"


# What stops a pool's I/O, or is about to: every HEALTH_ERR check (OSD_FULL, POOL_FULL, ...), and these warnings
STALLING_WARNINGS = {"POOL_FULL", "OSD_NEARFULL", "POOL_NEARFULL", "OSD_BACKFILLFULL", "SLOW_OPS", "OSD_DOWN", "OSD_HOST_DOWN"}


def health_fault(host, img: RbdImage) -> str | None:
    """Ceph's own words for what makes the cluster unable to complete I/O now ("HEALTH_ERR: 2 full
    osd(s); 4 pool(s) full"), or None. A cluster that does not answer HEALTH_TRIES times in a row,
    within the bound each time, is one: a single miss is not, as a point that saturates the CPU of
    a slow mon host (a TCG L1) can delay the ceph CLI's own start past the bound."""
    argv = ["ceph", "-c", img.conf, "--id", img.client, "--connect-timeout", str(HEALTH_TIMEOUT_S),
            "health", "detail", "--format", "json"]
    missed = ""
    for _ in range(HEALTH_TRIES):
        try:
            done = host.run(argv, check=False, timeout=HEALTH_TIMEOUT_S + 20)
        except subprocess.TimeoutExpired:
            missed = f"did not answer `ceph health` within {HEALTH_TIMEOUT_S + 20} s"
            continue
        if done.returncode != 0 and "timed out" in _said(done):
            missed = f"did not answer: {_said(done)}"
            continue
        if done.returncode != 0:   # one that answers but refuses (no rights to ask) says nothing either way
            return None
        return stalling(json.loads(done.stdout or b"{}"))
    return f"the Ceph cluster ({img.conf}) {missed}, {HEALTH_TRIES} times in a row"


def stalling(health: dict) -> str | None:
    """From `ceph health detail --format json`: its stalling checks in its own words, or None."""
    said = [c["summary"]["message"] for code, c in sorted(health.get("checks", {}).items())
            if c.get("severity") == "HEALTH_ERR" or code in STALLING_WARNINGS]
    return f"{health.get('status', 'HEALTH_?')}: {'; '.join(said)}" if said else None


class ImageError(StepFailed):
    pass


def _said(done) -> str:
    return done.stderr.decode(errors="replace").strip()[-300:]


def access_problem(host, img: RbdImage) -> str | None:
    """Why this client cannot use the pool (cluster unreachable, no such pool, no rights), or None.
    Reads only: listing the pool's images."""
    done = host.run(img.rbd("ls", img.pool), check=False, timeout=MOUNT_TIMEOUT_S + 30)
    if done.returncode != 0:
        return (f"client.{img.client} cannot list pool {img.pool} with {img.conf}: {_said(done)}. Fix: check "
                "ceph.conf, ceph.keyring, ceph.client and ceph.pool (the client needs `profile rbd` on the pool)")
    return None


def owner(host, img: RbdImage) -> str | None:
    """The image's owner tag; None when the image does not exist; "" when it has no tag. A cluster
    that does not answer is an error, not an absent image: its record must outlive it."""
    info = host.run(img.rbd("info", img.spec), check=False, timeout=MOUNT_TIMEOUT_S + 60)
    if info.returncode != 0:
        if NO_SUCH_IMAGE in _said(info):
            return None
        raise ImageError(f"rbd info {img.spec} failed on {host.label}: {_said(info)}")
    got = host.run(img.rbd("image-meta", "get", img.spec, OWNER_KEY), check=False, timeout=60)
    return got.stdout.decode().strip() if got.returncode == 0 else ""


def create(host, img: RbdImage, size: int, tag: str) -> str:
    """The image made, tagged and prefilled once (a thin image reads zeros without asking an OSD).
    Layering only: no exclusive-lock, since every VM opens the image, each in its own slice."""
    have = owner(host, img)
    if have == tag:
        return f"{img.spec}: already made"
    if have is not None:
        raise ImageError(f"pool {img.pool} already has an image {img.image} that this fleet did not make "
                         f"({OWNER_KEY}={have or 'unset'}): it is left as it is. Fix: remove it yourself, "
                         "or use another fleet.name")
    for what, argv, timeout in (
            ("rbd create", img.rbd("create", img.spec, "--size", f"{size >> 20}M", "--image-feature", "layering"), 120),
            ("tagging", img.rbd("image-meta", "set", img.spec, OWNER_KEY, tag), 60),
            ("prefilling", img.rbd("bench", "--io-type", "write", "--io-pattern", "seq", "--io-size", "4M",
                                   "--io-threads", "4", "--io-total", str(size), img.spec), 1800)):
        done = host.run(argv, check=False, timeout=timeout)
        if done.returncode != 0:
            raise ImageError(f"{what} {img.spec} failed on {host.label}: {_said(done)}")
    return f"{img.spec}: made and prefilled ({size >> 20} MiB)"


def remove(host, img: RbdImage, tag: str) -> str:
    """Removes the image if it carries this tag; anything else is left and said."""
    have = owner(host, img)
    if have is None:
        return f"{img.spec}: nothing to remove"
    if have != tag:
        return f"{img.spec}: left as it is ({OWNER_KEY}={have or 'unset'}, not {tag})"
    done = host.run(img.rbd("rm", "--no-progress", img.spec), check=False, timeout=300)
    if done.returncode != 0:
        raise ImageError(f"rbd rm {img.spec} failed on {host.label}: {_said(done)}")
    return f"rbd image {img.spec}"
