"""One process-wide signal that the run is being stopped (Ctrl-C, SIGTERM, or a failed sibling
in a parallel step), so that every node's running command is stopped at once, not waited for."""
from __future__ import annotations

import threading

CANCEL = threading.Event()


class Cancelled(RuntimeError):
    """A node's command was stopped because the run is being stopped."""
