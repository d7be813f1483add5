"""The coordinator role: cluster metadata, group coordination, and (next) transactions.

A coordinator node owns a range of internal partitions (like ``__consumer_offsets`` and
``__transaction_state`` in Kafka); for every partition it owns it keeps the state of the
groups (and later transactional ids) that hash to it in memory, made durable by an
append-only state log per partition (``cluster/storage/state_log.py``). Each component
here plugs its request handlers into the node's ``ApiRegistry`` and has no dependency
on the broker role.
"""
