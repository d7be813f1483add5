"""Where a cluster's executors read a run's Parquet files (no Spark started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.analysis.input_uri import InputUriError, executor_path, parse_input_uri


def test_a_local_master_reads_the_path_as_given() -> None:
    run = Path("runs/r1")
    assert executor_path(run, run / "history.parquet", local=True) == "runs/r1/history.parquet"


def test_a_cluster_reads_the_absolute_file_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path would be resolved by each executor against its own working directory."""
    monkeypatch.chdir(tmp_path)
    run = Path("r1")
    got = executor_path(run, run / "history.parquet", local=False)
    assert got == (tmp_path / "r1" / "history.parquet").as_uri()


@pytest.mark.parametrize("local", [True, False])
def test_an_input_uri_is_where_executors_read(local: bool) -> None:
    run = Path("runs/r1")
    for uri in ("s3a://bucket/runs/r1", "s3a://bucket/runs/r1/"):
        got = executor_path(run, run / "metrics.parquet", local=local, input_uri=uri)
        assert got == "s3a://bucket/runs/r1/metrics.parquet"


def test_input_uris_are_uris_or_absolute_paths() -> None:
    assert parse_input_uri("hdfs://nn:8020/runs/r1/") == "hdfs://nn:8020/runs/r1"
    assert parse_input_uri("/mnt/shared/runs/r1") == "file:///mnt/shared/runs/r1"
    for bad in ("runs/r1", "", "s3a:/x"):
        with pytest.raises(InputUriError, match="every executor"):
            parse_input_uri(bad)
