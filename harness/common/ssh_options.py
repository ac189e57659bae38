"""How vtb's ssh connections give up, the same for a host's commands (hosts/ssh.py) and for
libvirt's qemu+ssh connections to it (libvirt/libvirt_conn.py)."""

CONNECT_TIMEOUT_S = 15
ALIVE_INTERVAL_S = 5          # a host that stops answering fails the command within about 15 s
ALIVE_COUNT = 3
