"""Run the workload with locust as a library: headless with live stats, ``--web``, distributed.

IMPORT ORDER: this module imports locust first, and locust monkey-patches the process with
gevent (sockets, threading, time.sleep, subprocess).  Import it only at the very top of a
process of its own, before anything creates threads or sockets: patched into a process whose
threads already run, gevent breaks their bookkeeping (``KeyError`` in ``threading._delete``)
and the import locks (``cannot release un-acquired lock``).  ``txnchaos run`` therefore
starts ``python -m txnchaos.harness.workload.runner`` and never imports this module (nor
anything locust); what both sides need about the web UI is in the locust-free :mod:`.web`.
Afterwards ``time.sleep`` in the caller yields to the users' greenlets.

Library API (in a process of its own)::

    wl = WorkloadRunner(config, run_dir, bootstrap, seed=7)   # config: WorkloadConfig or dict
    wl.start()                  # creates topics, spawns users (returns at once)
    wl.stats()                  # LiveStats: users, requests, failures, ops/s, fails/s, by name
    wl.stop()                   # clean stop: tasks finish, clients flushed and closed,
                                #   open transactions left open unless abort_open_on_stop
    # or simply: wl.run(duration_s)

Distributed mode (locust's master/worker over ZeroMQ): start one master and any number of
workers, all with the same workload config and bootstrap; each worker writes the histories of
its users into its own ``--run-dir`` (a path on that machine; process names carry the worker
index, ``txn-producer-w3-0``, so the directories merge without clashes)::

    python -m txnchaos.harness.workload.runner --config wl.yaml --bootstrap B --run-dir R \\
        --master --expect-workers 2 --duration 300 [--web]
    python -m txnchaos.harness.workload.runner --config wl.yaml --bootstrap B --run-dir R \\
        --worker --master-host MASTER_IP

``--master-port 0`` lets the master's socket take a free port; ``--master-port-file`` says
which, once it listens.  ``--config`` accepts a workload YAML/JSON file, or a scenario file
with a ``workload:`` key (and its ``load_shape:``, unless ``--load-shape`` gives one).
"""

from __future__ import annotations

import locust  # first of all: locust monkey-patches the process with gevent

# isort: split
import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.runners import MasterRunner, Runner
from locust.shape import LoadTestShape
from locust.stats import stats_history, stats_printer

from ..client_security import security_config
from .clients import GeventExecutor
from .config import WorkloadConfig, load_workload
from .load_shape import LoadShape
from .topics import ensure_topics
from .users import WorkloadRuntime, user_classes
from .web import (
    MASTER_WAITS_FOR_WORKERS_S,
    web_url,
    write_master_port,
    write_started,
    write_stopped,
    write_web_url,
)
from .workers import NameAllocator, WorkerContext

log = logging.getLogger(__name__)

#: how long start() waits for its users' workers to run before it starts the clock anyway
USERS_RUNNING_TIMEOUT_S = 120.0

__all__ = ["LiveStats", "WorkloadRunner", "locust", "main"]


@dataclass
class LiveStats:
    time_ns: int
    users: int
    requests: int
    failures: int
    ops_per_s: float
    failures_per_s: float
    #: ``"<request_type>/<name>"`` -> {requests, failures, ops_per_s, avg_ms, p99_ms}
    by_name: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ui_ignores_argv() -> None:
    """locust's web UI re-parses ``sys.argv`` with locust's own parser to list its extra
    options, which fails on a host program's arguments (``--web`` is ambiguous there); make it
    parse an empty command line instead."""
    from locust import argument_parser

    orig = argument_parser.ui_extra_args_dict
    if getattr(orig, "_txnchaos", False):
        return

    def ui_extra_args_dict(args: list[str] | None = None) -> dict[str, dict[str, Any]]:
        return orig([] if args is None else args)

    ui_extra_args_dict._txnchaos = True  # type: ignore[attr-defined]
    argument_parser.ui_extra_args_dict = ui_extra_args_dict


class ScenarioShape(LoadTestShape):
    """locust's side of a scenario's :class:`LoadShape`: every tick, the users to run now."""

    def __init__(self, shape: LoadShape, config: WorkloadConfig, spawn_rate: float) -> None:
        super().__init__()
        self.shape = shape
        self.config = config
        self.spawn_rate = spawn_rate

    def tick(self) -> tuple[int, float]:
        level = self.shape.level_at(self.get_run_time())
        return self.shape.users_at_level(self.config, level), self.spawn_rate


class WorkloadRunner:
    """locust as a library for one run.  ``mode`` is ``local``, ``master`` or ``worker``."""

    def __init__(
        self,
        config: WorkloadConfig | Mapping[str, Any],
        run_dir: str | Path,
        bootstrap: str,
        *,
        seed: int | None = None,
        web: bool = False,
        web_host: str = "127.0.0.1",
        web_port: int | None = None,
        web_url_file: str | Path | None = None,
        print_stats: bool = True,
        spawn_rate: float | None = None,
        stop_timeout_s: float = 90.0,
        abort_open_on_stop: bool = False,
        flush_every: int = 1,
        fsync: bool = False,
        mode: str = "local",
        master_host: str = "127.0.0.1",
        master_port: int = 5557,
        master_bind_host: str = "127.0.0.1",
        expect_workers: int = 1,
        create_topics: bool = True,
        stats_callback: Callable[[LiveStats], None] | None = None,
        stats_interval_s: float = 1.0,
        load_shape: LoadShape | None = None,
        master_port_file: str | Path | None = None,
        started_file: str | Path | None = None,
        csv_prefix: str | None = None,
        csv_full_history: bool = False,
        html_file: str | Path | None = None,
    ) -> None:
        if mode not in ("local", "master", "worker"):
            raise ValueError(f"mode must be local, master or worker, not {mode!r}")
        self.config = load_workload(config)
        self.run_dir = Path(run_dir)
        self.bootstrap = bootstrap
        self.mode = mode
        self.web = web
        self.web_host = web_host
        self.web_port = web_port
        self.web_url_file = Path(web_url_file) if web_url_file is not None else None
        self.print_stats = print_stats
        self.master_host, self.master_port = master_host, master_port
        self.master_bind_host = master_bind_host
        self.expect_workers = expect_workers
        self.create_topics = create_topics
        self.stats_callback = stats_callback
        self.stats_interval_s = stats_interval_s
        self.load_shape = load_shape
        self.master_port_file = Path(master_port_file) if master_port_file else None
        self.started_file = Path(started_file) if started_file else None
        #: locust's own CSV files (PREFIX_stats.csv, _stats_history.csv, _failures.csv,
        #: _exceptions.csv) and HTML report, as ``locust --csv/--html`` writes them
        self.csv_prefix = csv_prefix
        self.csv_full_history = csv_full_history
        self.html_file = Path(html_file) if html_file else None
        self._csv_writer: Any = None
        #: when the users were stopped by something other than stop() (locust's web UI STOP),
        #: in wall-clock ns; None while they run or when stop() stopped them
        self.stopped_early_ns: int | None = None
        self.user_classes = user_classes(self.config, load_shape)
        self.user_count = sum(u.fixed_count for u in self.user_classes)
        if load_shape is not None:  # the most users the shape ever runs
            self.user_count = load_shape.users_at_level(self.config, load_shape.peak_level())
        self.spawn_rate = spawn_rate or max(1.0, float(self.user_count))
        self.stopping = threading.Event()  # set when locust starts stopping the users
        self.stopped_early = gevent.event.Event()  # set when the web UI's STOP ended the test
        ctx = WorkerContext(
            config=self.config,
            run_dir=self.run_dir,
            bootstrap=bootstrap,
            executor=GeventExecutor(min_threads=max(64, 2 * self.user_count + 8)),
            seed=seed,
            flush_every=flush_every,
            fsync=fsync,
            stopping=self.stopping.is_set,
        )
        shape = (
            ScenarioShape(load_shape, self.config, self.spawn_rate)
            if load_shape is not None and mode != "worker"
            else None
        )
        self.env = Environment(
            user_classes=list(self.user_classes), stop_timeout=stop_timeout_s, shape_class=shape
        )
        self.runtime = WorkloadRuntime(
            ctx=ctx, names=NameAllocator(self.run_dir), abort_open_on_stop=abort_open_on_stop
        )
        self.env.txnchaos = self.runtime  # type: ignore[attr-defined]
        self.env.events.test_stopping.add_listener(lambda **_: self._stopping())
        self._greenlets: list[gevent.Greenlet] = []
        self.web_url: str | None = None
        self.started = False
        self.stopped = False

    # -- lifecycle --------------------------------------------------------------------------

    def _stopping(self) -> None:
        """locust starts stopping the users: they stop retrying commits and aborts (the
        isolated ones are told by a signal)."""
        self.stopping.set()
        for child in list(self.runtime.children):
            child.stopping()

    def start(self) -> None:
        """Create topics and spawn the users (master: once ``expect_workers`` connected)."""
        if self.started:
            return
        self.started = True
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.config.users:  # e.g. a Java user's release, fetched once
            spec.prepare(self.run_dir)
        if self.create_topics and self.mode != "worker":
            ensure_topics(
                self.bootstrap,
                self.config.topics,
                security=security_config(self.config.client_config),
            )
        env = self.env
        master: MasterRunner | None = None
        if self.mode == "local":
            runner: Runner = env.create_local_runner()
        elif self.mode == "master":
            runner = master = env.create_master_runner(self.master_bind_host, self.master_port)
            self.master_port = int(master.server.port)
            if self.master_port_file is not None:
                write_master_port(self.master_port_file, self.master_port)
        else:
            env.create_worker_runner(self.master_host, self.master_port)
            return  # a worker spawns what the master tells it
        if self.web:
            self._serve_web_ui()
        env.events.test_stop.add_listener(lambda **_: self._test_stopped())
        self._greenlets.append(gevent.spawn(stats_history, runner))
        if self.csv_prefix:
            self._start_csv()
        if self.print_stats:
            self._greenlets.append(gevent.spawn(stats_printer(env.stats)))
        if self.stats_callback is not None:
            self._greenlets.append(gevent.spawn(self._stats_loop))
        if master is not None:
            deadline = time.monotonic() + MASTER_WAITS_FOR_WORKERS_S
            while master.worker_count < self.expect_workers:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"only {master.worker_count} of {self.expect_workers} workers connected"
                    )
                gevent.sleep(0.2)
        if env.shape_class is not None:
            runner.start_shape()
        elif self.user_count:
            runner.start(self.user_count, spawn_rate=self.spawn_rate)
        if self.started_file is not None:  # the duration (and the nemesis) counts from here
            if master is None and env.shape_class is None:
                self.wait_users_running()
            write_started(self.started_file, time.time_ns())

    def _test_stopped(self) -> None:
        """locust stopped the users: by stop() (the deadline, a signal), or else from its web
        UI (STOP), which ends the run early (the caller's ``stopped_early`` event)."""
        if not self.stopped and self.stopped_early_ns is None:
            self.stopped_early_ns = time.time_ns()
            log.info("the users were stopped from locust's web UI: the run ends here")
            self.stopped_early.set()

    def _start_csv(self) -> None:
        from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter

        assert self.csv_prefix is not None
        Path(self.csv_prefix).parent.mkdir(parents=True, exist_ok=True)
        self._csv_writer = StatsCSVFileWriter(
            self.env, PERCENTILES_TO_REPORT, self.csv_prefix, self.csv_full_history
        )
        self._greenlets.append(gevent.spawn(self._csv_writer.stats_writer))

    def _finish_reports(self) -> None:
        """The CSV files' last rows (the writer rewrites them every second: one more round
        after the users stopped) and the HTML report, as locust writes them when it quits."""
        if self._csv_writer is not None:
            from locust.stats import CSV_STATS_INTERVAL_SEC

            gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.2)
        if self.html_file is not None and self.env.runner is not None:
            from locust.html import get_html_report

            self.html_file.parent.mkdir(parents=True, exist_ok=True)
            page = get_html_report(self.env, show_download_link=False)
            self.html_file.write_text(page, encoding="utf-8")

    def _serve_web_ui(self, timeout_s: float = 30.0) -> None:
        """Start locust's web UI and wait until it listens; port 0 lets the OS pick one."""
        _ui_ignores_argv()
        ui = self.env.create_web_ui(self.web_host, self.web_port or 0)
        deadline = time.monotonic() + timeout_s
        while ui.server is None or not ui.server.started:
            if ui.greenlet is not None and ui.greenlet.dead:  # e.g. the port is taken
                raise OSError(f"locust's web UI did not start: {ui.greenlet.exception}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"locust's web UI did not listen within {timeout_s:g}s")
            gevent.sleep(0.05)
        self.web_url = web_url(self.web_host, int(ui.server.server_port))
        if self.web_url_file is not None:
            write_web_url(self.web_url_file, self.web_url)
        log.info("locust web UI on %s", self.web_url)

    def wait_users_running(self, timeout_s: float = USERS_RUNNING_TIMEOUT_S) -> bool:
        """Wait until every user has started its worker (its clients exist; an isolated
        user's process is ready): a scenario's faults are timed from the users' start, and an
        isolated user's process takes a while to start on a loaded machine."""
        deadline = time.monotonic() + timeout_s
        while self.runtime.users_running < self.user_count:
            if time.monotonic() > deadline:
                log.warning(
                    "%d of %d users running after %.0f s: starting the clock anyway",
                    self.runtime.users_running,
                    self.user_count,
                    timeout_s,
                )
                return False
            gevent.sleep(0.05)
        return True

    def wait_spawned(self, timeout_s: float = 60.0) -> bool:
        """Wait until every user has been spawned (local mode)."""
        deadline = time.monotonic() + timeout_s
        runner = self.env.runner
        while runner is not None and runner.user_count < self.user_count:
            if time.monotonic() > deadline:
                return False
            gevent.sleep(0.05)
        return True

    def _stats_loop(self) -> None:
        while True:
            gevent.sleep(self.stats_interval_s)
            try:
                self.stats_callback(self.stats())  # type: ignore[misc]
            except Exception:
                log.exception("stats callback failed")

    def stats(self) -> LiveStats:
        """Live statistics (on a master: aggregated over its workers)."""
        s = self.env.stats
        total = s.total
        by_name = {
            f"{e.method}/{e.name}": {
                "requests": e.num_requests,
                "failures": e.num_failures,
                "ops_per_s": e.current_rps,
                "avg_ms": e.avg_response_time,
                "p99_ms": e.get_response_time_percentile(0.99) if e.num_requests else 0.0,
            }
            for e in s.entries.values()
        }
        runner = self.env.runner
        return LiveStats(
            time_ns=time.time_ns(),
            users=runner.user_count if runner is not None else 0,
            requests=total.num_requests,
            failures=total.num_failures,
            ops_per_s=total.current_rps,
            failures_per_s=total.current_fail_per_sec,
            by_name=by_name,
        )

    def stop(self) -> LiveStats:
        """Clean stop: users finish their current task, then close their clients."""
        if self.stopped:
            return self.stats()
        self.stopped = True
        final = self.stats()
        runner = self.env.runner
        if runner is not None:
            runner.quit()
        for child in list(self.runtime.children):  # a user whose stop did not end its process
            child.terminate()
        try:
            self._finish_reports()
        except Exception:
            log.exception("writing locust's CSV files or HTML report failed")
        for g in self._greenlets:
            g.kill(block=False)
        if self._csv_writer is not None:
            self._csv_writer.close_files()
        if self.env.web_ui is not None:
            self.env.web_ui.stop()
        return final

    def run(self, duration_s: float) -> LiveStats:
        """start(), run for ``duration_s``, stop(); returns the final statistics."""
        self.start()
        try:
            if self.mode == "worker":
                runner = self.env.runner
                assert runner is not None
                runner.greenlet.join()
                return self.stats()
            gevent.sleep(duration_s)
        finally:
            final = self.stop()
        return final

    def __enter__(self) -> WorkloadRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- command line -------------------------------------------------------------------------------


def _read_data(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    import yaml

    return yaml.safe_load(text)


def _load_config_file(path: Path) -> tuple[WorkloadConfig, LoadShape | None]:
    """The workload of a workload or scenario file, and the scenario's load shape if any."""
    data = _read_data(path)
    shape = None
    if isinstance(data, dict) and "workload" in data:
        if data.get("load_shape") is not None:
            shape = LoadShape.model_validate(data["load_shape"])
        data = data["workload"]
    return load_workload(data), shape


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m txnchaos.harness.workload.runner")
    ap.add_argument("--config", required=True, type=Path, help="workload or scenario YAML/JSON")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds (local/master)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--web", action="store_true", help="open locust's web UI")
    ap.add_argument("--web-host", default="127.0.0.1", help="address the web UI listens on")
    ap.add_argument("--web-port", type=int, help="default: a free port")
    ap.add_argument("--web-url-file", type=Path, help="write the web UI's URL here once it listens")
    ap.add_argument("--quiet", action="store_true", help="no live stats table")
    ap.add_argument("--abort-open-on-stop", action="store_true")
    ap.add_argument(
        "--stats-jsonl",
        type=Path,
        help="append live statistics here as one JSON line per second (for an orchestrator)",
    )
    role = ap.add_mutually_exclusive_group()
    role.add_argument("--master", action="store_true")
    role.add_argument("--worker", action="store_true")
    ap.add_argument("--master-host", default="127.0.0.1")
    ap.add_argument("--master-bind-host", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=5557, help="0: a free port")
    ap.add_argument("--master-port-file", type=Path, help="write the master's port here")
    ap.add_argument("--expect-workers", type=int, default=1)
    ap.add_argument("--load-shape", type=Path, help="a load shape (JSON or YAML)")
    ap.add_argument(
        "--started-file",
        type=Path,
        help="write the time the users started here (a master: once its workers connected)",
    )
    ap.add_argument(
        "--stopped-file",
        type=Path,
        help="write here when the users were stopped early from the web UI (STOP)",
    )
    ap.add_argument("--csv", dest="csv_prefix", help="locust's CSV files, PREFIX_stats.csv etc.")
    ap.add_argument("--csv-full-history", action="store_true", help="every entry's history rows")
    ap.add_argument("--html", dest="html_file", type=Path, help="locust's HTML report")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from .config import WorkloadConfigError
    from .spec import UserPrepareError

    try:
        config, shape = _load_config_file(args.config)
        if args.load_shape is not None:
            shape = LoadShape.model_validate(_read_data(args.load_shape))
    except (OSError, WorkloadConfigError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    stats_file = args.stats_jsonl.open("a") if args.stats_jsonl else None

    def write_stats(stats: LiveStats) -> None:
        assert stats_file is not None
        stats_file.write(json.dumps(stats.to_dict(), separators=(",", ":")) + "\n")
        stats_file.flush()

    mode = "master" if args.master else "worker" if args.worker else "local"
    wl = WorkloadRunner(
        config,
        args.run_dir,
        args.bootstrap,
        seed=args.seed,
        web=args.web,
        web_host=args.web_host,
        web_port=args.web_port,
        web_url_file=args.web_url_file,
        print_stats=not args.quiet,
        abort_open_on_stop=args.abort_open_on_stop,
        mode=mode,
        master_host=args.master_host,
        master_port=args.master_port,
        master_bind_host=args.master_bind_host,
        expect_workers=args.expect_workers,
        stats_callback=write_stats if stats_file else None,
        load_shape=shape,
        master_port_file=args.master_port_file,
        started_file=args.started_file,
        csv_prefix=args.csv_prefix,
        csv_full_history=args.csv_full_history,
        html_file=args.html_file,
    )
    stop = gevent.event.Event()
    if mode == "worker":
        # SIGTERM / SIGINT: the same clean stop as the master's quit (users finish their task)
        gevent.signal_handler(signal.SIGTERM, lambda: gevent.spawn(wl.stop))
        gevent.signal_handler(signal.SIGINT, lambda: gevent.spawn(wl.stop))
    else:
        # SIGTERM / SIGINT end the run early with the same clean stop as the deadline.
        gevent.signal_handler(signal.SIGTERM, stop.set)
        gevent.signal_handler(signal.SIGINT, stop.set)
    try:
        if mode == "worker":
            final = wl.run(args.duration)
        else:
            wl.start()
    except UserPrepareError as e:
        print(f"workload: {e}", file=sys.stderr)
        return 2
    if mode != "worker":
        try:
            gevent.wait([stop, wl.stopped_early], timeout=args.duration, count=1)
        finally:
            final = wl.stop()
        if wl.stopped_early_ns is not None and args.stopped_file is not None:
            write_stopped(args.stopped_file, wl.stopped_early_ns, "the web UI's STOP")
    if stats_file is not None:
        write_stats(final)
        stats_file.close()
    print(json.dumps(final.to_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
