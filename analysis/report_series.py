"""The report's series that need the whole history: latency quantiles per operation type, and
transactions open over time — per time bucket, at most :data:`MAX_BUCKETS` buckets over the run,
so the report of a 10M-event history is as small as one of 100 events.

Both come from counts, which either engine computes (report_series_spark.py: one Spark job of
hash aggregations; reference/summary.py: plain Python): latencies per (bucket, type,
logarithmic bin) — :data:`BINS_PER_DECADE` bins per power of ten, so a quantile read from the
bins is within 6% of the exact one — and transactions per bucket of their begin and of their
end; :func:`series_of_counts` turns them into the series."""

from __future__ import annotations

import math
from typing import Any

SEC = 1_000_000_000
#: time buckets over a run, at most: ~one per pixel column of a chart
MAX_BUCKETS = 300
BINS_PER_DECADE = 20
#: the LSO chart draws the most lagging partitions only, each with at most this many points
MAX_PLOT_PARTITIONS = 10
MAX_PLOT_POINTS = 400
QUANTILES = (0.5, 0.95, 0.99)


def bucket_seconds(span_ns: int) -> int:
    """Whole seconds per bucket so that a run of ``span_ns`` has at most MAX_BUCKETS."""
    return max(1, math.ceil(span_ns / SEC / MAX_BUCKETS))


def quantile_of_bins(bins: dict[int, int], q: float) -> float:
    """The ``q`` quantile (ns) of a latency histogram {bin: count}: the geometric middle of
    the bin holding it."""
    total = sum(bins.values())
    rank = q * total
    seen = 0
    for b in sorted(bins):
        seen += bins[b]
        if seen >= rank:
            return float(10 ** ((b + 0.5) / BINS_PER_DECADE))
    return float(10 ** ((max(bins) + 0.5) / BINS_PER_DECADE))


def bucket_of(t_ns: int, t0_ns: int, width_ns: int) -> int:
    """The bucket of time ``t_ns`` as the Spark job computes it (a double division, floored)."""
    return math.floor(float(t_ns - t0_ns) / float(width_ns))


def latency_bin(latency_ns: int) -> int:
    """The logarithmic bin of a latency (ns), :data:`BINS_PER_DECADE` per power of ten."""
    return math.floor(math.log10(max(latency_ns, 1)) * BINS_PER_DECADE)


def series_of_counts(
    hist: dict[tuple[int, str], dict[int, int]], change: dict[int, int], t0_ns: int, t1_ns: int
) -> dict[str, Any]:
    """The report's latency quantiles and open transactions from latency counts per (bucket,
    type) {bin: count} and the change of open transactions per bucket."""
    bucket_s = bucket_seconds(t1_ns - t0_ns)
    width = bucket_s * SEC
    lat_rows = []
    for (b, typ), bins in sorted(hist.items()):
        lat_rows.append(
            {
                "t_ns": t0_ns + b * width,
                "type": typ,
                **percentiles(bins),
            }
        )
    open_rows = []
    level = 0
    last = max((b for b in change if b * width < t1_ns - t0_ns), default=-1)
    for b in range(min(change, default=0), last + 1):
        level += change.get(b, 0)
        open_rows.append({"t_ns": t0_ns + b * width, "open": level})
    overall: dict[str, dict[int, int]] = {}
    for (_b, typ), bins in hist.items():
        merged = overall.setdefault(typ, {})
        for k, n in bins.items():
            merged[k] = merged.get(k, 0) + n
    return {
        "t0_ns": t0_ns,
        "bucket_s": bucket_s,
        "latency": lat_rows,
        "latency_overall": {typ: percentiles(bins) for typ, bins in sorted(overall.items())},
        "open_txns": open_rows,
    }


def percentiles(bins: dict[int, int]) -> dict[str, float]:
    """``n`` and the :data:`QUANTILES` (ms) of a latency histogram {bin: count}."""
    return {
        "n": sum(bins.values()),
        **{f"p{round(q * 100)}_ms": quantile_of_bins(bins, q) / 1e6 for q in QUANTILES},
    }
