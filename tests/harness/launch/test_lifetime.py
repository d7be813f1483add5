"""Issue 35 item 10: the nodes a harness owns die with it, also when it is killed with
kill -9 (a dead `txnchaos run` left its nodes serving). A real harness process starts a
real cluster through the local launcher and is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from txnchaos.harness.launch.local import is_our_node

HARNESS = textwrap.dedent(
    """
    import json, sys, threading
    from pathlib import Path
    from txnchaos.harness.launch.local import LocalCluster

    cluster = LocalCluster.prepare(Path(sys.argv[1]), 1, 0, [])
    cluster.die_with_harness = True
    # started from a thread that ends at once: the death signal must not follow it
    t = threading.Thread(target=cluster.up)
    t.start(); t.join()
    print(json.dumps(cluster.pids), flush=True)
    threading.Event().wait()
    """
)


def test_nodes_die_with_a_killed_harness(tmp_path: Path) -> None:
    pids: dict[int, int] = {}
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(tmp_path / "cluster")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert harness.stdout is not None
        pids = {int(k): v for k, v in json.loads(harness.stdout.readline()).items()}
        # the thread that started them has ended: they still serve
        assert all(is_our_node(pid, node) for node, pid in pids.items())
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait()
        deadline = time.monotonic() + 20
        while any(is_our_node(pid, node) for node, pid in pids.items()):
            assert time.monotonic() < deadline, "a node outlived its harness"
            time.sleep(0.05)
    finally:
        if harness.poll() is None:
            harness.kill()
        for node, pid in pids.items():  # never leave a node behind, pass or fail
            if is_our_node(pid, node):
                os.kill(pid, signal.SIGKILL)
