"""Property tests: random and mutated bytes into the parser and the MessageSet decoder only
ever give a result of the codec's kinds (a request, ``UnsupportedRequest``,
``MalformedRequest``; records or ``CorruptMessageSet``), never another exception; the
splitter gives the same frames however the stream is cut."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka import codec as c
from tests.kafka.test_messages import MSGSET_51, MSGSET_52, WRAPPERS, wrapper
from tests.kafka.test_requests import BUILT_REQUESTS, GOLDEN_REQUESTS
from tests.kafka.test_schema import request_frames

BODIES = [frame[4:] for _, frame, _ in GOLDEN_REQUESTS] + [body for _, body, _ in BUILT_REQUESTS]
EVERY_API = request_frames()  # every API and version of the tables, flexible ones included
SETS = [MSGSET_51, MSGSET_52] + [data for _, data, _, _ in WRAPPERS]
RESULT_KINDS = (c.UnsupportedRequest, c.MalformedRequest)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn, corpus: list[bytes]) -> bytes:
    """A corpus entry with a few bytes flipped, inserted, deleted or overwritten by
    interesting integers (0, -1, huge)."""
    data = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "int"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and pos < len(data):
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "int":
            width = draw(st.sampled_from([2, 4, 8]))
            value = draw(st.sampled_from([0, -1, -2, 1, 2**(8 * width - 1) - 1]))
            data[pos:pos + width] = value.to_bytes(width, "big", signed=True)
    return bytes(data)


def check_request(body: bytes) -> None:
    result = c.parse_request(body)
    assert isinstance(result, c.Request) or isinstance(result, RESULT_KINDS), result


def check_set(data: bytes) -> None:
    try:
        records = c.decode_message_set(data)
    except c.CorruptMessageSet:
        return
    assert all(isinstance(r, c.Record) for r in records)


class ParserFuzzTests:
    @SETTINGS
    @given(st.binary(max_size=200))
    def test_random_bodies(self, body: bytes) -> None:
        """Random bytes parse into a result kind, never an exception."""
        check_request(body)

    @SETTINGS
    @given(st.sampled_from(sorted(c.SUPPORTED_VERSIONS)), st.integers(0, 13),
           st.binary(max_size=120))
    def test_random_bodies_of_known_apis(self, key: int, version: int, rest: bytes) -> None:
        """A valid header for a known api (v1, or v2 with a tagged-fields byte, which the
        random bytes may continue), then random bytes: a result kind."""
        check_request(key.to_bytes(2, "big") + version.to_bytes(2, "big") + b"\x00\x00\x00\x01"
                      + b"\xff\xff" + rest)

    @SETTINGS
    @given(mutated(EVERY_API))
    def test_mutated_requests_of_every_api(self, body: bytes) -> None:
        """Every API and version of the tables (flexible headers and bodies, tagged
        fields), mutated: a result kind."""
        check_request(body)

    def test_every_api_frame_parses(self) -> None:
        """The corpus itself is valid: each frame parses into a request."""
        for body in EVERY_API:
            assert isinstance(c.parse_request(body), c.Request), body[:4].hex()

    @SETTINGS
    @given(mutated(BODIES))
    def test_mutated_goldens(self, body: bytes) -> None:
        """Golden requests with mutations: a result kind."""
        check_request(body)


class MessageSetFuzzTests:
    @SETTINGS
    @given(st.binary(max_size=200))
    def test_random_sets(self, data: bytes) -> None:
        """Random bytes decode into records or a ``CorruptMessageSet``."""
        check_set(data)

    @SETTINGS
    @given(mutated(SETS))
    def test_mutated_sets(self, data: bytes) -> None:
        """Golden and compressed sets with mutations: records or ``CorruptMessageSet``
        (mutations mostly break CRCs; the next tests go past them)."""
        check_set(data)

    @SETTINGS
    @given(st.sampled_from([0, 1]), st.sampled_from([0, 1, 2, 3, 4, 7]), st.binary(max_size=150))
    def test_crc_fixed_wrappers(self, magic: int, codec: int, value: bytes) -> None:
        """Wrappers with a correct CRC around random compressed bytes reach the
        decompressors: records or ``CorruptMessageSet``."""
        check_set(wrapper(magic, codec, value))

    @SETTINGS
    @given(st.sampled_from(WRAPPERS), st.data())
    def test_mutated_compressed_values(self, golden: tuple, data: st.DataObject) -> None:
        """A golden wrapper's compressed value mutated, then re-wrapped with a correct CRC
        (same magic and codec): records or ``CorruptMessageSet``."""
        _, whole, _, _ = golden
        magic, attributes = whole[16], whole[17]
        value_at = 12 + 4 + 2 + (8 if magic == 1 else 0) + 4 + 4
        check_set(wrapper(magic, attributes, data.draw(mutated([whole[value_at:]]))))


class SplitterFuzzTests:
    @SETTINGS
    @given(st.lists(st.integers(1, 64), min_size=1, max_size=40))
    def test_any_cut(self, cuts: list[int]) -> None:
        """The golden stream cut at random places gives the golden frames in order."""
        stream = b"".join(frame for _, frame, _ in GOLDEN_REQUESTS)
        splitter, frames, pos, i = c.FrameSplitter(), [], 0, 0
        while pos < len(stream):
            step = cuts[i % len(cuts)]
            frames.extend(splitter.feed(stream[pos:pos + step]))
            pos, i = pos + step, i + 1
        assert frames == [frame[4:] for _, frame, _ in GOLDEN_REQUESTS]
