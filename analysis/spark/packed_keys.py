"""Names and places packed into 64-bit numbers, so Spark aggregates them with fixed-width
(hash-aggregation) buffers instead of sorting structs or strings.

Processes and topics are replaced by their rank in sorted order (summary.py); ranks order like
the names, so "the greatest (process, op_id)" is the greatest of ``proc_rank << OP_BITS |
op_id`` and "the least (topic, partition, offset)" the least of ``tp_key << OP_BITS | offset``
(a *place*), with ``tp_key = topic_rank << PARTITION_BITS | partition``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

#: low bits of a packed key holding an op id or an offset: (rank << OP_BITS) | op_id
OP_BITS = 40
#: bits of a process rank: (1 << 62) | proc_rank << OP_BITS | op_id fits in 63 bits
PROC_BITS = 22
#: bits of a partition number in a tp_key; tp_key << OP_BITS | offset fits in 63 bits
PARTITION_BITS = 16
TOPIC_BITS = 63 - OP_BITS - PARTITION_BITS
OP_MASK = (1 << OP_BITS) - 1
PROC_MASK = (1 << PROC_BITS) - 1
#: the bit of an observation key that marks a write (reads sort before writes)
WRITE_BIT = 62
#: seeds the second of the two hashes of :func:`output_key`
OUTPUT_KEY_SALT = "txnchaos-output"


def name_key(name: Column) -> Column:
    """A process's or topic's 64-bit key: Spark's ``xxhash64`` of the name, null for a null
    name (the summary and the projections hash alike)."""
    return F.when(name.isNotNull(), F.xxhash64(name))


def op_key(proc_rank: Column, op_id: Column) -> Column:
    """(process, op_id) as one number ordering like the pair."""
    return F.shiftleft(proc_rank.cast("long"), OP_BITS) + op_id


def op_key_proc_rank(key: Column) -> Column:
    return F.shiftright(key, OP_BITS)


def pack_tp(topic_rank: Column, partition: Column) -> Column:
    """topic_rank << PARTITION_BITS | partition: orders like (topic, partition)."""
    return F.shiftleft(topic_rank.cast("long"), PARTITION_BITS).bitwiseOR(partition.cast("long"))


def tp_partition(tp: Column) -> Column:
    return tp.bitwiseAND(F.lit((1 << PARTITION_BITS) - 1)).cast("int")


def tp_topic_rank(tp: Column) -> Column:
    return F.shiftright(tp, PARTITION_BITS).cast("int")


def pack_place(tp: Column, offset: Column) -> Column:
    """tp_key << OP_BITS | offset: orders like (topic, partition, offset)."""
    return F.shiftleft(tp, OP_BITS) + offset


def place_offset(place: Column) -> Column:
    return F.when(place.isNotNull(), place.bitwiseAND(F.lit(OP_MASK)))


def place_tp(place: Column) -> Column:
    return F.shiftright(place, OP_BITS)


def observation_key(is_write: Column, proc_rank: Column, op_id: Column) -> Column:
    """An observation as one number ordering like (is_write, process, op_id): reads first."""
    return F.when(is_write, F.lit(1 << WRITE_BIT)).otherwise(F.lit(0)) + op_key(proc_rank, op_id)


def observation_is_write(key: Column) -> Column:
    return F.shiftright(key, WRITE_BIT) == 1


def observation_proc_rank(key: Column) -> Column:
    return op_key_proc_rank(key).bitwiseAND(F.lit(PROC_MASK))


def observation_op_id(key: Column) -> Column:
    return key.bitwiseAND(F.lit(OP_MASK))


def output_key(group: Column, source: Column) -> tuple[Column, Column]:
    """A copier's output as two 64-bit hashes of (its group, the input value it names as its
    source): ``xxhash64(group, source)`` and the same seeded by a salt.  Matching outputs to
    inputs on the pair compares no strings; a false match needs both to collide (~2**-128).
    Null unless both are set."""
    both = group.isNotNull() & source.isNotNull()
    return (
        F.when(both, F.xxhash64(group, source)),
        F.when(both, F.xxhash64(F.lit(OUTPUT_KEY_SALT), group, source)),
    )
