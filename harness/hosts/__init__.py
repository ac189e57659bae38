"""A host is a libvirt URI plus a way to run commands there. Only this package knows which host it is."""
from harness.hosts.local import LocalHost

__all__ = ["LocalHost"]
