"""How the ``txnchaos`` command line treats bad input: exit code 2 and one line naming it.

Exit codes (docs/cli.md): 0 valid, 1 anomalies found, 2 the harness failed or was given bad
input.  Click's own defaults collide with that — a ``ClickException`` exits 1, Ctrl-C
("Aborted!") exits 1, and an uncaught exception exits 1 with a traceback — so every command
runs under :class:`Cli`, which maps each of them to 2 and prints the problem on one line.
Commands raise :class:`InputError` for input they refuse, and the parameter types here check
values before anything starts.
"""

from __future__ import annotations

import math
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError

from .launch.metrics_urls import parse_metrics_url

EXIT_FAILED = 2


class InputError(click.ClickException):
    """Input the command refuses (a file, a field, a value); exit code 2."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        ctx = click.get_current_context(silent=True)
        self.command_path = ctx.command_path if ctx is not None else None


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def error_line(exc: click.ClickException, default_path: str = "txnchaos") -> str:
    """``COMMAND: message`` on one line (a usage error also says where help is)."""
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        path = exc.ctx.command_path
        return f"{path}: {_one_line(exc.format_message())} (see '{path} --help')"
    path = getattr(exc, "command_path", None) or default_path
    return f"{path}: {_one_line(exc.format_message())}"


class Cli(click.Group):
    """The root group: whatever a command ends with, the exit code follows docs/cli.md."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        name = prog_name or self.name or "txnchaos"
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as exc:  # `txnchaos` or `txnchaos cluster` alone: the help
            exc.show()
            sys.exit(EXIT_FAILED)
        except click.ClickException as exc:
            click.echo(error_line(exc, name), err=True)
            sys.exit(EXIT_FAILED)
        except (click.Abort, KeyboardInterrupt, EOFError):
            click.echo(f"{name}: interrupted", err=True)
            sys.exit(EXIT_FAILED)
        except BrokenPipeError:  # the reader of our output went away (`... | head`)
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (no flush error at exit)
            sys.exit(EXIT_FAILED)
        except Exception as exc:  # a bug: the traceback is for us, the exit code for scripts
            traceback.print_exc()
            click.echo(
                f"{name}: internal error: {_one_line(f'{type(exc).__name__}: {exc}')}", err=True
            )
            sys.exit(EXIT_FAILED)
        sys.exit(rv if isinstance(rv, int) else 0)


#: the units a duration may carry, in seconds
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)")
#: what every duration option's help shows
DURATION_EXAMPLES = "90, 90s, 1.5m, 30m, 1h30m, 250ms"


def parse_duration(text: str, unit: str = "s") -> float:
    """One duration syntax for every option: a number (in ``unit``, seconds unless the option
    mirrors a Kafka tool's) or numbers with units, ``90s``, ``30m``, ``1h30m``, ``250ms`` ->
    seconds.  ValueError, naming the examples, on anything else or on a value not above 0."""
    raw = str(text).strip().lower().replace(" ", "")
    bad = ValueError(f"{text!r} is not a duration (examples: {DURATION_EXAMPLES})")
    if not raw:
        raise bad
    try:
        seconds = float(raw) * DURATION_UNITS[unit]
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _DURATION_PART.finditer(raw):
            if m.start() != pos:
                raise bad from None
            seconds += float(m.group(1)) * DURATION_UNITS[m.group(2)]
            pos = m.end()
        if pos != len(raw):
            raise bad from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r} is not a duration above 0 (examples: {DURATION_EXAMPLES})")
    return seconds


class Duration(click.ParamType):
    """A duration option (:func:`parse_duration`): seconds, as a float.  ``unit``: what a
    bare number counts (``s``; a Kafka tool's own flag keeps its unit, ``ms`` or ``m``)."""

    name = "duration"

    def __init__(self, unit: str = "s") -> None:
        self.unit = unit

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        try:
            return parse_duration(value, self.unit)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


#: the duration options that count bare numbers in seconds
Seconds = Duration


PORT = click.IntRange(0, 65535)
LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False)


def check_metrics_urls(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[int, str]:
    """Repeated ``NODE=URL`` options -> {node id: URL}; a node given twice is refused."""
    urls: dict[int, str] = {}
    for text in value:
        try:
            node, url = parse_metrics_url(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if node in urls:
            raise click.BadParameter(f"node {node} is given twice")
        urls[node] = url
    return urls


def check_kafka_version(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """An Apache Kafka release number (``4.4.0``), checked before anything starts."""
    if value is None:
        return None
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise click.BadParameter(f"expected a release such as 4.4.0, got {value!r}")
    return value.strip()


def check_bootstrap(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``HOST:PORT[,HOST:PORT...]``, checked before a run directory is made."""
    if value is None:
        return None
    for part in value.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"expected HOST:PORT[,HOST:PORT...], got {value!r}")
    return value
