"""Where locust's web UI (and a distributed master) listens, in terms both sides of
``txnchaos run`` share.

The orchestrator must never import locust (it monkey-patches the whole process with gevent,
and the orchestrator already runs real threads: proxies, scrapers, samplers). So the workload
process binds the UI itself (port 0: the OS picks a free one, no race) and writes the URL to a
file; the orchestrator, which only imports this locust-free module, checks the address up
front and reads the URL back.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

__all__ = [
    "WebAddressError",
    "check_web_address",
    "read_master_port",
    "read_stopped",
    "read_web_url",
    "web_url",
    "write_master_port",
    "write_stopped",
    "write_web_url",
]


class WebAddressError(ValueError):
    """The web UI could not listen on the address asked for."""


def web_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def check_web_address(
    host: str, port: int | None, option: str = "--web-host", what: str = "the web UI"
) -> None:
    """Bind ``host:port`` (port 0 when None) once and let go: a bad host or a taken port is
    refused before a cluster starts, not after."""
    try:
        infos = socket.getaddrinfo(host, port or 0, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise WebAddressError(f"{option} {host}: {exc.strerror or exc}") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the UI's server does
        try:
            s.bind(address)
        except OSError as exc:
            where = f"{host}:{port}" if port else host
            raise WebAddressError(f"{what} cannot listen on {where}: {exc.strerror}") from exc


def write_web_url(path: Path, url: str) -> None:
    """Write the URL whole (temporary file, then rename): a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(url + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_web_url(path: Path) -> str | None:
    """The URL the workload process wrote, or None while its UI is not serving yet."""
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


#: how long a distributed master waits for its workers to connect before it gives up
MASTER_WAITS_FOR_WORKERS_S = 120


def write_master_port(path: Path, port: int) -> None:
    """The port a distributed master's socket took (written whole, like the URL)."""
    write_web_url(path, str(port))


def read_master_port(path: Path) -> int | None:
    """The master's port, or None while it is not listening yet."""
    text = read_web_url(path)
    return int(text) if text else None


def write_started(path: Path, time_ns: int) -> None:
    """When the users started (wall-clock ns), written whole once the runner has started
    them: an orchestrator starts its fault clock from it."""
    write_web_url(path, str(time_ns))


def read_started(path: Path) -> int | None:
    """The users' start time the workload process wrote, or None while they have not."""
    text = read_web_url(path)
    return int(text) if text else None


def write_stopped(path: Path, time_ns: int, by: str) -> None:
    """The users were stopped early (``by`` says what: the web UI's STOP), written whole once
    the workload has stopped them: the orchestrator records the run as interrupted."""
    write_web_url(path, json.dumps({"time_ns": time_ns, "by": by}))


def read_stopped(path: Path) -> dict[str, Any] | None:
    """``{"time_ns", "by"}`` when the users were stopped early, else None."""
    text = read_web_url(path)
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
