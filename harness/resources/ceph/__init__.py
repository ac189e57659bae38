"""Ceph as the VM disk backend: a cluster vtb makes (local mode) or a user's own (existing mode)."""
