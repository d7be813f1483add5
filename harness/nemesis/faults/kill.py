"""``kill``: SIGKILL a node, restart it after ``duration``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .process import LastingProcessFault

if TYPE_CHECKING:
    from ...launch.base import ClusterHandle


class KillFault(LastingProcessFault):
    name = "kill"
    done = "killed"

    def act(self, handle: ClusterHandle, node: int) -> None:
        handle.kill(node)

    def undo(self, handle: ClusterHandle, node: int) -> None:
        handle.restart(node)
