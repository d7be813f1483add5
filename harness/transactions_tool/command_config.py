"""``--command-config FILE``: the client properties file Kafka's tools take, for the
security settings the admin connections log in with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from ...cluster.security.sasl import JaasConfig, SaslConfigError, SaslCredentials
from ..client_security import sasl_credentials

SUPPORTED = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
)


F = TypeVar("F", bound=Callable[..., object])


class CommandConfigError(ValueError):
    """The file cannot be read or says something this tool cannot do."""


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value``, ``key: value`` or ``key value``; ``#``/``!``
    comments; a trailing backslash continues the line (the next one's indent dropped)."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip() if logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line.rstrip()
        key, value = _split(logical.strip())
        out[key] = value
        logical = ""
    if logical:
        key, value = _split(logical.strip())
        out[key] = value
    return out


def _split(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=: \t":
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], rest.strip()
    return line, ""


def load_command_config(path: Path) -> SaslCredentials | None:
    """The credentials ``path`` configures (None: PLAINTEXT)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandConfigError(f"cannot read {path}: {exc}") from exc
    props = parse_properties(text)
    unknown = sorted(k for k in props if k not in SUPPORTED)
    if unknown:
        raise CommandConfigError(
            f"{path}: unsupported key(s) {', '.join(unknown)} (supported: {', '.join(SUPPORTED)})"
        )
    username, password = props.get("sasl.username"), props.get("sasl.password")
    try:
        if "sasl.jaas.config" in props:
            if username is not None or password is not None:
                raise SaslConfigError("give sasl.jaas.config or sasl.username/sasl.password")
            jaas = JaasConfig.parse(props["sasl.jaas.config"])
            if not jaas.username or jaas.password is None:
                raise SaslConfigError('sasl.jaas.config needs username="..." password="..."')
            username, password = jaas.username, jaas.password
        return sasl_credentials(
            props.get("security.protocol"), props.get("sasl.mechanism"), username, password
        )
    except SaslConfigError as exc:
        raise CommandConfigError(f"{path}: {exc}") from exc


def _read_at_parse_time(
    ctx: click.Context, param: click.Parameter, value: Path | None
) -> SaslCredentials | None:
    """Read at parse time, so a bad file exits 2 before any connection is tried."""
    if value is None:
        return None
    try:
        return load_command_config(value)
    except CommandConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


def command_config_option(f: F) -> F:
    """``--command-config FILE``: the command's parameter ``command_config`` gets the
    credentials (None: PLAINTEXT)."""
    return click.option(
        "--command-config",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        callback=_read_at_parse_time,
        metavar="FILE",
        help="Client properties (security.protocol, sasl.mechanism, sasl.jaas.config or "
        "sasl.username/sasl.password), as Kafka's tools take them.",
    )(f)
