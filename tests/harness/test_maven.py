"""Artifact sets from Maven Central: fetched once into the cache, offline afterwards."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txnchaos.harness.maven import Artifact, MavenError, resolve

SLF4J = Artifact("org.slf4j", "slf4j-api", "1.7.36")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TXNCHAOS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TXNCHAOS_MAVEN_OFFLINE", raising=False)
    return tmp_path


def test_a_set_is_fetched_once_then_served_without_maven(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    lib = resolve("slf4j", "1.7.36", [SLF4J], progress=lines.append)
    assert [p.name for p in lib.glob("*.jar")] == ["slf4j-api-1.7.36.jar"]
    assert lib.parent.parent.parent == cache / "maven"
    assert any("first use only" in line for line in lines)
    # No Maven on PATH: the cached set is still served.
    monkeypatch.setenv("PATH", "/nonexistent")
    assert resolve("slf4j", "1.7.36", [SLF4J], progress=lines.append) == lib
    # Other coordinates under the same name are not taken for the cached ones.
    with pytest.raises(MavenError, match="Maven"):
        resolve("slf4j", "1.7.36", [SLF4J, Artifact("org.slf4j", "slf4j-simple", "1.7.36")])


def test_offline_refuses_what_is_not_cached(cache: Path) -> None:
    with pytest.raises(MavenError, match="not in the cache"):
        resolve("slf4j", "1.7.36", [SLF4J], offline=True)


def test_an_unknown_version_names_the_artifact(cache: Path) -> None:
    with pytest.raises(MavenError, match=re.escape("kafka_2.13:jar:0.0.1")):
        resolve("kafka", "0.0.1", [Artifact("org.apache.kafka", "kafka_2.13", "0.0.1")])
    assert not (cache / "maven" / "kafka" / "0.0.1").exists()


@pytest.mark.parametrize("version", ["", "../x", "1 2"])
def test_bad_versions_are_refused(version: str) -> None:
    with pytest.raises(MavenError, match="bad version"):
        Artifact("org.slf4j", "slf4j-api", version)
