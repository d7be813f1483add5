"""ApiVersions: the version range of every transactional API (per transaction.version for
the APIs KIP-890 changed), and the transaction.version feature in SupportedFeatures and
FinalizedFeatures."""

from __future__ import annotations

from typing import Any

from ..catalogue import Outcome, probe
from ..context import API_VERSIONS, ProbeContext

ALL_TV = ("tv0", "tv1", "tv2")

#: the APIs a transactional client, KIP-664's tools and KIP-890's brokers use
TRANSACTIONAL_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    10: "FindCoordinator",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
}
#: the APIs whose new versions KIP-890 part 2 introduced (their ranges are also probed at
#: transaction.version 0)
KIP890_APIS = frozenset({0, 22, 24, 26})


def _api_versions(ctx: ProbeContext, version: int = 4) -> Any:
    return ctx.send(
        API_VERSIONS,
        version,
        client_software_name="txnchaos-conformance",
        client_software_version="1",
    )


def _versions_probe(key: int, name: str) -> None:
    def run(ctx: ProbeContext) -> Outcome:
        r = _api_versions(ctx)
        served = {int(k.api_key): [int(k.min_version), int(k.max_version)] for k in r.api_keys}
        return {"error": ctx.err(r.error_code), "versions": served.get(key)}

    run.__doc__ = f"The versions of {name} (API key {key}) ApiVersions v4 offers."
    configs: tuple[str, ...] = ("tv2", "tv0") if key in KIP890_APIS else ("tv2",)
    if key == 22:  # KIP-939's v6, offered by Kafka 4.4 with unstable.api.versions.enable
        configs += ("tv2-v6",)
    probe(f"apiversions.{name}", tags=("ApiVersions",), configs=configs)(run)


for _key, _name in TRANSACTIONAL_APIS.items():
    _versions_probe(_key, _name)


@probe("apiversions.transaction-version-feature", tags=("ApiVersions", "KIP-890"), configs=ALL_TV)
def transaction_version_feature(ctx: ProbeContext) -> Outcome:
    """transaction.version in SupportedFeatures (the range the broker can run) and in
    FinalizedFeatures (the cluster's level), as ApiVersions v3 and v4 answer (KAFKA-17011:
    a feature whose minimum is 0 is left out at v3, where old clients refused a 0)."""
    out: Outcome = {}
    for version in (3, 4):
        r = _api_versions(ctx, version)
        supported = {f.name: [int(f.min_version), int(f.max_version)] for f in r.supported_features}
        finalized = {
            f.name: [int(f.min_version_level), int(f.max_version_level)]
            for f in r.finalized_features
        }
        out[f"v{version}"] = {
            "supported": supported.get("transaction.version"),
            "finalized": finalized.get("transaction.version"),
            "finalized_epoch_set": int(r.finalized_features_epoch) >= 0,
        }
    return out
