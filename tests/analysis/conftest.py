"""One SparkSession for the whole analysis suite (starting Spark costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from txnchaos.analysis.engine import get_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session("local[2]", app_name="txnchaos-analysis-tests")
    yield session
    session.stop()
