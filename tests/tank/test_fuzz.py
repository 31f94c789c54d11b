"""Random and mutated bytes: the codecs answer with a result or their own error, nothing else."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.tank import client as tc
from broker.tank import codec as sc
from broker.tank.client.wire import split_frames
from tests.tank import goldens as g

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SNAPPY_PRODUCE = tc.build_produce(3, [(b"t1", 0, [tc.Msg(b"x" * 300, b"kk", 1)] * 4)])
SPARSE_PRODUCE = tc.build_produce_with_seqnum(
    6, [(b"t1", 0, 3, [tc.Msg(b"a", seq=3), tc.Msg(b"b", seq=9), tc.Msg(b"c", seq=12)])])
V3_CONSUME = tc.build_consume(1, [(b"t1", 0, 1, 9), (b"t2", 4, 2, 9)], op_flags=1)
SEEDS = g.ALL_REQUESTS + [g.PRODUCE_2, SNAPPY_PRODUCE, SPARSE_PRODUCE, V3_CONSUME]
REPLY_SEEDS = g.ALL_REPLIES


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif data:
            del data[pos]
    return bytes(data)


def server_outcome(data: bytes) -> None:
    """Split, parse, decode every bundle: only requests, CodecError or FrameTooLarge."""
    for item in sc.FrameSplitter(max_frame_size=1 << 16).feed(data):
        if isinstance(item, sc.FrameTooLarge):
            continue
        try:
            req = sc.parse_request(item)
        except sc.CodecError:
            continue
        for topic in getattr(req, "topics", ()):
            for part in getattr(topic, "partitions", ()):
                bundle = getattr(part, "bundle", None)
                if bundle is not None:
                    try:
                        sc.decode_bundle(bundle, max_decompressed=1 << 20)
                    except sc.BundleError:
                        pass


class ServerFuzzTests:
    @FUZZ
    @given(st.binary(max_size=200))
    def test_random_bytes(self, data: bytes) -> None:
        """Random bytes give frames that parse or are refused with CodecError."""
        server_outcome(data)

    @FUZZ
    @given(st.integers(0, 12), st.binary(max_size=120))
    def test_random_payloads(self, msg_id: int, payload: bytes) -> None:
        """Well framed random payloads for every id: a request or a CodecError."""
        server_outcome(sc.encode_frame(msg_id, payload))

    @FUZZ
    @given(mutated(SEEDS))
    def test_mutated_requests(self, data: bytes) -> None:
        """Golden and client-built requests, mutated: a request or a codec error."""
        server_outcome(data)

    @FUZZ
    @given(st.binary(max_size=120))
    def test_random_bundles(self, data: bytes) -> None:
        """Any bytes as a bundle: a DecodedBundle or a BundleError."""
        try:
            sc.decode_bundle(data, max_decompressed=1 << 20)
        except sc.BundleError:
            pass


def client_outcome(data: bytes) -> None:
    """Every decoder on every frame: only results or TankDecodeError."""
    entries = [(b"t1", 0, 0, 64), (b"t1", 1, 5, 64)]
    buf = bytearray(data)
    for msg_id, payload in split_frames(buf):
        for decode in (lambda p: tc.decode_consume_reply(p, entries),
                       lambda p: tc.decode_produce_reply(p, [(b"t1", 0, [])]),
                       tc.decode_discover_partitions_reply, tc.decode_create_topic_reply,
                       lambda p, m=msg_id: tc.reply_request_id(m, p)):
            try:
                decode(payload)
            except tc.TankDecodeError:
                pass


class ClientFuzzTests:
    @FUZZ
    @given(mutated(REPLY_SEEDS))
    def test_mutated_replies(self, data: bytes) -> None:
        """Golden replies, mutated: the client's decoders decode or raise TankDecodeError."""
        client_outcome(data)


def test_fuzzed_streams_through_a_live_broker() -> None:
    """Acceptance 5, CI-sized: 3,000 mutated and random TANK byte streams through the
    real connection, handlers and store (tests/tank/fuzz.py): nothing escapes, nothing is
    logged at ERROR, and the witness connection keeps getting its replies (checked every
    500 inputs and at the end). bench/reliability.py runs 1,000,000."""
    import random

    from tests.reliability.fuzz_targets import TARGETS, mutate
    from tests.tank import fuzz

    target = TARGETS["tank"]
    rng = random.Random(20)
    for _ in range(3000):
        data = mutate(rng, rng.choice(target.seeds)) if rng.random() < 0.8 \
            else rng.randbytes(rng.randint(0, 200))
        target.run(data)
    assert fuzz._bench is not None
    fuzz._bench.check_witness()
