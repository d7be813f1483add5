"""The frame guard's cost per request, beside kio's decode of the same frame.

Prints, for the requests one transaction sends, microseconds per call of the guard
(``cluster/protocol/frame_guard.py``) and of kio's decode, and the guard/decode ratio.

    .venv/bin/python bench/frame_guard.py [--calls N]
"""

from __future__ import annotations

import argparse
import timeit
import uuid
from typing import Any

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import _request_readers, encode_request, request_class

RECORDS = b"\0" * 400


def frames() -> dict[str, tuple[int, int, Any]]:
    topic_id = uuid.uuid4()
    return {
        "Produce v10, 1 topic, 2 partitions": (
            0,
            10,
            {
                "transactional_id": "tx-1",
                "acks": -1,
                "timeout": 30_000,
                "topic_data": [
                    {
                        "name": "events",
                        "partition_data": [
                            {"index": 0, "records": RECORDS},
                            {"index": 1, "records": RECORDS},
                        ],
                    }
                ],
            },
        ),
        "AddPartitionsToTxn v0, 2 partitions": (
            24,
            0,
            {
                "v3_and_below_transactional_id": "tx-1",
                "v3_and_below_producer_id": 5,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [{"name": "events", "partitions": [0, 1]}],
            },
        ),
        "EndTxn v1": (
            26,
            1,
            {"transactional_id": "tx-1", "producer_id": 5, "producer_epoch": 0, "committed": True},
        ),
        "WriteTxnMarkers v1, 2 partitions": (
            27,
            1,
            {
                "markers": [
                    {
                        "producer_id": 5,
                        "producer_epoch": 0,
                        "transaction_result": True,
                        "topics": [{"name": "events", "partition_indexes": [0, 1]}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
        ),
        "Fetch v16, 6 partitions": (
            1,
            16,
            {
                "max_wait": 500,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 1,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {"partition": p, "fetch_offset": 100, "partition_max_bytes": 1 << 20}
                            for p in range(6)
                        ],
                    }
                ],
            },
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls timed per request")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    total_guard = total_kio = 0.0
    for name, (key, version, fields) in frames().items():
        frame = encode_request(1, make(request_class(key, version), fields), "rdkafka")[4:]
        header, body, guard = _request_readers(key, version)

        def decode(frame: bytes = frame, header: Any = header, body: Any = body) -> None:
            body(frame, header(frame, 0)[1])

        def check(frame: bytes = frame, guard: Any = guard) -> None:
            guard(frame)

        g = timeit.timeit(check, number=args.calls)
        k = timeit.timeit(decode, number=args.calls)
        g, k = g / args.calls * 1e6, k / args.calls * 1e6
        total_guard += g
        total_kio += k
        print(f"{name:38s} guard {g:5.2f} µs   kio decode {k:5.2f} µs   ratio {g / k:4.2f}")
    label = "one transaction (sum)"
    print(f"{label:38s} guard {total_guard:5.1f} µs   kio decode {total_kio:5.1f} µs")


if __name__ == "__main__":
    main()
