"""The database server of a MySQL point on a host slot: MariaDB, started by
guest-agents/run-mysql.sh with its pid file in the point's scratch mount (named for the fleet).
A killed run's server is stopped by `harness gc` through that pid file, as every daemon of vtb's."""
from __future__ import annotations

PROCESSES = ("mariadbd",)   # executables gc stops when a pid file of vtb's holds them
