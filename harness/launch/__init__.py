"""Launchers: start, stop, kill and restart the nodes of a cluster under test."""
