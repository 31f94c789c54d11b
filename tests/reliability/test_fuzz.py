"""Fuzzing (CI-sized): every outside-facing parser raises only its documented exceptions
on arbitrary and mutated input, and the V1 transport answers the same whether a byte
stream arrives whole or split at random points. bench/reliability.py runs >= 1,000,000
inputs per parser."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.fuzz_targets import TARGETS, mutate
from tests.reliability.inmemory import InMemoryBroker


@settings(max_examples=1500, deadline=None)
@given(name=st.sampled_from(sorted(TARGETS)), data=st.binary(max_size=300),
       seed=st.integers(0, 2**32))
def test_parser_raises_only_documented_errors(name: str, data: bytes, seed: int) -> None:
    """Random bytes and mutations of valid inputs never escape as anything but the
    parser's documented error."""
    target = TARGETS[name]
    rng = random.Random(seed)
    for sample in (data, mutate(rng, rng.choice(target.seeds))):
        try:
            target.run(sample)
        except target.allowed:
            pass


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(
    st.sampled_from([b"V1|1|PING|", b"V1|2|PRODUCE|t k:v", b"V1|3|CONSUME|t 0 0",
                     b"V1|4|BOGUS|x", b"V1|5|PRODUCE|t nocolon", b"garbage\r", b"",
                     # a raw batch whose body holds a line feed (docs/protocol.md)
                     b"V1|6|PRODUCE_BATCH|t 0 enc=raw size=14\n\x01\x00\x00\x00\x00"
                     b"\x05\x00\x00\x00he\nlo"]),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b)), max_size=12),
    cuts=st.lists(st.integers(0, 600), max_size=8))
def test_split_reads_give_the_same_replies(tmp_path_factory: pytest.TempPathFactory,
                                           lines: list[bytes], cuts: list[int]) -> None:
    """The same request bytes delivered in one read or split at arbitrary points get the
    same replies (NATS-style split-buffer check), and the connection survives."""
    stream = b"".join(line + b"\n" for line in lines)
    outputs = []
    for pieces in ([stream], _split(stream, cuts)):
        h = InMemoryBroker(tmp_path_factory.mktemp("d") / "data", storage={"fsync": "never"},
                           topics={"t": {"partitions": 1}})
        proto, tr = h.connect()
        for piece in pieces:
            proto.dataReceived(piece)
            h.settle(1)
        h.settle()
        # A PRODUCE reply's hw is the hw when its batch was answered, and how many
        # PRODUCEs share a batch depends on how the bytes arrived: everything else is equal.
        outputs.append(re.sub(rb"(\|OK\|partition=\d+ offset=\d+) hw=-?\d+", rb"\1 hw=*",
                              tr.value()))
        assert not tr.disconnecting
        h.close()
    assert outputs[0] == outputs[1]


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for point in points:
        out.append(data[last:point])
        last = point
    out.append(data[last:])
    return out


def test_v1_codec_never_echoes_more_than_a_short_excerpt(tmp_path: Path) -> None:
    """An error about a huge bad token quotes at most a short excerpt of it."""
    from broker.v1.codec import Codec, CommandError

    with pytest.raises(CommandError) as info:
        Codec().parse_command(b"V1|1|CONSUME|t x" + b"9" * 5000 + b" 0")
    assert len(str(info.value)) < 400


def test_kafka_frames_never_crash_and_other_connections_stay_served() -> None:
    """5,000 Kafka frames (random, and mutated from the notes' goldens) through the whole
    in-process Kafka path: no exception escapes, no handler bug is logged, and a sentinel
    connection with a live group member keeps getting the same answers
    (bench/reliability.py runs 1,000,000)."""
    from tests.reliability.kafka_fuzz import KafkaFuzz

    target = TARGETS["kafka"]
    fuzz = KafkaFuzz()
    rng = random.Random("kafka-ci")
    try:
        for _ in range(5000):
            data = mutate(rng, rng.choice(target.seeds)) if rng.random() < 0.8 \
                else rng.randbytes(rng.randint(0, 200))
            fuzz.run(data)
        fuzz.run(target.seeds[0])
    finally:
        fuzz.close()
