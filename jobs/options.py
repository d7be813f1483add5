"""What judges a run, as the command line says it: ``--engine``, ``--master``, ``--conf`` (and,
for ``analyze``, ``--input-uri``), checked before anything starts; shared by the commands that
judge (run, analyze, nightly, repro, shrink)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

from ..analysis.verdict import ENGINES, SPARK

#: the engine when none is given: the PySpark pipeline judges every run
DEFAULT_ENGINE = SPARK
#: a Spark setting's name (spark.sql.shuffle.partitions, spark.driver.memory, ...)
_CONF_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")

#: Spark master URLs (local, local[N], local[*], local[N,F], local-cluster[...], spark://,
#: yarn, k8s://, mesos://): anything else would only fail inside the JVM, seconds later
_MASTER = re.compile(
    r"local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]"
    r"|(spark|k8s|mesos)://\S+|yarn"
)


def check_master(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _MASTER.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a Spark master URL (local[N], spark://HOST:PORT, yarn, k8s://...)"
        )
    return value


def check_input_uri(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--input-uri``: a ``scheme://`` URI or an absolute path (as its ``file://`` URI)."""
    if value is None:
        return None
    from ..analysis.input_uri import InputUriError, parse_input_uri

    try:
        return parse_input_uri(value)
    except InputUriError as e:
        raise click.BadParameter(str(e)) from None


def check_conf(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> dict[str, str]:
    """Repeated ``--conf KEY=VALUE`` -> {key: value} (the last of a key given twice wins, as
    with spark-submit); anything else is refused naming it."""
    conf: dict[str, str] = {}
    for text in value:
        key, sep, setting = text.partition("=")
        if not sep or not _CONF_KEY.fullmatch(key.strip()):
            raise click.BadParameter(
                f"{text!r} is not KEY=VALUE (a Spark setting, e.g. spark.sql.shuffle.partitions=4)"
            )
        conf[key.strip()] = setting
    return conf


def engine_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--engine``, ``--master`` and ``--conf``: what judges the runs of a command."""
    f = click.option(
        "--conf",
        "spark_conf",
        multiple=True,
        metavar="KEY=VALUE",
        callback=check_conf,
        help="A Spark setting for the session that judges (repeatable; over txnchaos's own, "
        "e.g. --conf spark.driver.memory=8g).",
    )(f)
    f = click.option(
        "--master",
        "spark_master",
        default=None,
        callback=check_master,
        help="Spark master URL that judges (default: local[2]); on a cluster the run "
        "directory must be on a mount every worker shares (or see analyze --input-uri).",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(ENGINES),
        default=DEFAULT_ENGINE,
        show_default=True,
        help="What judges: the PySpark pipeline; reference: the plain-Python rules every "
        "Spark verdict is held equal to (no JVM, a quick look); auto: the rules for small "
        "histories without --master.",
    )(f)
