"""The Kafka connection: framing, response order, ApiVersions, closing on bad input,
half-close, over an in-memory broker (``tests.kafka.harness``). Expected bytes are written
out by hand from kafka-wire-notes (§1.1's ApiVersions table, §2.2's framing rules)."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred

from broker.kafka.codec import ApiKey, MetadataResponse
from tests.kafka.harness import Harness, i16, i32, i64, request, string

# What the handlers serve, by api key: (key, min, max). ApiVersions is read up to v3.
ADVERTISED = [(0, 0, 9), (1, 0, 12), (2, 0, 7), (3, 0, 12), (8, 0, 9), (9, 0, 9), (10, 0, 4),
              (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5), (15, 0, 6), (16, 0, 5),
              (17, 0, 1), (18, 0, 3), (19, 0, 7), (20, 0, 6), (21, 0, 2), (22, 0, 4),
              (29, 1, 3), (30, 1, 3), (31, 1, 3), (32, 0, 4),
              (35, 0, 4), (36, 0, 2), (37, 0, 3), (42, 0, 2), (44, 0, 1), (47, 0, 0), (60, 0, 1),
              (68, 0, 1), (69, 0, 1)]


def api_versions_body(error: int) -> bytes:
    return i16(error) + i32(len(ADVERTISED)) + b"".join(
        i16(k) + i16(lo) + i16(hi) for k, lo, hi in ADVERTISED)


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


class ApiVersionsTests:
    def test_the_newest_data_versions_come_with_init_producer_id(self) -> None:
        """Clients that see Produce v8+, Fetch v7+ or ListOffsets v5+ take the broker for
        Kafka 1.1+ and turn idempotence on by default: those versions are advertised
        exactly when InitProducerId is (else kafka-python at its defaults cannot produce)."""
        from broker.kafka.handlers import data
        from broker.kafka.handlers.dispatch import CLASSIC_ERA, advertised_versions

        advertised = advertised_versions()
        expected = data.VERSIONS if ApiKey.INIT_PRODUCER_ID in advertised \
            else {k: CLASSIC_ERA[k] for k in data.VERSIONS}
        assert {k: advertised[k] for k in expected} == expected

    def test_v0_lists_the_supported_table(self, h):
        conn = h.connect()
        assert conn.call(18, 0) == api_versions_body(0)

    @pytest.mark.parametrize("version", [1, 2])
    def test_v1_and_v2_add_the_throttle(self, h, version):
        conn = h.connect()
        assert conn.call(18, version) == api_versions_body(0) + i32(0)

    def test_v3_is_answered_directly(self, h):
        """librdkafka's v3 (header v2, compact strings) gets the v3 layout: response header
        v0, compact array of (key, min, max, no tags), throttle, no tags."""
        conn = h.connect()
        # v3 request as librdkafka sends it: header v2 (+ tagged fields), compact strings.
        body = b"\x00" + b"\x0dconfluent-ka" + b"\x052.16" + b"\x00"
        expected = i16(0) + bytes([len(ADVERTISED) + 1]) + b"".join(
            i16(k) + i16(lo) + i16(hi) + b"\x00" for k, lo, hi in ADVERTISED) + i32(0) + b"\x00"
        assert conn.call(18, 3, body) == expected
        assert not conn.closed

    @pytest.mark.parametrize("version", [4, 5])
    def test_a_higher_version_gets_error_35_in_the_v0_layout(self, h, version):
        """Kafka 4's Java client sends v4 (not read: its body may be anything); it retries
        with the highest version the list offers after error 35."""
        conn = h.connect()
        body = b"\x00" + b"\x0dconfluent-ka" + b"\x062.16" + b"\x00"
        assert conn.call(18, version, body) == api_versions_body(35)
        assert not conn.closed


class FramingTests:
    def test_every_chunk_size(self, h):
        frames = request(18, 0, 1) + request(3, 0, 2, i32(0)) + request(18, 0, 3)
        for size in (1, 2, 3, 5, 7, 13, len(frames)):
            conn = h.connect()
            for i in range(0, len(frames), size):
                conn.send_raw(frames[i:i + size])
            got = conn.responses()
            assert [cid for cid, _ in got] == [1, 2, 3]
            assert got[0][1] == api_versions_body(0)

    def test_an_unknown_api_key_closes_after_the_earlier_responses(self, h):
        conn = h.connect()
        conn.send_raw(request(18, 0, 1) + request(4, 0, 2) + request(18, 0, 3))
        assert [cid for cid, _ in conn.responses()] == [1]
        assert conn.closed

    def test_a_version_above_the_codec_closes(self, h):
        conn = h.connect()
        conn.send_raw(request(0, 10, 1, b"\x00" * 20))  # Produce v10: no table to answer in
        assert conn.responses() == []
        assert conn.closed

    def test_init_producer_id_and_produce_v3_in_their_layouts(self, h):
        """InitProducerId is served: without a producer id service (this harness) it is
        COORDINATOR_NOT_AVAILABLE (15, retriable) in its own layout, and the connection
        stays. Produce v3+ (record batches v2) is served: a null set is answered with
        error 0."""
        conn = h.connect()
        assert conn.call(22, 0, string(None) + i32(1000)) == i32(0) + i16(15) + i64(-1) + i16(-1)
        body = string(None) + i16(1) + i32(1000) + i32(1) + string("t1") + i32(1) + i32(0) \
            + i32(-1)
        assert conn.call(0, 3, body) == (i32(1) + string("t1") + i32(1) + i32(0) + i16(0)
                                         + i64(-1) + i64(-1) + i32(0))
        assert not conn.closed
        assert conn.call(18, 0) == api_versions_body(0)

    def test_a_transaction_api_is_answered_35(self, h):
        """No transactions here: EndTxn (not offered by ApiVersions) sent anyway gets
        UNSUPPORTED_VERSION in its own layout (throttle, error), and the connection stays."""
        conn = h.connect()
        body = string("tx-1") + i64(7) + i16(0) + b"\x01"
        assert conn.call(26, 1, body) == i32(0) + i16(35)
        assert not conn.closed

    def test_a_malformed_body_closes(self, h):
        conn = h.connect()
        conn.send_raw(request(3, 0, 1, i32(5)))  # five topic names promised, none sent
        assert conn.responses() == []
        assert conn.closed

    def test_an_oversized_or_negative_frame_closes_only_that_connection(self, h):
        big = h.connect()
        big.send_raw(i32(16 * 1024 * 1024 + 1) + b"\x00" * 8)
        assert big.closed
        negative = h.connect()
        negative.send_raw(i32(-5))
        assert negative.closed
        other = h.connect()
        assert other.call(18, 0) == api_versions_body(0)

    def test_a_size_that_promises_more_waits_for_it(self, h):
        conn = h.connect()
        frame = request(18, 0, 1)
        conn.send_raw(frame[:-1])
        assert conn.responses() == []
        conn.send_raw(frame[-1:])
        assert [cid for cid, _ in conn.responses()] == [1]


class OrderTests:
    def test_a_waiting_response_holds_back_later_ones(self, h, monkeypatch):
        """Responses leave in request order even when the first one waits; the request
        behind it has already run."""
        gate: Deferred = Deferred()
        ran = []

        def slow(ctx, req):
            ran.append("slow")
            return gate.addCallback(lambda _: MetadataResponse((), ()))

        conn = h.connect()
        conn.proto.handlers.table[type(_metadata_request())] = slow
        conn.send_raw(request(3, 0, 1, i32(0)) + request(18, 0, 2))
        assert ran == ["slow"]
        assert conn.responses() == []
        gate.callback(None)
        h.pump()
        assert [cid for cid, _ in conn.responses()] == [1, 2]

    def test_half_close_answers_everything_then_closes(self, h):
        gate: Deferred = Deferred()
        conn = h.connect()
        conn.proto.handlers.table[type(_metadata_request())] = (
            lambda ctx, req: gate.addCallback(lambda _: MetadataResponse((), ())))
        conn.send_raw(request(18, 0, 1) + request(3, 0, 2, i32(0)) + request(18, 0, 3)
                      + request(18, 0, 4)[:5])
        conn.proto.readConnectionLost()
        assert [cid for cid, _ in conn.responses()] == [1]
        assert not conn.closed
        gate.callback(None)
        h.pump()
        assert [cid for cid, _ in conn.responses()] == [2, 3]
        assert conn.closed

    def test_nothing_outstanding_closes_at_once(self, h):
        conn = h.connect()
        conn.proto.readConnectionLost()
        assert conn.closed


class HandlerBoundaryTests:
    def test_a_handler_bug_answers_minus_one_and_the_connection_stays(self, h, monkeypatch):
        def broken(ctx, req):
            raise RuntimeError("bug")

        conn = h.connect()
        conn.proto.handlers.table[type(_metadata_request())] = broken
        body = conn.call(3, 0, i32(1) + string("t1"))
        # no brokers, one topic: error -1, name t1, no partitions
        assert body == i32(0) + i32(1) + i16(-1) + string("t1") + i32(0)
        assert conn.call(18, 0) == api_versions_body(0)


def _metadata_request():
    from broker.kafka.codec import parse_request

    return parse_request(request(3, 0, 1, i32(0))[4:])


def test_advertised_keys_are_known_to_the_codec():
    """Every advertised api key has a table."""
    assert {k for k, _, _ in ADVERTISED} <= {int(k) for k in ApiKey}
