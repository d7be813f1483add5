"""A consumer's group identity, for TxnOffsetCommit (KIP-447: a zombie copier whose
generation is gone is refused by the group coordinator).

confluent-kafka hands it out as librdkafka's serialized ``consumer_group_metadata()``:
``b"CGMDv2:"``, the generation id (int32, host byte order), the group id and the member id
(each NUL-terminated), a byte that is 1 when there is no group instance id, else the instance
id (NUL-terminated) follows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")


@dataclass(frozen=True)
class GroupMetadata:
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def from_librdkafka(cls, blob: bytes) -> GroupMetadata:
        """Parse confluent-kafka's ``Consumer.consumer_group_metadata()``."""
        if not blob.startswith(_MAGIC):
            raise ValueError("not a librdkafka consumer group metadata blob")
        pos = len(_MAGIC)
        (generation,) = _GENERATION.unpack_from(blob, pos)
        pos += _GENERATION.size

        def cstring(at: int) -> tuple[str, int]:
            end = blob.index(b"\0", at)
            return blob[at:end].decode(), end + 1

        group_id, pos = cstring(pos)
        member_id, pos = cstring(pos)
        instance: str | None = None
        if pos < len(blob) and blob[pos] == 0:
            instance, pos = cstring(pos + 1)
        return cls(group_id, generation, member_id, instance)
