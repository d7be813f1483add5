"""The conformance suite's machinery without clusters: the catalogue, statuses and
explanations, the table, recordings and the command line's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from txnchaos.harness.cli import main as txnchaos
from txnchaos.harness.conformance import explained, recorded
from txnchaos.harness.conformance.catalogue import CONFIGS, catalogue, select
from txnchaos.harness.conformance.context import Ids
from txnchaos.harness.conformance.report import (
    DIFFERENT,
    EQUAL,
    EXPLAINED,
    STALE,
    UNRECORDED,
    compare,
    differences,
    passed,
    render,
)

ROOT = Path(__file__).resolve().parents[3]


def test_the_catalogue_covers_every_area_with_at_least_80_probes() -> None:
    probes = catalogue()
    assert len(probes) >= 80
    tags = {t for p in probes.values() for t in p.tags}
    assert {"KIP-890", "KIP-360", "KIP-664", "KIP-939", "LSO", "ApiVersions"} <= tags
    assert {p.config.name for p in probes.values()} == set(CONFIGS)
    assert any(p.restarts for p in probes.values())
    assert all(p.doc for p in probes.values()), [p.name for p in probes.values() if not p.doc]


def test_select_by_name_tag_and_configuration() -> None:
    assert {p.name for p in select(["kip890.old-client-commit"])} == {
        f"kip890.old-client-commit[{c}]"
        for c in ("tv0", "tv0-noverify", "tv1", "tv1-noverify", "tv2", "tv2-noverify")
    }
    assert all(p.config.name == "tv1" for p in select(["*[tv1]"]))
    assert all("KIP-939" in p.tags for p in select(["KIP-939"]))
    ordered = [p.config.name for p in select([])]
    assert ordered == sorted(ordered, key=list(CONFIGS).index)  # one cluster per config


def test_kafka_runs_our_settings_less_ours_plus_its_own() -> None:
    p = catalogue()["kip939.enable2pc[tv2-2pc]"]
    extra = ["txnchaos.bug.lso.ignores.open.transactions=true", "log.retention.ms=1000"]
    assert "txnchaos.bug.lso.ignores.open.transactions=true" in p.settings(extra)
    kafka = p.kafka_settings(extra)
    assert not any(s.startswith("txnchaos.") for s in kafka)
    assert "log.retention.ms=1000" in kafka and "unstable.api.versions.enable=true" in kafka


def test_producer_ids_are_named_by_first_appearance() -> None:
    ids = Ids()
    assert [ids(9000), ids(17), ids(9000), ids(-1)] == ["P0", "P1", "P0", -1]


def test_statuses_explanations_and_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    probes = select(["kip664.describe-empty"])  # [tv2] then [tv0] ordering is by config
    a, b = probes
    monkeypatch.setitem(
        explained.EXPLAINED, b.name, explained.Explanation("open", "a test's reason")
    )
    same = {"x": 1}
    rows = compare(probes, {a.name: same, b.name: {"x": 1}}, {a.name: same, b.name: {"x": 2}})
    assert [r.status for r in rows] == [EQUAL, EXPLAINED] and passed(rows)
    rows = compare(
        probes, {a.name: {"x": 1}, b.name: {"x": 2}}, {a.name: {"x": 3}, b.name: {"x": 2}}
    )
    assert [r.status for r in rows] == [DIFFERENT, STALE] and not passed(rows)
    rows = compare(probes, {a.name: None, b.name: same}, {a.name: same, b.name: same})
    assert rows[0].status == UNRECORDED and not passed(rows)
    table = render(rows, "apache-kafka 4.4.0", "txnchaos 0.1.0")
    assert a.name in table and "FAIL" in table.splitlines()[-1]


def test_an_explanation_needs_a_known_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        explained.Explanation("because", "no")


def test_every_explanation_names_a_probe_of_the_catalogue() -> None:
    probes = catalogue()
    names = set(probes) | {p.base for p in probes.values()}
    assert set(explained.EXPLAINED) <= names


def test_differences_name_the_paths_that_differ() -> None:
    assert differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": 0}) == [
        "a.c: kafka=2 ours=3",
        'd: kafka="(absent)" ours=0',
    ]


def test_the_committed_recording_holds_every_probe_with_its_settings() -> None:
    rec = recorded.read(recorded.DEFAULT)
    assert rec.cluster.startswith("apache-kafka ")
    for p in catalogue().values():
        assert rec.outcome(p.name) is not None, f"{p.name} is not recorded"
        assert rec.settings(p.name) == p.kafka_settings(), p.name


def test_a_bad_recording_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 1, "probes": {"x": {"outcome": {}}}}))
    with pytest.raises(recorded.RecordingError, match=r"bad\.json"):
        recorded.read(bad)


def conformance(*args: str) -> Result:
    return CliRunner().invoke(txnchaos, ["conformance", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--against", "zookeeper"], "expected kafka[:VERSION] or recorded[:FILE]"),
        (["--against", "kafka:4.x"], "kafka:4.x: expected a release such as 4.4.0"),
        (["--set", "novalue"], "expected KEY=VALUE"),
        (["--probe", "no-such-probe"], "no probe matches no-such-probe"),
        (["--against", "recorded:/nonexistent.json"], "/nonexistent.json: cannot read"),
        (["--against", "recorded:r.json", "--record", "x.json"], "--record runs Apache Kafka"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    r = conformance(*args)
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_list_names_every_probe() -> None:
    r = conformance("--list")
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == f"{len(catalogue())} probes"


def test_the_docs_show_the_catalogue_and_the_explanations_as_the_code_has_them() -> None:
    from txnchaos.harness.conformance.catalogue import markdown

    doc = (ROOT / "docs" / "conformance.md").read_text()
    hint = "regenerate with `txnchaos conformance --list --markdown`"
    assert markdown(catalogue().values()) in doc, hint
    assert explained.markdown() in doc, hint
