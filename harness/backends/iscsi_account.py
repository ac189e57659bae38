"""The iscsi backend's CHAP account, made in tgtd through its control socket the way tgtadm makes
it, so that the secret is never on a command line (`tgtadm --password` puts it in /proc, where
any local user reads it while tgtadm runs). The request is tgtadm's own (tgt's usr/tgtadm.h,
1.0.85 and later): a fixed header, then `user=NAME,password=SECRET` and its NUL; the answer is a
header whose first field is tgtd's error code (0: done). This file runs on the fleet's host as
`python3 -c`, the secret on its stdin."""
from __future__ import annotations

import socket
import struct
import sys

MODE_ACCOUNT, OP_NEW = 7, 0          # enum tgtadm_mode, enum tgtadm_op
REQUEST = struct.Struct("=ii64sIiQQIIIIII")   # struct tgtadm_req: mode, op, lld, len, tid, sid, lun, cid,
ANSWER = struct.Struct("=II")                 # host_no, device_type, ac_dir, pack, force; tgtadm_rsp: err, len
NO_LUN = 2 ** 64 - 1
TIMEOUT_S = 30


def request(user: str, secret: str) -> bytes:
    """tgtadm's `--lld iscsi --mode account --op new --user USER --password SECRET`, as bytes."""
    body = f"user={user},password={secret}".encode() + b"\0"
    return REQUEST.pack(MODE_ACCOUNT, OP_NEW, b"iscsi", REQUEST.size + len(body), -1, 0, NO_LUN, 0, 0, 0, 0, 0,
                        0) + body


def add(control_socket: str, user: str, secret: str) -> None:
    """Sends the request to tgtd; raises OSError with tgtd's error code when it refuses."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(TIMEOUT_S)
        s.connect(control_socket)
        s.sendall(request(user, secret))
        answer = b""
        while len(answer) < ANSWER.size:
            part = s.recv(ANSWER.size - len(answer))
            if not part:
                raise OSError(f"tgtd closed {control_socket} before it answered")
            answer += part
    err, _ = ANSWER.unpack(answer)
    if err:
        raise OSError(f"tgtd refused the account (its error {err})")


def main() -> None:
    try:
        add(sys.argv[1], sys.argv[2], sys.stdin.read().strip())
    except OSError as e:
        sys.exit(f"{sys.argv[1]}: {e}")


if __name__ == "__main__":
    main()
