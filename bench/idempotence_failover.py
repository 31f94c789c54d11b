"""Idempotence across a failover, repeated: ``tests/kafka/test_cluster_idempotence.py``'s
run (3 brokers + etcd, confluent-kafka with enable.idempotence=true and acks=all, the
partitions' leader killed -9 a third of the way through) ``--runs`` times; prints per run
the messages acked, failed, stored, lost (acked but not stored) and stored twice.

    .venv/bin/python -m bench.idempotence_failover --runs 20
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kafka.test_cluster_idempotence import COUNT, run_failover  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--count", type=int, default=COUNT)
    args = parser.parse_args()
    print("| run | acked | failed | stored | lost | twice | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    bad = 0
    for n in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="skerry-idem-") as tmp:
            run = run_failover(Path(tmp), args.count)
        stored = Counter(run["stored"])
        lost = len(set(run["acked"]) - set(stored))
        twice = sum(1 for c in stored.values() if c > 1)
        bad += bool(lost or twice)
        print(f"| {n} | {len(run['acked'])} | {len(run['failed'])} | {len(run['stored'])} | "
              f"{lost} | {twice} | {run['seconds']:.1f} |", flush=True)
    print(f"{args.runs} runs, {bad} with a lost or duplicated message")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
