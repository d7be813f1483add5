"""Placing a node process on a set of CPUs (Linux): its affinity and its scheduling.

Why: on a small virtual machine a message between two processes that run on different
cores wakes the receiver with an inter-processor interrupt, which a hypervisor makes
expensive; between processes on one core it is a plain context switch. The nodes of a
local cluster talk to each other on every transaction (markers, metadata), so keeping
them on the same core(s), away from the clients, costs them and the clients less CPU
per transaction (bench/README.md has the numbers).

Nodes that share a core also run as batch-scheduled processes (``SCHED_BATCH``, same
priority): a node woken by a message does not preempt the node that sent it, so the
sender finishes its event-loop pass (answering and sending all it has) before the
receiver runs, instead of the two switching back and forth once per message.

A CPU list is written as Linux writes them (``taskset -c``, ``/sys/.../cpulist``):
comma-separated numbers and inclusive ranges, e.g. ``1`` or ``0-1,4``.
"""

from __future__ import annotations

import os


class CpuListError(ValueError):
    """A CPU list that does not parse, or names CPUs this process may not use."""


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list such as ``0-1,4``; :class:`CpuListError` saying what is wrong."""
    cpus: set[int] = set()
    for part in text.split(","):
        item = part.strip()
        lo_s, dash, hi_s = item.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if dash else lo
        except ValueError:
            raise CpuListError(
                f"CPU list {text!r}: {item!r} is not a CPU number or a range such as 0-3"
            ) from None
        if lo < 0 or hi < lo:
            raise CpuListError(f"CPU list {text!r}: {item!r} is not a valid range")
        cpus.update(range(lo, hi + 1))
    return frozenset(cpus)


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on (its own affinity, not the machine's count)."""
    if not hasattr(os, "sched_getaffinity"):
        raise CpuListError("placing processes on CPUs needs Linux (sched_setaffinity)")
    return frozenset(os.sched_getaffinity(0))


def check_cpu_list(text: str) -> frozenset[int]:
    """Parse ``text`` and check that every CPU in it is usable here."""
    cpus = parse_cpu_list(text)
    usable = usable_cpus()
    missing = sorted(cpus - usable)
    if missing:
        raise CpuListError(
            f"CPU list {text!r}: CPU(s) {', '.join(map(str, missing))} not available "
            f"(this process may use {_render(usable)})"
        )
    return cpus


def place_this_process(text: str) -> frozenset[int]:
    """Restrict this process to the CPUs of ``text``, batch-scheduled. Call it before any
    thread starts: a thread keeps the affinity and policy it was created with."""
    cpus = check_cpu_list(text)
    os.sched_setaffinity(0, cpus)
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    return cpus


def _render(cpus: frozenset[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``0-2,5``."""
    parts: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            parts.append(_span(run))
            run = []
        run.append(c)
    if run:
        parts.append(_span(run))
    return ",".join(parts)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


__all__ = ["CpuListError", "check_cpu_list", "parse_cpu_list", "place_this_process", "usable_cpus"]
