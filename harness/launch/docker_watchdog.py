"""A host process that removes a docker run's containers and network when its harness dies.

A harness killed with ``kill -9`` left three containers, a network and a workload process
behind (issue 39). Testcontainers' own answer, the Ryuk reaper, is a container: its image
(``testcontainers/ryuk``) cannot be pulled here (no image registry), and although
testcontainers-python would start a locally built image in its place
(``RYUK_CONTAINER_IMAGE``), that container needs the engine's socket mounted and runs as
root with full control of an engine other users share, and it reaps by a session label
after its clients have been gone for ``RYUK_RECONNECTION_TIMEOUT``. The same job needs far
less as a host process: the harness starts this watchdog in a session of its own (so a
signal to the harness's process group does not reach it) and keeps the write end of a
pipe whose read end only the watchdog holds. When the harness exits, however it exits,
the kernel closes its end; the watchdog reads end-of-file, removes every container and
network labelled with the run's id (``docker.remove_run``) and exits. A normal stop has
removed them already, so the watchdog then finds nothing. What a watchdog cannot catch
(it was killed too, the engine was down) ``txnchaos cleanup`` removes.

Run as ``python -m txnchaos.harness.launch.docker_watchdog --run-id ID --fd N``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path

MODULE = "txnchaos.harness.launch.docker_watchdog"


class Watchdog:
    """The harness's side: the watchdog process and the pipe end that keeps it waiting."""

    def __init__(self, run_id: str, log: Path) -> None:
        read_end, self._write_end = os.pipe()  # both non-inheritable
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", MODULE, "--run-id", run_id, "--fd", str(read_end)],
                pass_fds=(read_end,),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        os.close(read_end)

    def release(self) -> None:
        """Close the pipe (the watchdog removes whatever is left and exits)."""
        if self._write_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self._write_end)
            self._write_end = -1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args(argv)
    while os.read(args.fd, 4096):
        pass  # the harness writes nothing; end-of-file means it is gone
    from .docker import _client, configure_testcontainers, remove_run

    configure_testcontainers()
    removed = remove_run(args.run_id, _client())
    if removed:
        print(f"watchdog: the harness of run {args.run_id} is gone; removed {removed} object(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
