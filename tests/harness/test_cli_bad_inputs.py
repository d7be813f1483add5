"""Every command refuses bad input the same way: exit code 2 (never 1, which means "anomalies
found"), one line on stderr naming the bad input, no traceback, nothing started.

The table runs each command in-process (click's CliRunner, through the same ``Cli.main`` the
``txnchaos`` script runs); a few cases also run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from txnchaos.harness.launch.local import ClusterLayout
from txnchaos.jobs.cli import main
from txnchaos.rundir.run_dir import write_run_info

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "scenarios" / "smoke.yaml")
EXTERNAL = str(ROOT / "scenarios" / "external-smoke.yaml")
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary \x00"
MINIMAL = (
    "name: t\n"
    "workload:\n"
    "  topics: [{name: events}]\n"
    "  users: [{kind: transactional_producer, topics: [events]}]\n"
)
LATE_FAULT = "nemesis: {actions: [{at: 10, kind: delay, duration: 5, rule: {ms: 100}}]}\n"
OP = {"process": "w0", "type": "poll", "invoke_ns": 1, "outcome": "ok", "complete_ns": 2}


def _history(run: Path, lines: list[str]) -> None:
    write_run_info(run, scenario="t")
    (run / "history").mkdir()
    (run / "history" / "w0.jsonl").write_text("".join(line + "\n" for line in lines))


def _op(op_id: int, **fields: object) -> str:
    return json.dumps({**OP, "op_id": op_id, **fields})


def make_inputs(tmp: Path) -> dict[str, str]:
    """Named bad (and a few good) inputs under ``tmp``; the table refers to them by name."""
    files = {
        "binary": BINARY,
        "no_workload": b"name: x\n",
        "bad_field": (MINIMAL + "cluster: {brokers: 0}\n").encode(),
        "nan": (MINIMAL + "duration: .nan\n").encode(),
        "late_fault": (MINIMAL + "duration: 12\n" + LATE_FAULT).encode(),
        "fault_in_time": (MINIMAL + "duration: 20\n" + LATE_FAULT).encode(),
        "not_yaml": b"name: [unclosed\n",
        "shape_bad_stage": (
            MINIMAL + "load_shape: {stages: [{kind: burst, duration: 5}]}\n"
        ).encode(),
        "shape_too_long": (
            MINIMAL + "duration: 20\nload_shape: {stages: [{kind: ramp, duration: 30, to: 1}]}\n"
        ).encode(),
        "list_state": b"[1, 2]\n",
        "no_data_dir": b'{"nodes": []}\n',
        "bad_nodes": json.dumps({"data_dir": str(tmp), "nodes": [{"id": "a"}]}).encode(),
        "props_ssl": b"security.protocol=SSL\nssl.truststore.location=/x.jks\n",
        "props_gssapi": b"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n",
        "props_two_logins": (
            b"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n"
            b'sasl.jaas.config=x.PlainLoginModule required username="a" password="b";\n'
        ),
    }
    for name, content in files.items():
        (tmp / name).write_bytes(content)
    (tmp / "empty").mkdir()
    (tmp / "nonempty").mkdir()
    (tmp / "nonempty" / "x").write_text("x")
    (tmp / "demo_ran" / "run").mkdir(parents=True)
    layout = tmp / "layout"
    layout.mkdir()
    ClusterLayout.plan(1, 0, []).save(layout)

    runs = {
        "run_binary_info": lambda r: (r.mkdir(), (r / "run.json").write_bytes(BINARY)),
        "run_bad_info": lambda r: write_run_info(r, scenario="t", transaction_timeout_ms="60s"),
        "run_garbage_line": lambda r: _history(r, [_op(0), "GARBAGE", _op(1)]),
        "run_wrong_type": lambda r: _history(r, [_op(0), json.dumps({**OP, "op_id": "1"})]),
        "run_missing_field": lambda r: _history(r, [_op(0), json.dumps({"process": "w0"})]),
        "run_binary_history": lambda r: (
            _history(r, []),
            (r / "history" / "w0.jsonl").write_bytes(BINARY),
        ),
        "run_bad_parquet": lambda r: (
            write_run_info(r, scenario="t"),
            (r / "history.parquet").write_bytes(BINARY),
        ),
        "run_bad_faults": lambda r: (
            _history(r, [_op(0)]),
            (r / "faults.jsonl").write_text('{"kind": "kill", "start": "soon"}\n'),
        ),
        "run_bad_metrics": lambda r: (
            _history(r, [_op(0)]),
            (r / "metrics").mkdir(),
            (r / "metrics" / "node-1.jsonl").write_text(
                '{"time_ns": 1, "name": "m", "value": 1.0}\n{"time_ns": 2, "name": "m"}\n'
            ),
        ),
        "run_valid_verdict": lambda r: (
            r.mkdir(),
            (r / "verdict.json").write_text('{"status": "valid", "checkers": {}}'),
        ),
        "run_invalid_no_scenario": lambda r: (
            r.mkdir(),
            (r / "verdict.json").write_text(
                '{"status": "invalid", "checkers": {"aborted_read": {"status": "invalid"}}}'
            ),
        ),
        "run_bad_final_state": lambda r: (
            _history(r, [_op(0)]),
            (r / "final_state.json").write_text(
                json.dumps(
                    {
                        "partitions": [
                            {
                                "topic": "t",
                                "partition": 0,
                                "lso": "3",
                                "high_watermark": 3,
                                "log_start_offset": 0,
                            }
                        ]
                    }
                )
            ),
        ),
    }
    for name, build in runs.items():
        build(tmp / name)
    names = [*files, "empty", "nonempty", "demo_ran", "layout", *runs]
    return {name: str(tmp / name) for name in names} | {"missing": str(tmp / "missing")}


#: (command line with {input} placeholders, what the message must name)
CASES: list[tuple[list[str], str]] = [
    # txnchaos run
    (["run", "{binary}"], "{binary}"),
    (["run", "{missing}"], "{missing}"),
    (["run", SMOKE, "--engine", "jvm"], "--engine"),
    (["run", SMOKE, "--master", "bogus"], "--master"),
    (["run", "{empty}"], "{empty}"),
    (["run", "{no_workload}"], "workload: Field required"),
    (["run", "{bad_field}"], "cluster.brokers"),
    (["run", "{nan}"], "duration: a finite number"),
    (["run", "{not_yaml}"], "{not_yaml} is not valid YAML"),
    (["run", "{late_fault}"], "nemesis.actions.0 (delay at 10s lasting 5s) ends after"),
    (["run", "{fault_in_time}", "--duration", "12"], "(--duration 12s)"),
    (["run"], "SCENARIO"),
    (["run", SMOKE, "--seed", "x"], "--seed"),
    (["run", SMOKE, "--duration", "-5"], "--duration"),
    (["run", SMOKE, "--duration", "nan"], "--duration"),
    (["run", SMOKE, "--duration", "inf"], "--duration"),
    (["run", SMOKE, "--launcher", "moon"], "--launcher"),
    (["run", SMOKE, "--bootstrap", "nohostport"], "--bootstrap"),
    (["run", SMOKE, "--bootstrap", "h:99999"], "--bootstrap"),
    (["run", SMOKE, "--out", "{binary}"], "--out"),
    (["run", SMOKE, "--out", "{nonempty}"], "{nonempty}"),
    (["run", EXTERNAL], "--bootstrap"),
    (["run", SMOKE, "--web-port", "8089"], "--web-port need --web"),
    (["run", SMOKE, "--web", "--web-port", "70000"], "--web-port"),
    (["run", SMOKE, "--web", "--web-host", "no-such-host.invalid"], "no-such-host.invalid"),
    (["run", SMOKE, "--workers", "-1"], "--workers"),
    (["run", SMOKE, "--workers", "x"], "--workers"),
    (["run", SMOKE, "--expect-workers", "-2"], "--expect-workers"),
    (["run", SMOKE, "--master-port", "5557"], "need --workers or --expect-workers"),
    (["run", SMOKE, "--master-bind", "0.0.0.0"], "need --workers or --expect-workers"),
    (["run", SMOKE, "--workers", "2", "--master-port", "70000"], "--master-port"),
    (["run", SMOKE, "--workers", "2", "--master-bind", "no-such-host.invalid"], "--master-bind"),
    (["run", "{shape_bad_stage}"], "load_shape.stages.0"),
    (["run", "{shape_too_long}"], "load_shape: its stages last 30s"),
    # txnchaos worker
    (["worker"], "SCENARIO"),
    (["worker", SMOKE], "--master-host"),
    (["worker", SMOKE, "--master-host", "h", "--out", "{empty}"], "--bootstrap"),
    (["worker", SMOKE, "--master-host", "h", "--bootstrap", "h:1"], "--out"),
    (["worker", "{missing}", "--master-host", "h", "--out", "{empty}"], "{missing}"),
    (["worker", "{bad_field}", "--master-host", "h", "--out", "{empty}"], "cluster.brokers"),
    (
        ["worker", SMOKE, "--master-host", "h", "--master-port", "0", "--out", "{empty}"],
        "--master-port",
    ),
    (["worker", SMOKE, "--master-host", "h", "--bootstrap", "nohostport"], "--bootstrap"),
    (["worker", SMOKE, "--master-host", "h", "--bootstrap", "h:1", "--out", "{binary}"], "--out"),
    # txnchaos analyze (every one of these is refused before Spark starts)
    (["analyze", "{missing}"], "{missing}"),
    (["analyze", "{binary}"], "{binary}"),
    (["analyze", "{empty}"], "run.json"),
    (["analyze", "{empty}", "--master", "bogus"], "--master"),
    (["analyze", "{empty}", "--engine", "jvm"], "--engine"),
    (["analyze", "{empty}", "--input-uri", "runs/x"], "--input-uri"),
    (["analyze", "{empty}", "--input-uri", "/x", "--engine", "reference"], "--input-uri"),
    (["analyze", "{run_binary_info}"], "run.json"),
    (["analyze", "{run_bad_info}"], "'transaction_timeout_ms' should be an integer"),
    (["analyze", "{run_garbage_line}"], "w0.jsonl:2: not JSON"),
    (["analyze", "{run_wrong_type}"], "w0.jsonl:2: field 'op_id'"),
    (["analyze", "{run_missing_field}"], "w0.jsonl:2: required field"),
    (["analyze", "{run_binary_history}"], "w0.jsonl:1: not UTF-8"),
    (["analyze", "{run_bad_parquet}"], "history.parquet"),
    (["analyze", "{run_bad_faults}"], "faults.jsonl:1: field 'start'"),
    (["analyze", "{run_bad_metrics}"], "node-1.jsonl:2: required field 'value'"),
    (["analyze", "{run_bad_final_state}"], "partitions[0]: field 'lso'"),
    # txnchaos cluster up
    (["cluster", "up", "--data-dir", "{missing}", "--set", "bogus=1"], "'bogus'"),
    (["cluster", "up", "--data-dir", "{missing}", "--set", "noequals"], "'noequals'"),
    (["cluster", "up", "--data-dir", "{missing}", "--set", "num.partitions=x"], "num.partitions"),
    (
        ["cluster", "up", "--data-dir", "{missing}", "--set", "listener.security.protocol=SSL"],
        "listener.security.protocol",
    ),
    (
        [
            "cluster",
            "up",
            "--data-dir",
            "{missing}",
            "--set",
            "authorizer.class.name=AclAuthorizer",
        ],
        "SASL_PLAINTEXT",
    ),
    (["cluster", "up", "--data-dir", "{missing}", "--brokers", "0"], "--brokers"),
    (["cluster", "up", "--data-dir", "{missing}", "--brokers", "x"], "--brokers"),
    (["cluster", "up", "--data-dir", "{missing}", "--coordinators", "-1"], "--coordinators"),
    (["cluster", "up", "--data-dir", "{missing}", "--cpus", "x"], "CPU list 'x'"),
    (["cluster", "up", "--data-dir", "{binary}"], "--data-dir"),
    (["cluster", "up", "--data-dir", "{missing}", "--state", "{binary}/s.json"], "{binary}"),
    (["cluster", "up", "--data-dir", "{missing}", "--state", "{empty}"], "--state"),
    (["cluster", "up"], "--data-dir"),
    (["cluster", "up", "--data-dir", "{layout}", "--brokers", "3"], "{layout}"),
    # txnchaos cluster down / status / kill / restart
    (["cluster", "down", "--state", "{binary}"], "{binary}"),
    (["cluster", "down", "--state", "{list_state}"], "{list_state}"),
    (["cluster", "down", "--state", "{no_data_dir}"], "'data_dir'"),
    (["cluster", "down", "--state", "{bad_nodes}"], "nodes[0]"),
    (["cluster", "down", "--state", "{missing}"], "{missing}"),
    # txnchaos fuzz
    (["cleanup", "--harness-pid", "0"], "--harness-pid"),
    (["cleanup", "--harness-pid", "x"], "--harness-pid"),
    (["cleanup", "--bogus"], "--bogus"),
    (["fuzz", "--cases", "0"], "--cases"),
    (["fuzz", "--replay", "{missing}"], "{missing}"),
    (["fuzz", "--replay", "{binary}"], "{binary}"),
    (["fuzz", "--bootstrap", "nohostport"], "--bootstrap"),
    # txnchaos repro
    (["repro", "no-such-bug"], "no reproduction named 'no-such-bug'"),
    (["repro", "producer-state-expiry", "--config", "nope"], "no configuration 'nope'"),
    (["repro", "producer-state-expiry", "--tv", "3"], "--tv"),
    (["repro", "list", "--catalogue", "{missing}"], "{missing}"),
    (["repro", "producer-state-expiry", "--bootstrap", "x"], "--bootstrap"),
    (["repro", "producer-state-expiry", "--bootstrap", "h:1", "--tv", "1"], "--tv"),
    (["repro", "producer-state-expiry", "--out", "{binary}"], "{binary}"),
    (["repro", "producer-state-expiry", "--kafka-version", "4.4"], "--kafka-version expects"),
    (["repro", "produce-after-abort", "--kafka-version", "4.4.0", "--config", "tv0"], "--config"),
    (["repro", "producer-state-expiry", "--cluster", "apache-kafka"], "no configuration on a"),
    (["repro", "produce-after-abort", "--bootstrap", "h:1", "--kafka-version", "4.4.0"], "--kafka"),
    # txnchaos shrink
    (["shrink", "{missing}"], "not a run directory"),
    (["shrink", "{run_valid_verdict}"], "is not an invalid run"),
    (["shrink", "{run_bad_info}"], "verdict.json"),
    (["shrink", "{run_invalid_no_scenario}"], "--scenario FILE"),
    (["shrink", "{run_invalid_no_scenario}", "--budget", "0"], "--budget"),
    (["shrink", "{run_invalid_no_scenario}", "--scenario", "{binary}"], "{binary}"),
    # txnchaos nightly
    (["nightly", SMOKE], "--runs N and --budget"),
    (["nightly", SMOKE, "--runs", "2", "--budget", "1h"], "--runs N and --budget"),
    (["nightly", SMOKE, "--runs", "0"], "--runs"),
    (["nightly", SMOKE, "--budget", "soon"], "--budget"),
    (["nightly", SMOKE, "--runs", "1", "--shrink-budget", "soon"], "--shrink-budget"),
    (["nightly", SMOKE, "--runs", "1", "--shrink-budget", "0"], "--shrink-budget"),
    (["nightly", SMOKE, "--runs", "1", "--no-shrink", "--shrink-budget", "5m"], "--no-shrink"),
    (["nightly", SMOKE, "--budget", "5s"], "shorter than one run"),
    (["nightly", "{missing}", "--runs", "1"], "{missing}"),
    (["nightly", "{binary}", "--runs", "1"], "{binary}"),
    (["nightly", "{late_fault}", "--runs", "1"], "{late_fault}"),
    (["nightly", SMOKE, "--runs", "1", "--launcher", "external"], "--bootstrap"),
    (["nightly", SMOKE, "--runs", "1", "--out", "{binary}"], "--out"),
    (["cluster", "features", "--state", "{missing}"], "{missing}"),
    (["cluster", "features", "--state", "{missing}", "--set", "noequals"], "'noequals'"),
    (
        ["cluster", "features", "--data-dir", "{layout}", "--command-config", "{missing}"],
        "{missing}",
    ),
    (["cluster", "down", "--state", "{empty}"], "--state"),
    (["cluster", "down", "--data-dir", "{empty}"], "{empty} has no cluster.json"),
    (["cluster", "down"], "--state FILE or --data-dir DIR"),
    (["cluster", "status", "--data-dir", "{binary}"], "--data-dir"),
    (["cluster", "status", "--state", "{list_state}"], "{list_state}"),
    (["cluster", "kill", "--data-dir", "{layout}", "x"], "NODE_ID"),
    (["cluster", "kill", "--data-dir", "{layout}", "7"], "no node 7"),
    (["cluster", "kill", "--data-dir", "{layout}"], "NODE_ID"),
    (["cluster", "restart", "--state", "{bad_nodes}", "1"], "nodes[0]"),
    (["cluster", "restart", "--data-dir", "{layout}", "7"], "no node 7"),
    (["cluster", "explode"], "explode"),
    # txnchaos node
    (["node", "--data-dir", "{missing}"], "--id"),
    (["node", "--id", "x", "--data-dir", "{missing}"], "--id"),
    (["node", "--id", "-1", "--data-dir", "{missing}"], "--id"),
    (["node", "--id", "1", "--data-dir", "{binary}"], "--data-dir"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--port", "99999"], "--port"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--metrics-port", "-1"], "--metrics-port"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--advertised-port", "x"], "--advertised"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--log-level", "LOUD"], "--log-level"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--set", "bogus=1"], "'bogus'"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--controller", "bad"], "--controller"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--peer", "x"], "--peer"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--peer", "2=h:x"], "--peer"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--roles", "wizard"], "wizard"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--cpus", "x"], "--cpus"),
    (["node", "--id", "1", "--data-dir", "{missing}", "--coordinator-ids", "a"], "--coordinator"),
    # txnchaos demo
    (["demo", "--brokers", "0"], "--brokers"),
    (["demo", "--brokers", "x"], "--brokers"),
    (["demo", "--transactions", "0"], "--transactions"),
    (["demo", "--partitions", "0"], "--partitions"),
    (["demo", "--data-dir", "{binary}"], "--data-dir"),
    (["demo", "--data-dir", "{demo_ran}"], "already holds a demo run"),
    # txnchaos conformance
    (["conformance", "--against", "zookeeper"], "--against"),
    (["conformance", "--against", "kafka:4.x"], "kafka:4.x"),
    (["conformance", "--against", "recorded:{missing}"], "{missing}"),
    (["conformance", "--set", "novalue"], "--set"),
    (["conformance", "--set", "bogus=1"], "'bogus'"),
    (["conformance", "--probe", "no-such-probe"], "no-such-probe"),
    (["conformance", "--jobs", "0"], "--jobs"),
    # txnchaos transactions (KIP-664); 127.0.0.1:1 refuses connections: unreachable
    (["transactions", "list"], "--bootstrap HOST:PORT or --state FILE"),
    (["transactions", "list", "--bootstrap", "nohostport"], "--bootstrap"),
    (["transactions", "list", "--bootstrap", "127.0.0.1:1"], "cluster not reachable"),
    (["transactions", "list", "--state", "{missing}"], "{missing}"),
    (["transactions", "list", "--state", "{binary}"], "{binary}"),
    (["transactions", "list", "--bootstrap", "h:1", "--state", "{missing}"], "either"),
    (["transactions", "list", "--bootstrap", "h:1", "--broker", "-1"], "--broker"),
    (["transactions", "list", "--bootstrap", "h:1", "--duration-filter", "x"], "--duration"),
    (["transactions", "describe", "--bootstrap", "h:1"], "--transactional-id"),
    (
        ["transactions", "describe", "--bootstrap", "127.0.0.1:1", "--transactional-id", "x"],
        "cluster not reachable",
    ),
    (["transactions", "describe-producers", "--bootstrap", "h:1", "--partition", "0"], "--topic"),
    (
        ["transactions", "describe-producers", "--bootstrap", "h:1", "--topic", "t"],
        "--partition",
    ),
    (
        ["transactions", "describe-producers", "--topic", "t", "--partition", "x"],
        "--partition",
    ),
    (["transactions", "find-hanging", "--bootstrap", "h:1"], "--topic or --broker"),
    (
        ["transactions", "find-hanging", "--bootstrap", "h:1", "--broker", "1", "--partition", "0"],
        "--partition needs --topic",
    ),
    (
        ["transactions", "find-hanging", "--topic", "t", "--max-transaction-timeout", "-1"],
        "--max-transaction-timeout",
    ),
    (
        ["transactions", "find-hanging", "--bootstrap", "127.0.0.1:1", "--topic", "t"],
        "cluster not reachable",
    ),
    (["transactions", "abort", "--bootstrap", "h:1", "--topic", "t", "--partition", "0"], "give"),
    (
        ["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "-5"],
        "--start-offset",
    ),
    (
        [
            "transactions",
            "abort",
            "--bootstrap",
            "h:1",
            "--topic",
            "t",
            "--partition",
            "0",
            "--start-offset",
            "5",
            "--producer-id",
            "7",
        ],
        "excludes",
    ),
    (
        [
            "transactions",
            "abort",
            "--bootstrap",
            "h:1",
            "--topic",
            "t",
            "--partition",
            "0",
            "--producer-id",
            "7",
        ],
        "go together",
    ),
    (["transactions", "force-terminate", "--bootstrap", "h:1"], "--transactional-id"),
    (["transactions", "force-terminate", "--transactional-id", "x"], "--bootstrap HOST:PORT"),
    (
        ["transactions", "force-terminate", "--bootstrap", "h:1", "--transactional-id", ""],
        "--transactional-id",
    ),
    (
        [
            *("transactions", "force-terminate", "--bootstrap", "127.0.0.1:1"),
            *("--transactional-id", "x"),
        ],
        "cluster not reachable",
    ),
    (["transactions", "list", "--bootstrap", "h:1", "--command-config", "{missing}"], "{missing}"),
    (["transactions", "list", "--bootstrap", "h:1", "--command-config", "{binary}"], "{binary}"),
    (
        ["transactions", "list", "--bootstrap", "h:1", "--command-config", "{props_ssl}"],
        "unsupported key(s) ssl.truststore.location",
    ),
    (
        [
            *("transactions", "describe", "--bootstrap", "h:1", "--transactional-id", "x"),
            *("--command-config", "{props_gssapi}"),
        ],
        "sasl.mechanism: 'GSSAPI' is not supported",
    ),
    (
        ["transactions", "list", "--bootstrap", "h:1", "--command-config", "{props_two_logins}"],
        "sasl.jaas.config or sasl.username",
    ),
    (["transactions", "explode"], "explode"),
    (["transactions", "list", "--bootstrap", "h:1", "--state-filter", "Open"], "Open"),
    # txnchaos acls (kafka-acls.sh); 127.0.0.1:1 refuses connections: unreachable
    (["acls", "--list"], "--bootstrap-server HOST:PORT or --state FILE"),
    (["acls", "--bootstrap-server", "h:1"], "exactly one action"),
    (["acls", "--list", "--bootstrap-server", "nohostport"], "--bootstrap"),
    (["acls", "--list", "--bootstrap-server", "127.0.0.1:1"], "cluster not reachable"),
    (["acls", "--add", "--bootstrap-server", "h:1", "--topic", "t"], "--allow-principal"),
    (
        [
            *("acls", "--add", "--bootstrap-server", "h:1", "--topic", "t"),
            *("--allow-principal", "User:a", "--operation", "Jump"),
        ],
        "Jump",
    ),
    (["acls", "--list", "--bootstrap-server", "h:1", "--command-config", "{missing}"], "{missing}"),
    # the command itself
    (["moonwalk"], "moonwalk"),
]


def _case_id(case: tuple[list[str], str]) -> str:
    args = [Path(a).name if a.startswith("/") else a for a in case[0]]
    return " ".join(args) or "(none)"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_inputs(tmp_path_factory.mktemp("bad-inputs"))


def _fill(text: str, inputs: dict[str, str]) -> str:
    return text.format(**inputs)


def check_refused(code: int, stdout: str, stderr: str, named: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stdout + stderr, stderr
    assert len(lines) == 1, stderr
    assert named in lines[0], (named, lines[0])
    assert lines[0].startswith("txnchaos"), lines[0]
    assert "verdict" not in stdout.lower(), stdout


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_input_exits_2_with_one_line_naming_it(
    case: tuple[list[str], str], inputs: dict[str, str]
) -> None:
    args, named = case
    result = CliRunner().invoke(main, [_fill(a, inputs) for a in args])
    assert isinstance(result.exception, SystemExit), result.exception
    check_refused(result.exit_code, result.stdout, result.stderr, _fill(named, inputs))
    assert not Path(inputs["missing"]).exists(), "a refused command made its directory"


def test_the_table_covers_every_command() -> None:
    """A command added to the CLI needs its bad inputs in the table."""
    covered = {" ".join(a for a in args[:2] if not a.startswith("-")) for args, _ in CASES}
    commands = set()
    for name, command in main.commands.items():
        sub = getattr(command, "commands", None)
        commands |= {f"{name} {s}" for s in sub} if sub else {name}
    missing = {c for c in commands if not any(k == c or k.startswith(c + " ") for k in covered)}
    # cluster kill/restart/status/down/up and the others: each has at least one case
    assert not missing, missing


def _txnchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args, named",
    [
        (["run", "{binary}"], "{binary}"),
        (["analyze", "{run_garbage_line}"], "{run_garbage_line}/history/w0.jsonl:2"),
        (["cluster", "down", "--state", "{bad_nodes}"], "{bad_nodes}"),
    ],
    ids=["run binary", "analyze garbage", "cluster down bad state"],
)
def test_a_real_process_exits_2(args: list[str], named: str, inputs: dict[str, str]) -> None:
    done = _txnchaos(*(_fill(a, inputs) for a in args))
    check_refused(done.returncode, done.stdout, done.stderr, _fill(named, inputs))


def test_unexpected_errors_exit_2_not_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bug (an exception nobody expected) still exits 2 — 1 would read as "anomalies
    found" — and keeps its traceback for whoever debugs it."""
    from txnchaos.harness.launch import local

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(local.LocalCluster, "from_data_dir", broken)
    result = CliRunner().invoke(main, ["cluster", "status", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1] == "txnchaos: internal error: RuntimeError: a bug"


def test_interrupt_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from txnchaos.harness.launch import local

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(local.LocalCluster, "from_data_dir", interrupted)
    result = CliRunner().invoke(main, ["cluster", "status", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "interrupted" in result.stderr


@pytest.mark.parametrize("args", [[], ["cluster"]], ids=["txnchaos", "txnchaos cluster"])
def test_no_command_prints_the_help_and_exits_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: txnchaos") and "Commands:" in result.stderr
