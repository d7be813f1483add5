"""``pause``: freeze a node (SIGSTOP / docker pause), resume it after ``duration``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .process import LastingProcessFault

if TYPE_CHECKING:
    from ...launch.base import ClusterHandle


class PauseFault(LastingProcessFault):
    name = "pause"
    done = "paused"

    def act(self, handle: ClusterHandle, node: int) -> None:
        handle.pause(node)

    def undo(self, handle: ClusterHandle, node: int) -> None:
        handle.resume(node)
