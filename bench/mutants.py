"""The mutant set of the mutation benchmark (bench/mutation.py): small, realistic bugs put
into the cluster's transactional code, one at a time, in a scratch copy of ``cluster/``.

Each mutant is one exact text replacement in one file: ``original`` must occur exactly once
in that file of the checkout the benchmark runs from (the cluster keeps changing: a mutant
whose original text is gone is refused with a clear error, never silently skipped). Each is
a slip a real implementation could make — an off-by-one, a missing check, a retry not made,
an entry written in the wrong place, a recovery that trusts too much, a counter bumped
twice — never a rewrite. A mutant the harness cannot see stays in this list: the benchmark
measures the harness, and the ones it misses are the point.

``canary`` is not scored: it is a bug every run must detect, run first to show that the
nodes really import the mutated copy.
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES = (
    "producer_state",
    "coordinator",
    "markers",
    "group_offsets",
    "lso_index",
    "storage_recovery",
    "fencing",
    "timeouts",
    "metrics",
)


@dataclass(frozen=True)
class Mutant:
    name: str
    category: str
    file: str  # relative to cluster/
    original: str
    replacement: str
    description: str
    #: 1: the first set (issue 37's first round); 2: written in the second round, before
    #: the mixes of that round were changed (the closest proxy for mutants never seen)
    round: int = 1


CANARY = Mutant(
    name="canary-fetch-ignores-aborted-index",
    category="lso_index",
    file="broker/partition.py",
    original="if committed and records and not self.bugs.fetch_ignores_aborted_index:",
    replacement="if False:",
    description="read_committed fetches never carry AbortedTransactions (every run must "
    "show aborted reads: proves the nodes run the mutated copy)",
)

FIRST_ROUND: tuple[Mutant, ...] = (
    # ---------------------------------------------------------------- producer state
    Mutant(
        "ps-txn-first-offset-moves",
        "producer_state",
        "broker/producer_state.py",
        "if header.is_transactional and entry.current_txn_first_offset is None:",
        "if header.is_transactional:",
        "every transactional batch restarts the open transaction at its own offset (the "
        "first offset is overwritten), so the LSO and the aborted range start too late",
    ),
    Mutant(
        "ps-sequence-gap-accepted",
        "producer_state",
        "broker/producer_state.py",
        "return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)",
        "return next_seq > last_seq or (next_seq == 0 and last_seq == INT32_MAX)",
        "a batch whose sequence skips ahead is accepted (a gap from a lost or reordered "
        "batch is not refused with OUT_OF_ORDER_SEQUENCE_NUMBER)",
    ),
    Mutant(
        "ps-duplicate-ignores-epoch",
        "producer_state",
        "broker/producer_state.py",
        "        if epoch != self.producer_epoch:\n            return None\n        for b in",
        "        for b in",
        "duplicate detection matches cached batches of an older epoch: a new epoch's batch "
        "with the same sequences is answered from the cache and never written",
    ),
    Mutant(
        "ps-snapshot-load-forgets-open-txns",
        "producer_state",
        "broker/producer_state.py",
        "                if e.current_txn_first_offset is not None:\n"
        "                    self._ongoing[e.producer_id] = e.current_txn_first_offset\n",
        "",
        "loading a producer-state snapshot restores the producers but not the index of open "
        "transactions, so the LSO ignores transactions open across a restart",
    ),
    Mutant(
        "ps-non-txn-batch-in-open-txn",
        "producer_state",
        "broker/producer_state.py",
        "if open_txn and not header.is_transactional:",
        "if open_txn and header.is_transactional and header.is_control:",
        "a non-transactional batch from a producer with an open transaction is accepted "
        "(the INVALID_TXN_STATE check tests the wrong flag)",
    ),
    # ---------------------------------------------------------------- LSO / aborted index
    Mutant(
        "lso-off-by-one",
        "lso_index",
        "broker/partition.py",
        "return min(hw, max(first_unstable, self.log_start_offset))",
        "return min(hw, max(first_unstable + 1, self.log_start_offset))",
        "the LSO is one past the first offset of the oldest open transaction",
    ),
    Mutant(
        "lso-read-bound-inclusive",
        "lso_index",
        "storage/segment.py",
        "if max_offset is not None and header.last_offset >= max_offset:",
        "if max_offset is not None and header.last_offset > max_offset:",
        "a read bounded by the LSO also returns the batch that ends exactly at the LSO",
    ),
    Mutant(
        "aidx-entry-lso-is-marker",
        "lso_index",
        "broker/partition.py",
        "lso = self.producer_state.last_stable_offset_after(pid, offset)",
        "lso = offset + 1",
        "an aborted-index entry records the offset after its marker as the LSO, ignoring "
        "other transactions still open, so fetches stop collecting aborts too early",
    ),
    Mutant(
        "aidx-entry-in-first-offset-segment",
        "lso_index",
        "broker/partition.py",
        "seg.txn_index.append(AbortedTxn(pid, done.first_offset, offset, lso))",
        "self.log.segment_for(done.first_offset).txn_index.append("
        "AbortedTxn(pid, done.first_offset, offset, lso))",
        "an abort is indexed in the segment holding the transaction's first record instead "
        "of the one holding its marker",
    ),
    Mutant(
        "aidx-collect-one-segment",
        "lso_index",
        "storage/log.py",
        "            found.extend(entries)\n            if complete:\n                break",
        "            found.extend(entries)\n            break",
        "collecting aborted transactions for a fetch reads only the index of the segment "
        "holding the fetch offset",
    ),
    Mutant(
        "aidx-collect-range-exclusive",
        "lso_index",
        "storage/txn_index.py",
        "if e.last_offset >= fetch_offset and e.first_offset < upper_bound:",
        "if e.last_offset >= fetch_offset and e.first_offset < upper_bound - 1:",
        "an aborted transaction whose first record is the last record of the fetched range "
        "is not returned",
    ),
    # ---------------------------------------------------------------- storage / recovery
    Mutant(
        "rec-replay-skips-markers",
        "storage_recovery",
        "broker/partition.py",
        "                except CorruptBatch:\n"
        "                    continue  # not a transaction marker (e.g. leader change)\n"
        "                self._apply_marker(\n"
        "                    seg, header, commit, coordinator_epoch, header.max_timestamp, "
        "replay=True\n                )",
        "                except CorruptBatch:\n"
        "                    continue  # not a transaction marker (e.g. leader change)",
        "replaying the log after the producer-state snapshot skips transaction markers, so "
        "transactions ended after the snapshot are open again after a restart",
    ),
    Mutant(
        "rec-replay-from-log-end",
        "storage_recovery",
        "broker/partition.py",
        "for seg, pos, header in self.log.scan(start or 0):",
        "for seg, pos, header in self.log.scan(start or end):",
        "with no snapshot, producer state is not rebuilt from the log (replay starts at the "
        "log end instead of offset 0)",
    ),
    Mutant(
        "rec-trusts-unflushed-active-segment",
        "storage_recovery",
        "storage/log.py",
        "holds_unflushed = next_base is None or next_base > recovery_point",
        "holds_unflushed = next_base is not None and next_base > recovery_point",
        "after an unclean shutdown the active segment is loaded from its indexes without "
        "validation, trusting whatever tail the crash left",
    ),
    Mutant(
        "rec-no-crc-check",
        "storage_recovery",
        "storage/segment.py",
        "                if compute_crc(data, 0, header.size) != header.crc:\n"
        "                    break\n",
        "",
        "recovery validates lengths and offsets but not the CRC of each batch",
    ),
    Mutant(
        "rec-snapshot-at-roll-too-late",
        "storage_recovery",
        "broker/partition.py",
        "self.producer_state.take_snapshot(base_offset)",
        "self.producer_state.take_snapshot(base_offset - 1)",
        "the producer-state snapshot taken at a segment roll is labelled one offset early, "
        "so the batch before the roll is replayed onto state that already has it",
    ),
    # ---------------------------------------------------------------- coordinator
    Mutant(
        "coord-commit-retry-after-abort-ok",
        "coordinator",
        "coordinator/transactions/coordinator.py",
        "            return NONE if not commit else int(E.invalid_txn_state)\n"
        "        if state == S.PREPARE_COMMIT:",
        "            return NONE\n        if state == S.PREPARE_COMMIT:",
        "EndTxn(commit) on a transaction already aborted (timed out, fenced) answers NONE: "
        "the client believes its aborted transaction committed",
    ),
    Mutant(
        "coord-completes-on-first-marker",
        "coordinator",
        "coordinator/transactions/coordinator.py",
        "        if not inflight.remaining:\n"
        "            self._write_completion(spec.transactional_id)",
        "        if len(inflight.remaining) <= 1:\n"
        "            self._write_completion(spec.transactional_id)",
        "the transaction is completed when one marker is still outstanding (an off-by-one "
        "in the count of markers left)",
    ),
    Mutant(
        "coord-load-resumes-only-commits",
        "coordinator",
        "coordinator/transactions/coordinator.py",
        "                and md.state.is_prepare\n",
        "                and md.state == S.PREPARE_COMMIT\n",
        "a coordinator that loads its partition resumes the markers of PrepareCommit "
        "transactions only; PrepareAbort ones are never completed",
    ),
    # ---------------------------------------------------------------- markers
    Mutant(
        "mark-unreachable-dropped",
        "markers",
        "coordinator/transactions/marker_sender.py",
        "                for unit in units:\n"
        '                    self._backoff(unit, now, f"node {node}: {exc}")',
        "                for unit in units:\n"
        "                    self._resolve(unit, Outcome.DROPPED)",
        "a WriteTxnMarkers request that fails to reach its node is not retried: its markers "
        "are counted as resolved",
    ),
    Mutant(
        "mark-not-leader-obsolete",
        "markers",
        "coordinator/transactions/marker_sender.py",
        "OBSOLETE = frozenset(int(e) for e in (E.invalid_producer_epoch, "
        "E.transaction_coordinator_fenced))",
        "OBSOLETE = frozenset(int(e) for e in (E.invalid_producer_epoch, "
        "E.transaction_coordinator_fenced, E.not_coordinator, E.coordinator_load_in_progress, "
        "E.kafka_storage_error))",
        "a marker refused because the node is (re)loading or has a storage error is dropped "
        "as obsolete instead of retried",
    ),
    Mutant(
        "mark-missing-answer-written",
        "markers",
        "coordinator/transactions/marker_sender.py",
        '                self._backoff(unit, now, f"node {node} did not answer for the '
        'partition")\n                continue',
        "                self._resolve(unit, Outcome.WRITTEN)\n                continue",
        "a partition missing from a WriteTxnMarkers response is taken as written",
    ),
    # ---------------------------------------------------------------- group offsets
    Mutant(
        "grp-abort-applies-offsets",
        "group_offsets",
        "coordinator/groups/offsets.py",
        "                if commit:\n"
        "                    current = go.committed.get((topic, partition))",
        "                if True:\n"
        "                    current = go.committed.get((topic, partition))",
        "an abort marker applies the transaction's pending offsets as if it committed",
    ),
    Mutant(
        "grp-pending-not-restored",
        "group_offsets",
        "coordinator/groups/store.py",
        '        elif kind == "t":',
        '        elif kind == "t" and False:',
        "a group coordinator that loads its partition forgets the pending transactional "
        "offsets, so their commit marker later applies nothing",
    ),
    Mutant(
        "grp-unstable-offset-served",
        "group_offsets",
        "coordinator/groups/offsets.py",
        "if require_stable and go.has_pending(tp):",
        "if require_stable and go.has_pending(tp) and False:",
        "OffsetFetch with require_stable answers the last committed offset although a "
        "transaction holds a pending one for the partition",
    ),
    # ---------------------------------------------------------------- fencing
    Mutant(
        "fence-old-epoch-batch-accepted",
        "fencing",
        "broker/producer_state.py",
        "        elif epoch < entry.producer_epoch:\n            return Validation(",
        "        elif epoch < entry.producer_epoch - 1:\n            return Validation(",
        "a batch one epoch behind the producer's current epoch is not fenced",
    ),
    Mutant(
        "fence-coordinator-skips-epoch",
        "fencing",
        "coordinator/transactions/coordinator.py",
        "if client_epoch != epoch or at_max:",
        "if epoch > client_epoch or at_max:",
        "AddPartitionsToTxn/AddOffsetsToTxn/EndTxn from an older epoch is accepted (the "
        "coordinator only refuses epochs from the future)",
    ),
    Mutant(
        "fence-txn-offset-epoch-unchecked",
        "fencing",
        "coordinator/groups/txn_offset_commit_api.py",
        "        if not v.implicit_add(version) and self.c.has_pending_txn_offsets(\n"
        "            req.group_id, req.producer_id\n        ):",
        "        if self.c.has_pending_txn_offsets(req.group_id):",
        "TxnOffsetCommit skips verification whenever the group has any pending offsets, of "
        "any producer",
    ),
    Mutant(
        "fence-marker-coordinator-epoch-forgotten",
        "fencing",
        "broker/producer_state.py",
        "        if coordinator_epoch >= 0:  # -1: an admin abort, which leaves coordinator "
        "fencing\n            entry.coordinator_epoch = coordinator_epoch\n",
        "",
        "a partition does not remember the coordinator epoch of the last marker, so a "
        "zombie coordinator's markers are accepted",
    ),
    # ---------------------------------------------------------------- timeouts
    Mutant(
        "to-timeout-from-last-update",
        "timeouts",
        "coordinator/transactions/coordinator.py",
        "or md.txn_start_ms + timeout_ms >= now",
        "or md.txn_last_update_ms + self.config.max_timeout_ms >= now",
        "a transaction times out after transaction.max.timeout.ms since its last update "
        "instead of its own timeout since it started",
    ),
    Mutant(
        "to-fence-abort-no-bump",
        "timeouts",
        "coordinator/transactions/metadata.py",
        "        fenced = min(base + 1, MAX_EPOCH)\n",
        "        fenced = base\n",
        "aborting a timed-out (or fenced) transaction does not bump the producer epoch, so "
        "the old instance is not fenced",
    ),
    # ---------------------------------------------------------------- metrics
    Mutant(
        "met-commit-counted-at-prepare",
        "metrics",
        "coordinator/transactions/coordinator.py",
        "        if state == S.ONGOING:\n"
        "            return self._begin_completion(md, md.prepare_end(commit, self.clock_ms()))",
        "        if state == S.ONGOING:\n"
        "            if commit:\n"
        "                self.counters.transactions_committed += 1\n"
        "            return self._begin_completion(md, md.prepare_end(commit, self.clock_ms()))",
        "TransactionsCommitted is also counted when EndTxn(commit) starts the commit "
        "(counted twice for TV0/TV1 clients)",
    ),
    Mutant(
        "met-producer-count-open-txns",
        "metrics",
        "metrics.py",
        "producers += p.producer_count",
        "producers += p.open_transaction_count",
        "ProducerIdCount counts the producers with an open transaction instead of every "
        "producer with state",
    ),
)

# Written in issue 37's second round, before that round changed the mixes: ten slips in the
# classes the first round left invisible (checks only a misbehaving client reaches, torn
# writes and recovery, zombie coordinators, late or zombie requests, marker retries).
SECOND_ROUND: tuple[Mutant, ...] = (
    Mutant(
        "ps-new-epoch-any-sequence",
        "producer_state",
        "broker/producer_state.py",
        "            if first_seq != 0:\n                return Validation(\n"
        '                    OUT_OF_ORDER_SEQUENCE_NUMBER,\n                    f"new epoch',
        "            if first_seq < 0:\n                return Validation(\n"
        '                    OUT_OF_ORDER_SEQUENCE_NUMBER,\n                    f"new epoch',
        "a batch that moves the producer to a new epoch is accepted at any sequence "
        "(KIP-360's restart at sequence 0 is not enforced)",
        round=2,
    ),
    Mutant(
        "fence-idempotent-old-epoch",
        "fencing",
        "broker/producer_state.py",
        "        elif epoch < entry.producer_epoch:\n",
        "        elif epoch < entry.producer_epoch and header.is_transactional:\n",
        "a batch of an older epoch is fenced only when it is transactional: an idempotent "
        "producer's stale epoch falls through to the sequence check",
        round=2,
    ),
    Mutant(
        "coord-epoch-not-bumped-on-load",
        "fencing",
        "coordinator/transactions/coordinator.py",
        "epoch = max(loaded.coordinator_epoch + 1, coordinator_epoch or 0)",
        "epoch = max(loaded.coordinator_epoch, coordinator_epoch or 0)",
        "a coordinator that loads a transaction-log partition keeps the epoch it found "
        "instead of bumping it, so the previous owner's markers are not fenced",
        round=2,
    ),
    Mutant(
        "mark-tv0-older-epoch-accepted",
        "markers",
        "broker/producer_state.py",
        "            invalid = producer_epoch < current\n",
        "            invalid = producer_epoch < current - 1\n",
        "a TV0/TV1 marker one epoch older than the producer's current epoch is written",
        round=2,
    ),
    Mutant(
        "rec-empty-snapshot-no-producers",
        "storage_recovery",
        "broker/producer_state.py",
        "        head = len(_SNAPSHOT_MAGIC) + _CRC.size\n",
        "        if not data:\n            return []\n"
        "        head = len(_SNAPSHOT_MAGIC) + _CRC.size\n",
        "an empty producer-state snapshot file (what a power loss leaves of a file renamed "
        "before its data reached the disk) is loaded as a snapshot with no producers",
        round=2,
    ),
    Mutant(
        "rec-truncate-keeps-size",
        "storage_recovery",
        "storage/segment.py",
        "            os.ftruncate(self.fd, valid_end)\n            self.size = valid_end\n",
        "            os.ftruncate(self.fd, valid_end)\n",
        "recovery cuts a torn tail off the file but the segment keeps its old size, so the "
        "next appends land past a hole",
        round=2,
    ),
    Mutant(
        "rec-torn-txnindex-kept",
        "storage_recovery",
        "storage/txn_index.py",
        "        if good != len(data):\n"
        "            self._rewrite()  # drop a torn or garbled tail\n",
        "",
        "an aborted-transaction index with a torn last entry is loaded without rewriting "
        "it, so later entries are appended after the torn bytes",
        round=2,
    ),
    Mutant(
        "fence-tv2-end-older-epoch",
        "fencing",
        "coordinator/transactions/coordinator.py",
        "        else:  # Ongoing, Empty\n"
        "            valid_epoch = producer_epoch == md.producer_epoch\n",
        "        else:  # Ongoing, Empty\n"
        "            valid_epoch = producer_epoch <= md.producer_epoch\n",
        "EndTxn v5 (TV2) with an older epoch ends the ongoing transaction",
        round=2,
    ),
    Mutant(
        "coord-stale-marker-completion",
        "coordinator",
        "coordinator/transactions/coordinator.py",
        "        if inflight is None or (inflight.spec is not spec and inflight.spec != spec):\n"
        "            return  # an older incarnation's marker\n",
        "        if inflight is None:\n            return\n",
        "a marker outcome of an earlier completion (before a reload or a fence) counts for "
        "the transaction's current completion",
        round=2,
    ),
    Mutant(
        "mark-tv2-retry-closes-open-txn",
        "markers",
        "broker/producer_state.py",
        "                and entry.current_txn_first_offset is None\n            ):\n"
        "                invalid = False",
        "            ):\n                invalid = False",
        "a TV2 marker at the producer's current epoch is taken for a retry even while a "
        "transaction of that epoch is open, so a late retry ends it",
        round=2,
    ),
)

MUTANTS: tuple[Mutant, ...] = FIRST_ROUND + SECOND_ROUND

BY_NAME: dict[str, Mutant] = {m.name: m for m in (CANARY, *MUTANTS)}
