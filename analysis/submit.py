"""``spark-submit`` entry point: judge a run directory on the master and settings spark-submit
gives (docs/report.md, "Judging on a Spark cluster")::

    spark-submit --master spark://HOST:7077 "$(python -m txnchaos.analysis.submit --path)" \\
        RUN_DIR [--input-uri URI]

Exit code as ``txnchaos analyze``: 0 valid, 1 anomalies found, 2 the run directory is unreadable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# run as a file, this directory heads sys.path: its modules (load, summary, ...) would shadow
# installed ones of the same names
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="spark-submit ... submit.py",
        description="Judge RUN_DIR on spark-submit's master: write verdict.json and report.html.",
    )
    ap.add_argument("--path", action="store_true", help="print this file's path (for spark-submit)")
    ap.add_argument("run_dir", nargs="?", type=Path)
    ap.add_argument("--input-uri", default=None, help="a copy of RUN_DIR the executors read")
    args = ap.parse_args(argv)
    if args.path:
        print(Path(__file__).resolve())
        return 0
    if args.run_dir is None:
        ap.error("RUN_DIR is required")
    # absolute: spark-submit runs this file as a script, outside its package
    from txnchaos.analysis.analyze import main_analyze
    from txnchaos.analysis.input_uri import InputUriError, parse_input_uri
    from txnchaos.analysis.spark.session import submitted_session

    try:
        input_uri = parse_input_uri(args.input_uri) if args.input_uri is not None else None
    except InputUriError as e:
        ap.error(f"--input-uri: {e}")
    submitted_session()
    return main_analyze(args.run_dir, None, "spark", input_uri)


if __name__ == "__main__":
    sys.exit(main())
