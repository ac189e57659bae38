"""The state dir vtb keeps on a host, checked before anything is put there, and before gc reads
the records in it: root's pid files, vhost-user sockets and writes go into it, and gc acts on its
plans, so a folder another user made first (or a link to elsewhere) would give that user control
of them."""
from __future__ import annotations

import os
import stat
from pathlib import Path

CHECK_S = 30   # one shell command on the host

# Made if missing; then it must be a real folder of the user vtb runs as there, that no one else
# can write to. Not 0700: a QEMU that runs as its own user there opens the fleet's disks in it.
STATE_DIR_CHECK = 'mkdir -p -m 0755 "$1" && if [ -L "$1" ]; then echo link; else echo "$(id -u) $(stat -c "%u %a" "$1")"; fi'


def state_dir_problem(host, path: str, who: str) -> str | None:
    """Why `path` on `host` is not a safe state dir (made when missing), or None; `who` names the
    setting in the message."""
    done = host.run(["sh", "-c", STATE_DIR_CHECK, "-", path], timeout=CHECK_S, check=False)
    said = done.stdout.decode(errors="replace").split()
    fix = f"Fix: remove {path} there (vtb makes it again), or set another state_dir for {who}"
    if done.returncode != 0 or not said:
        return f"{who}: its state dir {path} cannot be made: {done.stderr.decode(errors='replace').strip()}. {fix}"
    if said == ["link"]:
        return f"{who}: its state dir {path} is a symbolic link; vtb would write wherever it points. {fix}"
    me, owner, mode = said[0], said[1], int(said[2], 8)
    if owner != me:
        return f"{who}: its state dir {path} belongs to uid {owner}, not to uid {me} that vtb runs as there. {fix}"
    if mode & 0o022:
        return f"{who}: its state dir {path} can be written by other users (mode {mode:04o}). {fix}"
    return None


def untrusted(path: Path) -> str | None:
    """Why records in the folder `path` on this machine may have been written by someone other than
    root or the user vtb runs as, or None: it and every folder above it (and, through a link, where
    it leads) must be owned by one of them and writable by no one else; a folder above it may be a
    sticky one of root's (/tmp, /var/tmp), where others make names but cannot take vtb's."""
    if not path.is_absolute() or ".." in path.parts:
        return f"{path} is not an absolute path without '..'"
    me = {0, os.geteuid()}
    for chain in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
        for folder in [*reversed(chain.parents), chain]:
            try:
                st = folder.lstat()
            except OSError as e:
                return f"{folder} cannot be read ({e.strerror})"
            if st.st_uid not in me:
                return f"{folder} belongs to uid {st.st_uid}"
            if stat.S_ISLNK(st.st_mode):
                continue   # a link of root's in a folder of root's: where it leads is the other chain
            if not stat.S_ISDIR(st.st_mode):
                return f"{folder} is not a folder"
            sticky_above = folder != chain and st.st_mode & stat.S_ISVTX and st.st_uid == 0
            if st.st_mode & 0o022 and not sticky_above:
                return f"{folder} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def untrusted_file(path: Path) -> str | None:
    """untrusted, for a record file: its folder as there, and the file itself a regular file (not a
    link) of root's or vtb's user that no one else can write."""
    if why := untrusted(path.parent):
        return why
    try:
        st = path.lstat()
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid not in (0, os.geteuid()):
        return f"{path} belongs to uid {st.st_uid}"
    if st.st_mode & 0o022:
        return f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None
