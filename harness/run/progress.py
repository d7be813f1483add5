"""What ``txnchaos run`` shows while it works: the phase, elapsed time, operations/s,
failures, the faults in effect and nemesis errors.

On a terminal this is a live table (rich); elsewhere (CI logs, pipes) one plain line
every few seconds, so logs stay readable.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

PLAIN_EVERY_S = 5.0


class LiveView:
    def __init__(self, progress: Progress, title: str, live: Live | None) -> None:
        self.progress = progress
        self.title = title
        self.live = live
        self._last_plain = 0.0

    def update(
        self,
        *,
        elapsed: float,
        stats: dict[str, Any] | None,
        active: list[str],
        errors: list[str],
        open_partitions: int,
    ) -> None:
        ops = stats.get("ops_per_s", 0.0) if stats else 0.0
        requests = stats.get("requests", 0) if stats else 0
        failures = stats.get("failures", 0) if stats else 0
        total = self.progress.duration
        if self.live is not None:
            table = Table(title=f"txnchaos: {self.title}", show_header=False, min_width=60)
            table.add_column("what", style="bold")
            table.add_column("value")
            table.add_row("elapsed", f"{min(elapsed, total):5.0f}s / {total:g}s")
            table.add_row("operations", f"{requests:,} ({ops:,.0f}/s)")
            table.add_row("failed operations", f"{failures:,}")
            table.add_row("partitions with open transactions", str(open_partitions))
            table.add_row("faults in effect", "\n".join(active) or "none")
            if errors:
                table.add_row("nemesis errors", "\n".join(errors[-3:]))
            self.live.update(table)
            return
        now = time.monotonic()
        if now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self.progress.console.print(
                f"[{min(elapsed, total):5.0f}s/{total:g}s] ops {requests:,} ({ops:,.0f}/s), "
                f"failed {failures:,}, open-txn partitions {open_partitions}, "
                f"faults: {', '.join(active) or 'none'}"
                + (f", nemesis errors {len(errors)}" if errors else "")
            )


class Progress:
    def __init__(self, console: Console, duration: float) -> None:
        self.console = console
        self.duration = duration

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        if self.console.is_terminal:
            with self.console.status(name):
                yield
        else:
            self.console.print(f"{name} ...")
            yield
        self.console.print(f"[green]✓[/] {name} ({time.monotonic() - started:.1f}s)")

    @contextlib.contextmanager
    def live(self, title: str) -> Iterator[LiveView]:
        if self.console.is_terminal:
            with Live(console=self.console, refresh_per_second=2, transient=False) as live:
                yield LiveView(self, title, live)
        else:
            yield LiveView(self, title, None)

    def note(self, text: str) -> None:
        self.console.print(text)
