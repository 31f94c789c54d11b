"""Fuzz targets: every parser that reads bytes from outside, with the exceptions it is
documented to raise. Anything else escaping is a crash. Shared by tests/reliability/
test_fuzz.py (hypothesis, CI-sized) and bench/reliability.py (a mutation loop, >= 1,000,000
inputs per parser).

Must not import: the reactor.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from broker.iggy.codec import decode_request
from broker.iggy.errors import IggyError
from broker.v1.codec import Codec, CommandError
from data.format import decode_record, encode_record
from data.store import TopicConfig
from groups.loader import GroupLog
from groups.store import groups_from_json, offset_metadata_from_json
from replication.roles import ReplicationCheckpoint
from tests.reliability.kafka_fuzz import KAFKA_SEEDS, run_kafka
from tests.tank import fuzz as _tank_fuzz

__all__ = ["Target", "TARGETS", "mutate"]


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[bytes], object]
    allowed: tuple[type[BaseException], ...]
    seeds: tuple[bytes, ...]


_CODEC = Codec()


def _v1(data: bytes) -> object:
    for line in data.split(b"\n"):
        try:
            _CODEC.parse_command(line)
        except CommandError:
            pass
    return None


def _record(data: bytes) -> object:
    pos = 0
    while pos < len(data):
        _, pos = decode_record(data, pos)
    return None


def _json(loader: Callable[[object], object]) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return loader(json.loads(data.decode("utf-8")))
    return run


def _group_record(data: bytes) -> object:
    """One record of __skerry_groups: key, a newline, value; loaded as a partition would."""
    key, _, value = data.partition(b"\n")
    book = GroupLog()
    book.apply(0, 0, key, value)
    return book.state()


def _iggy(data: bytes) -> object:
    code = int.from_bytes(data[:4].ljust(4, b"\0"), "little")
    return decode_request(code % 1024 if data[4:5] != b"\xff" else code, data[4:])


_RECORD = encode_record(7, 1_700_000_000_000_000, 12345, 1_700_000_000_000_000, b"payload")

TARGETS: dict[str, Target] = {
    "v1_codec": Target("v1_codec", _v1, (), (
        b"V1|1|PRODUCE|orders user1:created acks=all\n", b"V1|2|CONSUME|t 0 0 max=10 wait_ms=5",
        b"V1|3|JOIN|g t c assignor=range", b"V1|4|COMMIT|g t c 1 2 3", b"V1|5|AUTH|alice tok",
        b"V1|6|PRODUCE|t k:aGVsbG8= enc=b64 partition=1", b"V1|7|PING|")),
    "record": Target("record", _record, (ValueError,), (_RECORD,)),
    "groups_json": Target("groups_json", _json(groups_from_json), (ValueError,), (
        b'{"version": 1, "groups": [{"group": "g", "topic": "t", "generation": 2, '
        b'"assignor": "range", "partitions": 3, "members": [{"member_id": "c", '
        b'"session_timeout_ms": 10000, "assigned": [0, 1, 2]}]}]}',)),
    "offsets_json": Target("offsets_json", _json(offset_metadata_from_json), (ValueError,), (
        b'{"version": 1, "offsets": [{"group": "g", "topic": "t", "committed": {"0": 5}}]}',
        b'{"version": 2, "offsets": [{"group": "g", "topic": "t", "committed": {"0": 5}, '
        b'"metadata": {"0": "md"}}]}')),
    "group_record": Target("group_record", _group_record, (ValueError,), (
        b'[1,"offset","g","t",0]\n{"v":1,"offset":5,"metadata":"md"}',
        b'[1,"group","g","t"]\n{"v":1,"generation":2,"assignor":"range","partitions":1,'
        b'"members":[{"member_id":"c","session_timeout_ms":10000,"assigned":[0]}]}',
        b'[1,"kafka_group","g"]\n{"v":1,"state":"Empty","generation":1,"protocol_type":null,'
        b'"protocol":null,"leader":null,"members":[]}',
        b'[1,"offset","g","t",0]\n')),
    "topic_json": Target("topic_json", _json(TopicConfig.from_json), (ValueError,), (
        b'{"partitions": 3, "replication_factor": 1, "min_insync_replicas": 1, '
        b'"retention_ms": null, "retention_bytes": 1000}',)),
    "state_json": Target("state_json", _json(ReplicationCheckpoint.from_json), (ValueError,), (
        b'{}', b'{"epochs": [[0, 0]]}')),
    "iggy": Target("iggy", _iggy, (IggyError,), (
        b"\x01\x00\x00\x00", b"\x0e\x00\x00\x00\x01\x00\x00\x00\x05admin",)),
    # The whole Kafka path (frame, codec, handlers, core, group services) in process,
    # with a sentinel connection that must stay served: tests/reliability/kafka_fuzz.py.
    "kafka": Target("kafka", run_kafka, (), KAFKA_SEEDS),
    # whole TANK byte streams through a live in-memory broker (tests/tank/fuzz.py)
    "tank": Target("tank", _tank_fuzz.run, (), _tank_fuzz.SEEDS),
}


def mutate(rng: random.Random, seed: bytes) -> bytes:
    """A random mutation of ``seed``: flips, inserts, deletes, splices, or random bytes."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        pos = rng.randint(0, len(data))
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 2 and data:
            del data[pos:pos + rng.randint(1, 8)]
        elif op == 3:
            data[pos:pos] = bytes([rng.choice(b'|:, =\n{}[]"09\xff\x00')])
        elif op == 4:
            data = bytearray(rng.randbytes(rng.randint(0, 64)))
        else:
            data[pos:pos] = data[: rng.randint(0, len(data))]
    return bytes(data)
