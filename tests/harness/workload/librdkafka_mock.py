"""librdkafka's own mock cluster (``rd_kafka_mock_*``, in the librdkafka that confluent-kafka
bundles), driven through ctypes: a cluster of in-process brokers whose coordinators and
partition leaders a test places, and whose brokers it takes down (connections closed, new ones
refused) and brings back.  librdkafka's tests reproduce librdkafka#5456 on it
(0105-transactions_mock.c: the group coordinator down, send_offsets_to_transaction never
returns); the watchdog tests do the same with the real client."""

from __future__ import annotations

import ctypes
from pathlib import Path

import confluent_kafka

_RD_KAFKA_PRODUCER = 0


def _library() -> ctypes.CDLL:
    """The librdkafka confluent-kafka's extension is linked against (the same loaded copy: the
    mock cluster and the clients share its state)."""
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    (path,) = sorted(libs.glob("librdkafka-*.so*"))
    lib = ctypes.CDLL(str(path))
    vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_partition_set_leader.restype = ctypes.c_int
    lib.rd_kafka_mock_partition_set_leader.argtypes = [vp, cp, i32, i32]
    lib.rd_kafka_mock_coordinator_set.restype = ctypes.c_int
    lib.rd_kafka_mock_coordinator_set.argtypes = [vp, cp, cp, i32]
    lib.rd_kafka_mock_broker_set_down.restype = ctypes.c_int
    lib.rd_kafka_mock_broker_set_down.argtypes = [vp, i32]
    lib.rd_kafka_mock_broker_set_up.restype = ctypes.c_int
    lib.rd_kafka_mock_broker_set_up.argtypes = [vp, i32]
    return lib


class MockCluster:
    """``brokers`` mock brokers (ids 1..n), served by a librdkafka handle of its own. Never
    destroyed: a client call left blocked on it (what the tests make) must not outlive it."""

    def __init__(self, brokers: int = 3) -> None:
        self._lib = _library()
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        self._rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        assert self._rk, errstr.value.decode()
        self._mc = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        assert self._mc
        self.bootstrap: str = self._lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()

    def topic(self, name: str, partitions: int, leader: int) -> None:
        """A topic whose every partition is led by broker ``leader``."""
        assert self._lib.rd_kafka_mock_topic_create(self._mc, name.encode(), partitions, 1) == 0
        for p in range(partitions):
            rc = self._lib.rd_kafka_mock_partition_set_leader(self._mc, name.encode(), p, leader)
            assert rc == 0

    def coordinator(self, key_type: str, key: str, broker: int) -> None:
        """Broker ``broker`` coordinates ``key`` (``key_type``: ``transaction`` or ``group``)."""
        rc = self._lib.rd_kafka_mock_coordinator_set(
            self._mc, key_type.encode(), key.encode(), broker
        )
        assert rc == 0

    def down(self, broker: int) -> None:
        """Close the broker's connections and refuse new ones."""
        assert self._lib.rd_kafka_mock_broker_set_down(self._mc, broker) == 0

    def up(self, broker: int) -> None:
        assert self._lib.rd_kafka_mock_broker_set_up(self._mc, broker) == 0
