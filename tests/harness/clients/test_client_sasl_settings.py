"""The SASL settings of the harness's own protocol clients: our producer's librdkafka-style
keys and ``txnchaos transactions --command-config``'s properties file both become the
credentials of cluster/security/sasl.py's client side, or a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from txnchaos.cluster.security.sasl import SaslConfigError, SaslCredentials
from txnchaos.harness.clients import ProducerConfig
from txnchaos.harness.transactions_tool.command_config import (
    CommandConfigError,
    load_command_config,
    parse_properties,
)
from txnchaos.harness.workload.ours import our_config

SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-256",
    "sasl.username": "alice",
    "sasl.password": "alice-pw",
}


def test_the_workloads_keys_reach_our_producer() -> None:
    conf = {"bootstrap.servers": "h:1", "transactional.id": "t", **SASL}
    config = our_config(conf, None)
    assert config.sasl() == SaslCredentials("SCRAM-SHA-256", "alice", "alice-pw")
    assert "alice-pw" not in repr(config)
    assert our_config({"bootstrap.servers": "h:1"}, None).sasl() is None


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"security_protocol": "SASL_SSL"}, "security.protocol"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "sasl.username"),
    ],
)
def test_our_producer_refuses_settings_it_cannot_use(settings: dict[str, str], named: str) -> None:
    with pytest.raises(SaslConfigError, match=named):
        ProducerConfig("h:1", **settings)  # type: ignore[arg-type]


def test_properties_files_are_read_as_java_reads_them() -> None:
    text = (
        "# comment\n! also a comment\n\n"
        "security.protocol = SASL_PLAINTEXT\n"
        "sasl.mechanism: PLAIN\n"
        "sasl.jaas.config=x.PlainLoginModule required \\\n"
        '    username="a" \\\n'
        '    password="p w";\n'
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'x.PlainLoginModule required username="a" password="p w";',
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("security.protocol=PLAINTEXT\n", None),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            'sasl.jaas.config=x.ScramLoginModule required username="a" password="b";\n',
            SaslCredentials("SCRAM-SHA-512", "a", "b"),
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.username=a\nsasl.password=b\n",
            SaslCredentials("PLAIN", "a", "b"),
        ),
    ],
)
def test_a_command_config_gives_the_admin_connections_credentials(
    tmp_path: Path, text: str, expected: SaslCredentials | None
) -> None:
    path = tmp_path / "client.properties"
    path.write_text(text)
    assert load_command_config(path) == expected


def test_a_jaas_line_without_credentials_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=x.PlainLoginModule required user_a="b";\n'
    )
    with pytest.raises(CommandConfigError, match="needs username"):
        load_command_config(path)
