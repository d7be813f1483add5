"""Throughput through the fault proxy (no rule active) against a direct connection.

Two workloads, both measured in one run and printed as a ratio (proxy / direct):

* ``echo`` (default): a raw Kafka-frame echo server in its own process; the client
  pipelines size-prefixed frames (``--frame-size``, ``--window`` in flight) and
  counts echoed bytes. This isolates the proxy's own cost.
* ``kafka`` (``--bootstrap HOST:PORT``): a confluent-kafka producer writes
  ``--messages`` records to a live node directly, then through an external-mode
  proxy fleet (every broker connection proxied, addresses rewritten), then a consumer
  reads them back both ways.

The proxy always runs in a separate process (as it would beside a busy harness), so
the numbers include one extra hop through the loopback interface. Each of ``--rounds``
rounds runs direct and proxy back to back, each on a topic of its own that is deleted
after it (so the node's disk and page cache do not fill round after round), the side
that goes first alternating (so neither always runs on a machine the other has just
warmed or loaded). The headline is the best of each side, which filters out noise from
other processes on the machine; the median of the per-round ratios is printed too, with
every round, the load average, and (Linux) the proxy process's CPU time per MB it
forwarded (per-round connection setup included), a figure that depends little on what
else runs.

Produce throughput is timed from after the first record is acknowledged: before it,
the client connects, fetches metadata and gets its producer id (about half a second,
either way), which would otherwise be most of a round and dilute the difference the
proxy makes. Consume throughput is timed from the first record received. The consumer
sets ``fetch.queue.backoff.ms`` to 10: with librdkafka's default (1000), once its
prefetch queue holds ``queued.min.messages`` (100000, half of a default round) it stops
fetching for up to a second, an idle stall unrelated to the network path that hits
whichever side fetches faster (mostly direct) at random and made single rounds 3-5x
slower; the queue limits themselves are unchanged.

Placement: by default the OS places the client, the proxy and the node on any core.
``--client-cpus`` pins this process (the clients), ``--proxy-cpus`` places the proxy
(pinned and batch-scheduled, as ``cluster up --cpus`` places nodes). On a 2-core VM,
where a wake-up across cores is expensive, the fair split puts the proxy beside the
node it fronts and the client on the other core, for the direct and the proxied side
alike (the node: ``txnchaos cluster up --cpus 1``).

    python bench/proxy_overhead.py                       # echo
    python bench/proxy_overhead.py --bootstrap 127.0.0.1:9092
    python bench/proxy_overhead.py --bootstrap 127.0.0.1:9092 --client-cpus 0 --proxy-cpus 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

from proc_cpu import cpu_seconds  # bench/ is sys.path[0] when run as a script

# ---------------------------------------------------------------- helper processes


def serve_echo() -> None:
    class Echo(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.t = transport

        def data_received(self, data: bytes) -> None:
            self.t.write(data)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def serve_proxy(upstream: str, external: bool, cpus: str | None) -> None:
    from txnchaos.cluster.cpu_placement import place_this_process
    from txnchaos.harness.faults.proxy import ProxyFleet

    if cpus:
        place_this_process(cpus)

    async def main() -> None:
        fleet = await ProxyFleet().start()
        if external:
            ext = await fleet.external([upstream])
            bootstrap = ext.bootstrap_servers
        else:
            bootstrap = (await fleet.add_link("bench", upstream)).bootstrap
        print(json.dumps({"bootstrap": bootstrap}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def spawn(*args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise RuntimeError(f"helper {args} did not start")
    return proc, json.loads(line)


def _proxy_cpus(args: argparse.Namespace) -> list[str]:
    return ["--proxy-cpus", args.proxy_cpus] if args.proxy_cpus else []


def pin_clients(args: argparse.Namespace) -> None:
    """Pin this process (the clients) once the helpers are started: they must not inherit
    its CPUs."""
    if args.client_cpus:
        from txnchaos.cluster.cpu_placement import parse_cpu_list

        os.sched_setaffinity(0, parse_cpu_list(args.client_cpus))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ---------------------------------------------------------------- echo workload


async def echo_throughput(host: str, port: int, total: int, frame_size: int, window: int) -> float:
    """Bytes per second echoed through ``host:port`` with ``window`` frames in flight."""
    frame = struct.pack(">ihhi", frame_size - 4, 0, 9, 1) + bytes(frame_size - 12)
    n_frames = max(1, total // frame_size)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    class Client(asyncio.Protocol):
        def __init__(self) -> None:
            self.sent = 0
            self.received = 0
            self.target = n_frames * frame_size

        def connection_made(self, transport: Any) -> None:
            self.t = transport
            for _ in range(min(window, n_frames)):
                self._send()

        def _send(self) -> None:
            self.t.write(frame)
            self.sent += 1

        def data_received(self, data: bytes) -> None:
            before = self.received // frame_size
            self.received += len(data)
            for _ in range(self.received // frame_size - before):
                if self.sent < n_frames:
                    self._send()
            if self.received >= self.target and not done.done():
                done.set_result(None)

        def connection_lost(self, exc: Exception | None) -> None:
            if not done.done():
                done.set_exception(ConnectionError("closed"))

    transport, _ = await loop.create_connection(Client, host, port)
    t0 = time.perf_counter()
    await done
    elapsed = time.perf_counter() - t0
    transport.close()
    return n_frames * frame_size / elapsed


def bench_echo(args: argparse.Namespace) -> dict[str, float]:
    echo, info = spawn("--serve-echo")
    upstream = f"127.0.0.1:{info['port']}"
    proxy, pinfo = spawn("--serve-proxy", upstream, *_proxy_cpus(args))
    pin_clients(args)
    try:
        direct_port = info["port"]
        proxy_port = int(pinfo["bootstrap"].rsplit(":", 1)[1])
        best = {"direct": 0.0, "proxy": 0.0}
        for i in range(args.rounds):
            order = [("direct", direct_port), ("proxy", proxy_port)]
            for label, port in order[:: -1 if i % 2 else 1]:
                rate = asyncio.run(
                    echo_throughput("127.0.0.1", port, args.bytes, args.frame_size, args.window)
                )
                best[label] = max(best[label], rate)
        return {"direct_MBps": best["direct"] / 1e6, "proxy_MBps": best["proxy"] / 1e6}
    finally:
        proxy.kill()
        echo.kill()


# ---------------------------------------------------------------- kafka workload


def kafka_round(bootstrap: str, topic: str, messages: int, size: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer

    payload = b"x" * size
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 256 * 1024,
        }
    )
    producer.produce(topic, payload, partition=0)  # connect, metadata, producer id
    assert producer.flush(60) == 0
    t0 = time.perf_counter()
    for _ in range(messages - 1):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    produce_rate = (messages - 1) * size / (time.perf_counter() - t0)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 16 * 1024 * 1024,
            "fetch.queue.backoff.ms": 10,  # no 1 s stall when the prefetch queue is full
        }
    )
    consumer.subscribe([topic])
    got = 0
    t0 = 0.0
    deadline = time.monotonic() + 120
    while got < messages and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                if not got:
                    t0 = time.perf_counter()
                got += 1
    consume_rate = got * size / (time.perf_counter() - t0) if got else 0.0
    consumer.close()
    return produce_rate, consume_rate


def bench_kafka(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    proxy, pinfo = spawn("--serve-proxy", args.bootstrap, "--external", *_proxy_cpus(args))
    pin_clients(args)
    try:
        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        rounds: list[dict[str, tuple[float, float]]] = []
        proxy_cpu = 0.0
        for i in range(args.rounds):
            order = [("direct", args.bootstrap), ("proxy", pinfo["bootstrap"])][
                :: -1 if i % 2 else 1
            ]
            row: dict[str, tuple[float, float]] = {}
            for label, bootstrap in order:
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                    f.result(30)
                before = cpu_seconds(proxy.pid) if label == "proxy" else None
                p, c = kafka_round(bootstrap, topic, args.messages, args.message_size)
                after = cpu_seconds(proxy.pid) if before is not None else None
                if before is not None and after is not None:
                    proxy_cpu += after - before
                row[label] = (p / 1e6, c / 1e6)
                # a round writes messages x size bytes: without deleting them, 20 rounds of
                # 1M messages leave ~8 GB whose write-back competes with later rounds
                for f in admin.delete_topics([topic]).values():
                    f.result(30)
            rounds.append(row)
            d, x = row["direct"], row["proxy"]
            print(
                f"round {i + 1} ({order[0][0]} first): produce direct {d[0]:.1f} proxy"
                f" {x[0]:.1f} MB/s ({x[0] / d[0]:.1%}); consume direct {d[1]:.1f} proxy"
                f" {x[1]:.1f} MB/s ({x[1] / max(d[1], 1e-9):.1%})",
                flush=True,
            )
        out: dict[str, Any] = {}
        for k, what in enumerate(("produce", "consume")):
            for label in ("direct", "proxy"):
                out[f"{label}_{what}"] = max(r[label][k] for r in rounds)
            ratios = [r["proxy"][k] / max(r["direct"][k], 1e-9) for r in rounds]
            out[f"median_ratio_{what}"] = statistics.median(ratios)
            # quartiles of the round ratios: how far apart identical rounds land
            out[f"quartiles_{what}"] = (
                statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
            )
            # every round moves the same bytes: the rate over all rounds together is the
            # harmonic mean of the round rates (total bytes / total time)
            for label in ("direct", "proxy"):
                out[f"{label}_{what}_all"] = statistics.harmonic_mean(
                    [max(r[label][k], 1e-9) for r in rounds]
                )
        if cpu_seconds(proxy.pid) is not None:
            forwarded = 2 * args.rounds * args.messages * args.message_size / 1e6  # MB
            out["proxy_cpu_us_per_MB"] = proxy_cpu / forwarded * 1e6
        return out
    finally:
        proxy.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", help="a live node: run the confluent-kafka workload")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--bytes", type=int, default=200_000_000, help="echo: bytes per round")
    ap.add_argument("--frame-size", type=int, default=16 * 1024)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--message-size", type=int, default=200)
    ap.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve-proxy", metavar="UPSTREAM", help=argparse.SUPPRESS)
    ap.add_argument("--external", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--client-cpus", metavar="LIST", help="pin the clients to these CPUs")
    ap.add_argument("--proxy-cpus", metavar="LIST", help="place the proxy on these CPUs")
    args = ap.parse_args()
    if args.serve_echo:
        return serve_echo()
    if args.serve_proxy:
        return serve_proxy(args.serve_proxy, args.external, args.proxy_cpus)
    from txnchaos.cluster.cpu_placement import CpuListError, check_cpu_list

    try:
        for option in (args.client_cpus, args.proxy_cpus):
            if option:
                check_cpu_list(option)
    except CpuListError as exc:
        ap.error(str(exc))
    print(
        f"placement: clients on {args.client_cpus or 'any CPU'}, proxy on"
        f" {args.proxy_cpus or 'any CPU'}",
        flush=True,
    )
    if args.bootstrap:
        print(f"load average before: {load()}", flush=True)
        r = bench_kafka(args)
        print(f"load average after: {load()}")
        for what in ("produce", "consume"):
            direct, proxy = r[f"direct_{what}"], r[f"proxy_{what}"]
            quartiles = " / ".join(f"{q:.0%}" for q in r[f"quartiles_{what}"])
            print(
                f"{what}: direct {direct:.1f} MB/s, proxy {proxy:.1f} MB/s,"
                f" ratio {proxy / max(direct, 1e-9):.1%}"
                f" (median of round ratios {r[f'median_ratio_{what}']:.1%},"
                f" quartiles {quartiles};"
                f" all rounds together {r[f'proxy_{what}_all'] / r[f'direct_{what}_all']:.1%})"
            )
        if "proxy_cpu_us_per_MB" in r:
            print(f"proxy process CPU: {r['proxy_cpu_us_per_MB']:.0f} us per MB forwarded")
    else:
        r = bench_echo(args)
        print(
            f"echo ({args.frame_size} B frames, {args.window} in flight): "
            f"direct {r['direct_MBps']:.1f} MB/s, proxy {r['proxy_MBps']:.1f} MB/s, "
            f"ratio {r['proxy_MBps'] / r['direct_MBps']:.1%}"
        )


if __name__ == "__main__":
    main()
