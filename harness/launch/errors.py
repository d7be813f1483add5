"""Errors shared by every launcher (a module of its own so that importing them stays cheap:
the node process imports the CLI, which imports the local launcher)."""

from __future__ import annotations


class LaunchError(RuntimeError):
    """A cluster could not be started, reached or stopped."""


class UnsupportedFault(LaunchError):
    """The launcher cannot apply this node fault (see ``ClusterHandle.capabilities``)."""
