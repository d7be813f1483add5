"""The probes, one module per area; importing this package registers them all."""

from . import api_versions, describe_configs, kip360, kip664, kip890, kip939, lso, newer_versions

__all__ = [
    "api_versions",
    "describe_configs",
    "kip360",
    "kip664",
    "kip890",
    "kip939",
    "lso",
    "newer_versions",
]
