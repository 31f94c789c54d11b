"""The codec's specialised hot paths (``broker.kafka.codec.fast``) against the table-driven
walk they unroll: a Produce request read either way is the same request (and the same
refusal when malformed), a Fetch response written either way is the same bytes, in every
version each covers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.kafka import codec as c
from broker.kafka.codec.apis import FETCH, PRODUCE
from broker.kafka.codec.fast import FETCH_FAST, PRODUCE_FAST, parse_produce, write_fetch
from broker.kafka.codec.primitives import Malformed, Reader, Writer
from broker.kafka.codec.schema import read_struct, write_struct

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
RECORDS_51 = (c.Record(0, -1, b"key0", b"value-0"), c.Record(1, -1, None, b"value-1"))


def hdr(key: int, version: int) -> c.RequestHeader:
    return c.RequestHeader(key, version, 3, "kp")


def table_read_produce(body: bytes, version: int) -> object:
    r = Reader(body)
    try:
        request = read_struct(PRODUCE.request, r, version, False, header=hdr(0, version))
        r.end("body")
    except Malformed:
        return Malformed
    return request


def fast_read_produce(body: bytes, version: int) -> object:
    r = Reader(body)
    try:
        request = parse_produce(hdr(0, version), r)
        r.end("body")
    except Malformed:
        return Malformed
    return request


def table_write_fetch(response: c.FetchResponse, version: int) -> bytes:
    w = Writer()
    write_struct(FETCH.response, w, response, version, False)
    return w.getvalue()


def fast_write_fetch(response: c.FetchResponse, version: int) -> bytes:
    parts: list[bytes] = []
    write_fetch(parts, response, version)
    return b"".join(parts)


produce_requests = st.builds(
    lambda tid, acks, timeout, topics: (tid, acks, timeout, topics),
    st.one_of(st.none(), st.text(max_size=5)), st.integers(-1, 1), st.integers(0, 2**31 - 1),
    st.lists(st.tuples(st.text(min_size=1, max_size=6), st.lists(
        st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=40)), max_size=3)),
        max_size=3))


class ProduceFastPathTests:
    @SETTINGS
    @given(produce_requests, st.integers(PRODUCE_FAST[0], PRODUCE_FAST[1]))
    def test_the_same_request(self, parts: tuple, version: int) -> None:  # type: ignore[type-arg]
        """A request the table writes is read the same by both paths."""
        tid, acks, timeout, topics = parts
        request = c.ProduceRequest(hdr(0, version), acks, timeout, tuple(
            c.ProduceTopic(name, tuple(c.ProducePartition(i, rec) for i, rec in ps))
            for name, ps in topics), tid if version >= 3 else None)
        w = Writer()
        write_struct(PRODUCE.request, w, request, version, False)
        body = w.getvalue()
        assert fast_read_produce(body, version) == table_read_produce(body, version) == request

    @SETTINGS
    @given(st.binary(max_size=80), st.integers(PRODUCE_FAST[0], PRODUCE_FAST[1]))
    def test_the_same_verdict_on_any_bytes(self, body: bytes, version: int) -> None:
        """Random bodies: both paths refuse, or both read the same request."""
        assert fast_read_produce(body, version) == table_read_produce(body, version)

    def test_a_null_record_set_reads_as_empty(self) -> None:
        body = bytes.fromhex("ffff 00007530 00000001 0002 7431 00000001 00000000 ffffffff")
        got = fast_read_produce(body, 0)
        assert got == table_read_produce(body, 0)
        assert got.topics[0].partitions[0].records == b""  # type: ignore[attr-defined]


fetch_partitions = st.builds(
    c.FetchPartitionResponse,
    st.integers(0, 2**31 - 1), st.integers(-1, 100), st.integers(-1, 2**62),
    st.one_of(st.binary(max_size=30), st.none(), st.just(RECORDS_51)),
    st.integers(-1, 2**62), st.integers(-1, 2**62),
    st.one_of(st.none(), st.lists(st.builds(c.AbortedTransaction, st.integers(0, 2**62),
                                            st.integers(0, 2**62)), max_size=2).map(tuple)),
    st.integers(-1, 5))
fetch_responses = st.builds(
    c.FetchResponse,
    st.lists(st.builds(c.FetchTopicResponse, st.text(max_size=6),
                       st.lists(fetch_partitions, max_size=3).map(tuple)), max_size=3).map(tuple),
    st.integers(0, 1000), st.integers(-1, 100), st.integers(0, 2**31 - 1))


class FetchFastPathTests:
    @SETTINGS
    @given(fetch_responses, st.integers(FETCH_FAST[0], FETCH_FAST[1]))
    def test_the_same_bytes(self, response: c.FetchResponse, version: int) -> None:
        """Any response, in any version the fast path covers: the table's bytes."""
        if version >= 4 and any(not isinstance(p.records, bytes | None)
                                for t in response.topics for p in t.partitions):
            version = 3  # Records objects are written as magic 0/1 sets only (v0-v3)
        assert fast_write_fetch(response, version) == table_write_fetch(response, version)

    @pytest.mark.parametrize("version", range(FETCH_FAST[0], FETCH_FAST[1] + 1))
    def test_the_frame_is_the_fast_paths(self, version: int) -> None:
        """``encode_response`` uses the fast path there (its frame is the table's bytes
        behind the head)."""
        response = c.FetchResponse((c.FetchTopicResponse("t1", (
            c.FetchPartitionResponse(0, 0, 9, b"x" * 20, 9, 0, None, -1),)),), 1, 0, 0)
        frame = c.encode_response(hdr(1, version), response)
        assert frame[8:] == table_write_fetch(response, version)
