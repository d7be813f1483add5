"""What the Java client kinds share: their extra spec fields, their JVM, and the translation of
a worker's settings into the Java client's properties."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ...maven import MavenError
from ..spec import ClientValue, SpecModel, UserPrepareError
from .build import JavaBuildError, ensure_built
from .process import JavaProcess
from .versions import VERSION_PATTERN, client_lib, client_version

if TYPE_CHECKING:
    from ..workers import Worker

#: How long a JVM may take to start and say it is ready (seconds; ~0.5-1 s unloaded).
JVM_START_TIMEOUT_S = 120.0


class JavaClientSpec(SpecModel):
    """The fields every Java client kind adds to its librdkafka counterpart's."""

    kafka_clients_version: Annotated[str | None, Field(pattern=VERSION_PATTERN)] = Field(
        default=None,
        description="the org.apache.kafka:kafka-clients release to run (default: the "
        "cluster's release on Apache Kafka, else "
        "harness/workload/java_client/versions.py's DEFAULT_VERSION)",
    )
    java_config: dict[str, ClientValue] = Field(
        default_factory=dict,
        description="Java client properties for these users' clients (win over the "
        "harness's; client_config keeps librdkafka's names and only its bootstrap, "
        "client.id, linger.ms and SASL keys are carried over)",
    )

    def prepare(self, run_dir: Path) -> None:
        """Build the program and fetch the release these users run (first use only)."""
        version = client_version(self.kafka_clients_version, run_dir)
        try:
            ensure_built()
            client_lib(version)
        except (JavaBuildError, MavenError) as e:
            kind = getattr(self, "kind", "java user")
            raise UserPrepareError(f"{kind}: {e}") from e


class JavaUser:
    """A worker mix-in: one JVM per user, started with its clients, restarted when it died."""

    java: JavaProcess | None = None

    def java_process(self: Any) -> JavaProcess:
        """The user's JVM, started if it is not running."""
        java = self.java
        if java is not None and java.alive:
            return java
        if java is not None:
            java.kill()
        version = client_version(self.spec.kafka_clients_version, self.ctx.run_dir)
        log = Path(self.ctx.run_dir) / "logs" / f"{self.process}.jvm.log"
        java = JavaProcess(self.process, version, log)
        self.java = java
        java.start(JVM_START_TIMEOUT_S)
        return java

    def stop_java(self) -> None:
        if self.java is not None:
            self.java.stop()
            self.java = None

    @property
    def java_down(self) -> bool:
        """The JVM died (or hung and was killed): the user's clients must be reopened."""
        return self.java is not None and not self.java.alive


def _str(value: ClientValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def security_props(conf: dict[str, Any]) -> dict[str, str]:
    """librdkafka's security keys (the scenario's ``client_config``) in the Java client's."""
    out: dict[str, str] = {}
    protocol = conf.get("security.protocol")
    if protocol:
        out["security.protocol"] = str(protocol).upper()
    mechanism = conf.get("sasl.mechanism") or conf.get("sasl.mechanisms")
    if mechanism:
        out["sasl.mechanism"] = str(mechanism).upper()
        user, password = conf.get("sasl.username"), conf.get("sasl.password")
        if user is not None:
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if str(mechanism).upper() == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    return out


def _base_props(worker: Worker) -> dict[str, str]:
    conf = worker.client_conf()
    props = {
        "bootstrap.servers": str(conf["bootstrap.servers"]),
        "client.id": str(conf.get("client.id", worker.process)),
    }
    props.update(security_props(conf))
    return props


def _with_java_config(worker: Worker, props: dict[str, str]) -> dict[str, str]:
    props.update({k: _str(v) for k, v in worker.spec.java_config.items()})
    return props


def producer_props(worker: Worker, transactional_id: str) -> dict[str, str]:
    """A transactional KafkaProducer's properties for ``worker``.

    Every blocking call is bounded by ``op_timeout_s`` (max.block.ms); a request gives up
    after half the transaction timeout (5-30 s, as our own client does) and a record after
    its request timeout and linger (delivery.timeout.ms), so a flush ends in about that."""
    spec = worker.spec
    linger_ms = int(worker.client_conf().get("linger.ms", 5))
    txn_timeout_ms = int(getattr(spec, "transaction_timeout_ms", None) or 60_000)
    request_timeout_ms = min(30_000, max(5_000, txn_timeout_ms // 2))
    props = _base_props(worker)
    props.update(
        {
            "transactional.id": transactional_id,
            "enable.idempotence": "true",
            "acks": "all",
            "linger.ms": str(linger_ms),
            "max.block.ms": str(int(spec.op_timeout_s * 1000)),
            "request.timeout.ms": str(request_timeout_ms),
            "delivery.timeout.ms": str(request_timeout_ms + linger_ms + 1000),
        }
    )
    if getattr(spec, "transaction_timeout_ms", None) is not None:
        props["transaction.timeout.ms"] = str(spec.transaction_timeout_ms)
    return _with_java_config(worker, props)


def consumer_props(
    worker: Worker, group_id: str, isolation: str, max_poll_records: int
) -> dict[str, str]:
    """A KafkaConsumer's properties: the classic group protocol (KIP-848's is not asked
    for), no auto-commit, from the log start."""
    props = _base_props(worker)
    props.update(
        {
            "group.id": group_id,
            "group.protocol": "classic",
            "isolation.level": isolation,
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
            "max.poll.records": str(max_poll_records),
            "default.api.timeout.ms": str(int(worker.spec.op_timeout_s * 1000)),
        }
    )
    return _with_java_config(worker, props)
