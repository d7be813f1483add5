"""Launchers: start, stop, kill and restart the nodes of a cluster under test.

The interface is in :mod:`.base` (``ClusterSpec``, ``NodeInfo``, ``ClusterHandle``,
``Launcher``); :func:`.registry.get_launcher` picks ``local``, ``docker`` or ``external``.
This package module stays import-light: the node process imports :mod:`.local`.
"""
