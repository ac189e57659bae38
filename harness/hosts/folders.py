"""The state dir vtb keeps on a host, checked before anything is put there: root's pid files,
vhost-user sockets and writes go into it, so a folder another user made first (or a link to
elsewhere) would give that user control of them."""
from __future__ import annotations

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
