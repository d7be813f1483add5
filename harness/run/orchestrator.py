"""``txnchaos run``: one scenario from cluster start to verdict.

Phases: start the cluster (with a fault proxy on every link), start metric scraping
and LSO sampling, start the workload (locust, in its own process: gevent's
monkey-patching stays out of this one) and the nemesis, run for the scenario's
duration, heal every fault, wait for quiescence (no open transactions), read every
partition with read_committed, capture the final state, compact the history to
Parquet, and judge the run.

Whatever happens — an error, Ctrl-C — the workload, the nemesis and the cluster are
stopped and what was recorded is compacted, so the run directory stays analysable
and no process or container is left behind.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ...rundir.compact import compact_to_parquet
from ...rundir.run_dir import DEFAULT_TRANSACTION_MAX_TIMEOUT_MS, RunDirError, write_run_info
from ..capture.final_state import capture_final_state
from ..capture.metrics_scraper import MetricsScraper
from ..capture.offsets_sampler import OffsetsSampler
from ..client_security import security_config
from ..console import make_console
from ..launch.base import KILL, PAUSE, RESTART, ClusterHandle, ClusterSpec
from ..launch.lifetime import spawn
from ..launch.registry import get_launcher
from ..nemesis.executor import NemesisExecutor
from ..nemesis.schedule import Targets, build_schedule
from ..workload.config import WorkloadConfig
from ..workload.crash_report import record_client_crash
from ..workload.dual_write.capture import capture_databases
from ..workload.final_read import final_read, list_ends
from ..workload.kinds.registry import user_kind
from ..workload.web import (
    MASTER_WAITS_FOR_WORKERS_S,
    read_master_port,
    read_started,
    read_stopped,
    read_web_url,
)
from .judge import Judge
from .progress import Progress
from .scenario import Scenario, scenario_as_run

log = logging.getLogger(__name__)

SCENARIO_FILE = "scenario.yaml"

EXIT_VALID = 0
EXIT_ANOMALIES = 1
EXIT_HARNESS_FAILED = 2

#: How long workers may take to stop their users once the master has quit (seconds).
WORKER_STOP_TIMEOUT_S = 150
#: how long a workload process may take to start its users (topics created, users spawned);
#: a distributed master also waits up to MASTER_WAITS_FOR_WORKERS_S for its workers
USERS_START_TIMEOUT_S = 150


@dataclass
class RunOptions:
    seed: int | None = None
    launcher: str | None = None
    #: the Apache Kafka release of the kafka launcher (replaces cluster.kafka_version)
    kafka_version: str | None = None
    #: what the docker launcher runs: txnchaos or apache-kafka (replaces cluster.flavour)
    flavour: str | None = None
    bootstrap: str | None = None
    #: an external cluster's /metrics URL per node id (replaces the scenario's cluster.metrics)
    metrics: dict[int, str] | None = None
    duration: float | None = None
    out: Path | None = None
    #: what judges the run once it is recorded (None: recorded only); warmed when the
    #: workload starts, so a JVM it needs starts while the run goes on
    judge: Judge | None = None
    web: bool = False
    web_host: str = "127.0.0.1"
    #: None: the workload process binds a free port
    web_port: int | None = None
    #: locust's distributed mode: worker processes started on this machine, and workers
    #: attached from other machines (``txnchaos worker``) that the master waits for
    workers: int = 0
    expect_workers: int = 0
    master_bind: str = "127.0.0.1"
    #: None: the master's socket takes a free port
    master_port: int | None = None
    #: locust's own CSV files (PREFIX_stats.csv, ...) and HTML report (locust --csv/--html)
    csv_prefix: str | None = None
    csv_full_history: bool = False
    html_file: Path | None = None

    @property
    def distributed(self) -> bool:
        return self.workers + self.expect_workers > 0


@dataclass
class RunState:
    """What the run has set up so far (for cleanup in any phase)."""

    handle: ClusterHandle | None = None
    workload: subprocess.Popen[bytes] | None = None
    #: the worker processes of locust's distributed mode started on this machine
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    nemesis: NemesisExecutor | None = None
    scraper: MetricsScraper | None = None
    sampler: OffsetsSampler | None = None
    info: dict[str, Any] = field(default_factory=dict)


def default_run_dir(scenario: Scenario, seed: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{scenario.name}-{stamp}-seed{seed}"


class Orchestrator:
    def __init__(self, scenario: Scenario, options: RunOptions, console: Console) -> None:
        self.scenario = scenario
        self.options = options
        self.console = console
        self.seed = scenario.seed if options.seed is None else options.seed
        self.duration = options.duration or scenario.duration
        self.launcher = options.launcher or scenario.cluster.launcher
        self.kafka_version = options.kafka_version or scenario.cluster.kafka_version
        self.flavour = options.flavour or scenario.cluster.flavour
        self.bootstrap = options.bootstrap or scenario.cluster.bootstrap
        self.metrics_urls = dict(options.metrics or scenario.cluster.metrics)
        self.run_dir = (options.out or default_run_dir(scenario, self.seed)).resolve()
        self.state = RunState()
        self.progress = Progress(console, self.duration)
        self.partitions = {t.name: t.partitions for t in scenario.workload.topics}
        # a SASL cluster's credentials, from the workload's client_config
        self.security = security_config(scenario.workload.client_config)

    @property
    def runs_kafka(self) -> bool:
        """Whether the cluster is Apache Kafka's (the kafka launcher, the docker flavour)."""
        return self.launcher == "kafka" or (
            self.launcher == "docker" and self.flavour == "apache-kafka"
        )

    # ---- the run -------------------------------------------------------------------
    def _write_scenario(self) -> None:
        """scenario.yaml: the scenario as run (its seed and duration after the command
        line's overrides), so the run can be repeated, or shrunk, from its directory."""
        (self.run_dir / SCENARIO_FILE).write_text(
            scenario_as_run(
                self.scenario,
                self.seed,
                self.duration,
                self.launcher,
                self.kafka_version if self.runs_kafka else None,
                self.flavour if self.launcher == "docker" else None,
            )
        )

    def run(self) -> int:
        if self.run_dir.exists() and any(self.run_dir.iterdir()):
            self.console.print(f"[red]{self.run_dir} exists and is not empty; use --out[/]")
            return EXIT_HARNESS_FAILED
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(exist_ok=True)
        self._log_to_file()
        self._write_info(complete=False)
        self._write_scenario()
        self.console.print(
            f"txnchaos run [bold]{self.scenario.name}[/] seed {self.seed}, "
            f"{self.duration:g}s on the {self.launcher} launcher -> {self.run_dir}"
        )
        complete = False
        failure: str | None = None
        interrupted = False
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._run_phases()
            complete = True
        except KeyboardInterrupt:
            interrupted = True
            self.console.print("[yellow]interrupted: stopping everything[/]")
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
            log.error("harness failure\n%s", traceback.format_exc())
            self.console.print(f"[red]the harness failed:[/] {failure}")
        finally:
            signal.signal(signal.SIGTERM, previous)
            self._cleanup()
            if interrupted or "interrupted" not in self.state.info:
                self.state.info["interrupted"] = interrupted
            self._write_info(complete=complete, failure=failure)
            compacted = self._compact()
        if not compacted:
            return EXIT_HARNESS_FAILED  # the history cannot be judged (the message said why)
        if not complete:
            self.console.print(
                f"partial run directory kept at {self.run_dir} "
                f"(analysable: txnchaos analyze {self.run_dir})"
            )
            return EXIT_HARNESS_FAILED
        if self.options.judge is None:
            self.console.print(f"done; judge it with: txnchaos analyze {self.run_dir}")
            return EXIT_VALID
        return self._analyze(self.options.judge)

    def _run_phases(self) -> None:
        scenario = self.scenario
        st = self.state
        with self.progress.phase("starting the cluster"):
            options: dict[str, Any] = {}
            if self.launcher == "external":
                options = {"bootstrap": self.bootstrap, "metrics": self.metrics_urls}
            elif self.launcher == "kafka":
                options = {"version": self.kafka_version}
            elif self.launcher == "docker" and self.flavour == "apache-kafka":
                options = {"flavour": self.flavour, "version": self.kafka_version}
            launcher = get_launcher(self.launcher, **options)
            st.handle = launcher.start(
                ClusterSpec(
                    brokers=scenario.cluster.brokers,
                    coordinators=scenario.cluster.coordinators,
                    settings=scenario.cluster.setting_pairs(),
                    proxied=scenario.cluster.proxied,
                    seed=self.seed,
                    cpus=scenario.cluster.cpus,
                ),
                self.run_dir,
            )
            self.state.info["cluster"] = st.handle.describe()
            self._write_info(complete=False)
        handle = st.handle
        self.console.print(f"cluster up: bootstrap {handle.bootstrap}")
        targets = Targets(
            nodes=[n.id for n in handle.nodes],
            links=handle.links,
            clients=sorted({u.kind for u in scenario.workload.users}),
            node_faults=bool(handle.capabilities & {KILL, PAUSE, RESTART}),
        )
        schedule = build_schedule(
            scenario.nemesis, seed=self.seed, duration=self.duration, targets=targets
        )
        (self.run_dir / "schedule.json").write_text(
            json.dumps([f.model_dump() for f in schedule], indent=1) + "\n"
        )
        self.console.print(f"nemesis: {len(schedule)} fault(s) scheduled")
        for note in unmatched_links(schedule, targets.links):
            log.warning(note)
            self.console.print(f"[yellow]note:[/] {escape(note)}")

        def metrics() -> dict[str, str]:  # asked every round: docker restarts move ports
            return {f"node-{k}": v for k, v in handle.metrics_urls().items()}

        st.scraper = MetricsScraper(self.run_dir, metrics).start() if metrics() else None
        with self.progress.phase("starting the workload"):
            st.workload = self._start_workload(handle.bootstrap)
            # schedule.json counts from the users' start (a master's: once its workers are
            # in): the nemesis clock starts there, and the report places its actions by it
            self.state.info["workload_started_ns"] = self._wait_users_started(st.workload)
            if self.options.judge is not None:
                self.options.judge.warm()  # the run will be judged: its engine starts now
            origin = time.monotonic()
            st.sampler = OffsetsSampler(
                self.run_dir, handle.bootstrap, self.partitions, security=self.security
            )
            st.nemesis = NemesisExecutor(
                schedule,
                handle,
                workload=scenario.workload,
                run_dir=self.run_dir,
                seed=self.seed,
                window_end=self.duration,
            ).start(origin)
            st.sampler.start()
        self._follow_workload(origin)
        with self.progress.phase("healing"):
            st.nemesis.heal()
        self._quiesce(handle.bootstrap)
        with self.progress.phase("final read (read_committed, every partition)"):
            result = final_read(
                handle.bootstrap,
                self.partitions,
                self.run_dir,
                timeout_s=scenario.final.read_timeout,
                client_config=self.security,
            )
        if not result.complete:
            self.console.print("[yellow]the final read did not reach every partition's LSO[/]")
        with self.progress.phase("capturing the final state"):
            capture_final_state(
                self.run_dir, handle.bootstrap, result.partition_state(), self.security
            )
            capture_databases(self.run_dir, scenario.workload)
        self.progress.note(
            f"final read: {result.records} records from {len(result.partitions)} partitions"
        )

    def _workload(self) -> WorkloadConfig:
        """The scenario's workload, its topics given the cluster's topic settings."""
        workload = self.scenario.workload
        handle = self.state.handle
        extra = handle.topic_configs() if handle is not None else {}
        if not extra:
            return workload
        topics = [t.model_copy(update={"configs": {**extra, **t.configs}}) for t in workload.topics]
        return workload.model_copy(update={"topics": topics})

    def _workload_cmd(self, bootstrap: str) -> list[str]:
        """The workload runner's command line a local, master or worker process shares."""
        config = self.run_dir / "workload.json"
        config.write_text(self._workload().model_dump_json(indent=1))
        cmd = [sys.executable, "-m", "txnchaos.harness.workload.runner", "--config", str(config)]
        cmd += ["--bootstrap", bootstrap, "--run-dir", str(self.run_dir), "--seed", str(self.seed)]
        if self.scenario.load_shape is not None:
            shape = self.run_dir / "load-shape.json"
            shape.write_text(self.scenario.load_shape.model_dump_json(indent=1))
            cmd += ["--load-shape", str(shape)]
        return [*cmd, "--quiet"]

    def _start_workload(self, bootstrap: str) -> subprocess.Popen[bytes]:
        cmd = self._workload_cmd(bootstrap)
        cmd += ["--duration", str(self.duration)]
        cmd += ["--stats-jsonl", str(self.run_dir / "workload-stats.jsonl")]
        cmd += ["--started-file", str(self._started_file())]
        cmd += ["--stopped-file", str(self._stopped_file())]
        opts = self.options
        if opts.csv_prefix:
            cmd += ["--csv", opts.csv_prefix] + (["--csv-full-history"] * opts.csv_full_history)
        if opts.html_file:
            cmd += ["--html", str(opts.html_file)]
        if opts.distributed:
            cmd += ["--master", "--expect-workers", str(opts.workers + opts.expect_workers)]
            cmd += ["--master-bind-host", opts.master_bind]
            cmd += ["--master-port", str(opts.master_port or 0)]
            cmd += ["--master-port-file", str(self._master_port_file())]
        if self.options.web:
            # The workload process binds the UI and writes its URL; importing locust here to
            # pick a port would monkey-patch this process, whose threads already run.
            cmd += ["--web", "--web-host", self.options.web_host]
            cmd += ["--web-url-file", str(self._web_url_file())]
            if self.options.web_port:
                cmd += ["--web-port", str(self.options.web_port)]
        master = self._spawn(cmd, "workload.log")
        if opts.distributed:
            self.state.workload = master
            self._start_workers(bootstrap, master)
        return master

    def _spawn(self, cmd: list[str], log_name: str) -> subprocess.Popen[bytes]:
        log_file = open(self.run_dir / "logs" / log_name, "ab")  # noqa: SIM115
        try:
            # dies with the harness, also on kill -9 (it outlived it: issue 35, item 10)
            return spawn(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT)
        finally:
            log_file.close()

    def _started_file(self) -> Path:
        return self.run_dir / "logs" / "workload.started"

    def _stopped_file(self) -> Path:
        return self.run_dir / "logs" / "workload.stopped"

    def _note_stopped_early(self) -> None:
        """The users were stopped before the duration from locust's web UI (STOP): the run
        is recorded as interrupted, and goes on to its final phase, judged on what ran."""
        stopped = read_stopped(self._stopped_file())
        if stopped is None:
            return
        started = self.state.info.get("workload_started_ns")
        at = stopped.get("time_ns")
        ran = (at - started) / 1e9 if isinstance(at, int) and started else None
        self.state.info.update(
            interrupted=True,
            interrupted_by=str(stopped.get("by") or "the web UI"),
            workload_stopped_ns=at,
            workload_ran_s=round(ran, 3) if ran is not None else None,
        )
        self._write_info(complete=False)
        when = f" after {ran:.0f} s of {self.duration:g} s" if ran is not None else ""
        self.console.print(
            f"[yellow]interrupted:[/] {stopped.get('by')} stopped the users{when}; the run "
            "goes on to its final phase and is judged on what ran"
        )

    def _wait_users_started(self, workload: subprocess.Popen[bytes]) -> int:
        """The wall-clock ns at which the workload process started its users."""
        wait_s = USERS_START_TIMEOUT_S + (
            MASTER_WAITS_FOR_WORKERS_S if self.options.distributed else 0
        )
        deadline = time.monotonic() + wait_s
        started = read_started(self._started_file())
        while started is None:
            if workload.poll() is not None:
                raise RuntimeError(
                    f"the workload exited with code {workload.returncode} before its users "
                    f"started; see {self.run_dir / 'logs' / 'workload.log'}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the workload's users did not start within {wait_s:g} s; see "
                    f"{self.run_dir / 'logs' / 'workload.log'}"
                )
            self._check_workers()
            time.sleep(0.05)
            started = read_started(self._started_file())
        return started

    def _master_port_file(self) -> Path:
        return self.run_dir / "logs" / "master.port"

    def _start_workers(self, bootstrap: str, master: subprocess.Popen[bytes]) -> None:
        """Once the master listens, start this machine's workers and say how others attach."""
        deadline = time.monotonic() + 60
        port = read_master_port(self._master_port_file())
        while port is None:
            if master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "locust's master did not start listening; see "
                    f"{self.run_dir / 'logs' / 'workload.log'}"
                )
            time.sleep(0.1)
            port = read_master_port(self._master_port_file())
        bind = self.options.master_bind
        host = "127.0.0.1" if bind in ("0.0.0.0", "*", "") else bind
        self.state.info["locust_master"] = f"{bind}:{port}"
        self._write_info(complete=False)
        cmd = self._workload_cmd(bootstrap)
        cmd += ["--worker", "--master-host", host, "--master-port", str(port)]
        for i in range(self.options.workers):
            self.state.workers.append(self._spawn(cmd, f"workload-worker-{i}.log"))
        if self.options.expect_workers:
            self.console.print(
                f"locust master on {bind}:{port}: waiting for {self.options.expect_workers} "
                f"more worker(s): txnchaos worker SCENARIO --master-host HOST --master-port "
                f"{port} --bootstrap {bootstrap} --out {self.run_dir}"
            )

    def _follow_workload(self, origin: float) -> None:
        st = self.state
        assert st.workload is not None and st.nemesis is not None
        stats_path = self.run_dir / "workload-stats.jsonl"
        with self.progress.live("workload and nemesis") as live:
            while st.workload.poll() is None:
                self._check_workers()
                self._announce_web_ui()
                live.update(
                    elapsed=time.monotonic() - origin,
                    stats=_last_json_line(stats_path),
                    active=[a.description for a in st.nemesis.active()],
                    errors=st.nemesis.stats.errors,
                    open_partitions=st.sampler.open_partitions() if st.sampler else 0,
                )
                time.sleep(0.5)
        code = st.workload.returncode
        self._note_stopped_early()
        if code < 0:  # a native client aborted the shared workload process, its users with it
            self._record_workload_crash(code)
        elif code != 0:
            raise RuntimeError(
                f"the workload exited with code {code}; "
                f"see {self.run_dir / 'logs' / 'workload.log'}"
            )
        with self.progress.phase("waiting for the workers to stop their users"):
            for w in st.workers:
                w.wait(timeout=WORKER_STOP_TIMEOUT_S)
            self._check_workers()

    def _record_workload_crash(self, code: int) -> None:
        """The workload process (``isolation: shared``) died from a signal: a client library
        crash, recorded as a finding; the run goes on to its final phase without a workload
        (``isolation: process``, the default, keeps the other users running instead)."""
        users = sorted(p.stem for p in (self.run_dir / "history").glob("*.jsonl"))
        record = record_client_crash(
            self.run_dir,
            "workload",
            kind="workload",
            returncode=code,
            log=self.run_dir / "logs" / "workload.log",
            native_client=any(
                user_kind(u.kind).native_client for u in self.scenario.workload.users
            ),
            users=users,
        )
        self.state.info["workload_crashed"] = True
        self._write_info(complete=False)
        self.console.print(
            f"[red]client crash:[/] the workload process died ({record['signal']}): "
            f"{escape(str(record['message']))}; the run goes on to its final phase"
        )

    def _check_workers(self) -> None:
        """A worker that failed fails the run (its users' load and history are missing)."""
        for i, w in enumerate(self.state.workers):
            if w.poll() not in (None, 0):
                raise RuntimeError(
                    f"workload worker {i} exited with code {w.returncode}; "
                    f"see {self.run_dir / 'logs' / f'workload-worker-{i}.log'}"
                )

    def _quiesce(self, bootstrap: str) -> None:
        """Wait until no partition has an open transaction (LSO == high watermark)."""
        deadline = time.monotonic() + self.scenario.final.quiescence_timeout
        with self.progress.phase("waiting for open transactions to finish"):
            while time.monotonic() < deadline:
                try:
                    ends = list_ends(
                        bootstrap, self.partitions, timeout_s=10, security=self.security
                    )
                except Exception as exc:
                    log.info("quiescence check failed: %s", exc)
                    time.sleep(1)
                    continue
                open_partitions = [e for e in ends if e.lso < e.high_watermark]
                if not open_partitions:
                    return
                time.sleep(1)
        self.console.print(
            "[yellow]quiescence timeout: some partitions still have open transactions "
            "(the analysis will judge them)[/]"
        )

    def _web_url_file(self) -> Path:
        return self.run_dir / "logs" / "web-ui.url"

    def _announce_web_ui(self) -> None:
        """Print the web UI's URL (and keep it in run.json) once the workload serves it."""
        if not self.options.web or "web_ui" in self.state.info:
            return
        url = read_web_url(self._web_url_file())
        if url is not None:
            self.state.info["web_ui"] = url
            self._write_info(complete=False)
            self.console.print(f"locust web UI: {url}")

    # ---- bookkeeping ---------------------------------------------------------------
    def _cleanup(self) -> None:
        st = self.state
        for proc in [st.workload, *st.workers]:  # the master first: it stops its workers
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for step in (
            lambda: st.nemesis.heal() if st.nemesis else None,
            lambda: st.sampler.stop() if st.sampler else None,
            lambda: st.scraper.stop() if st.scraper else None,
            lambda: st.handle.stop() if st.handle else None,
        ):
            try:
                step()
            except Exception:
                log.error("cleanup step failed\n%s", traceback.format_exc())

    def _compact(self) -> bool:
        """Compact the history and metrics to Parquet; False (said on the console) when a
        corrupt line makes the run unjudgeable."""
        try:
            stats = compact_to_parquet(self.run_dir)
        except RunDirError as exc:  # a corrupt line: the analysis would refuse the run too
            log.error("compaction failed: %s", exc)
            self.console.print(f"[red]the history cannot be compacted:[/] {escape(str(exc))}")
            return False
        except Exception:
            log.error("compaction failed\n%s", traceback.format_exc())
            self.console.print("[red]compaction failed[/] (see logs/harness.log)")
            return False
        for note in stats.notes:
            log.info("compaction: %s", note)
            self.console.print(f"[yellow]note:[/] {escape(note)}")
        return True

    def _write_info(self, **extra: Any) -> None:
        max_timeout = self.scenario.cluster.settings.get(
            "transaction.max.timeout.ms", DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
        )
        info = {
            "scenario": self.scenario.name,
            "seed": self.seed,
            "duration_s": self.duration,
            "started_ns": self.state.info.setdefault("started_ns", time.time_ns()),
            "ended_ns": time.time_ns() if extra.get("complete") else None,
            "cluster_kind": self.launcher,
            "transaction_timeout_ms": self.scenario.transaction_timeout_ms(),
            "transaction_max_timeout_ms": int(max_timeout),
            # an external cluster's metrics are known when the run was given their URLs
            "metrics_supported": self.launcher != "external" or bool(self.metrics_urls),
            "expect": self.scenario.expect.model_dump(),
            **{k: v for k, v in self.state.info.items() if k != "started_ns"},
            **extra,
        }
        write_run_info(self.run_dir, **info)

    def _log_to_file(self) -> None:
        handler = logging.FileHandler(self.run_dir / "logs" / "harness.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)

    def _analyze(self, judge: Judge) -> int:
        with self.progress.phase("judging the run"):
            code = judge.judge(self.run_dir)
        expected = self.scenario.expect.verdict
        got = _verdict_status(self.run_dir) if code in (EXIT_VALID, EXIT_ANOMALIES) else "?"
        if got not in ("?", expected):
            self.console.print(f"[yellow]this scenario expects a {expected} verdict[/]")
        return code


def unmatched_links(schedule: list[Any], links: list[str]) -> list[str]:
    """A line for each proxy fault whose ``link`` names no link of this cluster: it will act
    on nothing (e.g. the project's coordinator ``n1001->*`` sending markers: on Apache Kafka
    node 1001 is a controller, which sends none; the brokers' coordinators do)."""
    from fnmatch import fnmatchcase

    out = []
    for i, fault in enumerate(schedule):
        pattern = (fault.rule or {}).get("link")
        if pattern is None or not links:
            continue
        patterns = [pattern] if isinstance(pattern, str) else list(pattern)
        if not any(fnmatchcase(link, p) for link in links for p in patterns):
            out.append(
                f"action {i} ({fault.kind} at {fault.at:g} s) names link {pattern!r}, which "
                f"matches no link of this cluster ({', '.join(sorted(links))}): it acts on nothing"
            )
    return out


def _verdict_status(run_dir: Path) -> str:
    """The cluster's verdict (valid / invalid) as verdict.json says: exit code 1 may also mean a
    finding (a client crash) under a valid verdict."""
    try:
        status = json.loads((run_dir / "verdict.json").read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return "?"
    return status if status in ("valid", "invalid") else "?"


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _last_json_line(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def run_scenario(scenario: Scenario, options: RunOptions, console: Console | None = None) -> int:
    return Orchestrator(scenario, options, console or make_console()).run()
