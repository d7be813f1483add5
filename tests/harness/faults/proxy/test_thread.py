"""FleetThread: the fleet on its own loop thread, driven by blocking calls."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from txnchaos.cluster.protocol.codec import encode_request, request_class
from txnchaos.harness.faults.proxy.thread import FleetThread
from txnchaos.rundir.fault_log import read_fault_log

from .fakekafka import FakeKafka, make


def _roundtrip(sock: socket.socket, corr: int) -> int:
    sock.sendall(encode_request(corr, make(request_class(3, 12), {"topics": None}), "t"))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    frame = sock.recv(size, socket.MSG_WAITALL)
    return struct.unpack_from(">i", frame)[0]


def test_fleet_thread(tmp_path: Path) -> None:
    with FleetThread(fault_log=tmp_path, seed=3) as ft:
        server = ft._run(FakeKafka().start())
        link = ft.add_link("client->n1", server.address)
        rule = ft.add_rule({"kind": "drop_request", "api": "Metadata", "nth": 1})
        with socket.create_connection(link.address, timeout=10) as sock:
            sock.sendall(encode_request(1, make(request_class(3, 12), {"topics": None}), "t"))
            assert _roundtrip(sock, 2) == 2  # the first was dropped
        assert ft.remove_rule(rule.id)
        assert ft.describe()["links"]["client->n1"]["stats"]["connections_total"] == 1
        ft._run(server.close())
    assert [e["kind"] for e in read_fault_log(tmp_path)] == ["drop_request"]
