"""The CHAP account request vtb sends to tgtd is, byte for byte, the one tgtadm sends (recorded
from the real tgtadm through a socket of the test's), and tgtd's refusal is an error."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading

import pytest

from harness.backends import iscsi_account


def serve_once(path: str, answer: bytes, got: list[bytes]) -> threading.Thread:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def run():
        with server:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(10)
                data = b""
                while len(data) < iscsi_account.REQUEST.size or len(data) < iscsi_account.REQUEST.unpack(
                        data[:iscsi_account.REQUEST.size])[3]:
                    data += conn.recv(4096)
                got.append(data)
                conn.sendall(answer)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.skipif(not shutil.which("tgtadm"), reason="tgt is not installed (scripts/host-packages.sh installs it)")
def test_the_request_is_tgtadms_own(tmp_path):
    got: list[bytes] = []
    done = serve_once(f"{tmp_path}/sock.14999", iscsi_account.ANSWER.pack(0, 8), got)
    subprocess.run(["tgtadm", "-C", "14999", "--lld", "iscsi", "--mode", "account", "--op", "new", "--user", "vtb",
                    "--password", "0123abcd"], env={**os.environ, "TGT_IPC_SOCKET": f"{tmp_path}/sock"},
                   check=True, timeout=30)
    done.join(10)
    assert got == [iscsi_account.request("vtb", "0123abcd")]


def test_a_refusal_is_an_error(tmp_path):
    got: list[bytes] = []
    serve_once(f"{tmp_path}/sock", iscsi_account.ANSWER.pack(14, 8), got)
    with pytest.raises(OSError, match="its error 14"):
        iscsi_account.add(f"{tmp_path}/sock", "vtb", "0123abcd")
    assert b"password=0123abcd\0" in got[0]
