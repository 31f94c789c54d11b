"""The table-driven codec (``broker.kafka.codec.schema`` over ``apis``' tables): its
flexible primitives (KIP-482), and every table checked against an independent
implementation of Kafka's message definitions: kafka-python 3's JSON-driven codec (it
ships Kafka's own ``*Request.json`` / ``*Response.json``). For every API and every
version, a message kafka-python encodes with a value in every field is read by our tables
and written back byte for byte (so no field is missing, extra, misplaced or mis-typed),
and hand-written goldens pin the layouts the data path hands over (Produce v3/v9, Fetch
v4/v12, ListOffsets v7, InitProducerId v4)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

from broker.kafka import codec as c
from broker.kafka.codec.apis import SCHEMAS
from broker.kafka.codec.primitives import Malformed, Reader, Writer
from broker.kafka.codec.schema import read_struct, write_struct
from tests.kafka.test_requests import h

kafka_protocol = pytest.importorskip("kafka.protocol.api_message")


# ---------------------------------------------------------------- kafka-python's messages

def _kafka_python_classes() -> dict[tuple[int, str], Any]:
    import kafka.protocol as kp

    found: dict[tuple[int, str], Any] = {}
    for package in ("admin", "consumer", "metadata", "producer"):
        pkg = importlib.import_module(f"kafka.protocol.{package}")
        for mod in pkgutil.iter_modules(pkg.__path__):
            module = importlib.import_module(f"{pkg.__name__}.{mod.name}")
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, kafka_protocol.ApiMessage) \
                        and getattr(value, "_json", None) is not None:
                    found[(value.API_KEY, value.type)] = value
    sasl = importlib.import_module("kafka.protocol.sasl")
    for value in vars(sasl).values():
        if isinstance(value, type) and issubclass(value, kafka_protocol.ApiMessage) \
                and getattr(value, "_json", None) is not None:
            found[(value.API_KEY, value.type)] = value
    assert kp
    return found


KP = _kafka_python_classes()


def _in(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        low, high = spec.split("-")
        return int(low) <= version <= int(high)
    return version == int(spec)


def _sample(fields: list[dict[str, Any]], container: Any, version: int, flexible: bool,
            seed: int) -> Any:
    """A kafka-python data object with a distinct non-default value in every field the
    version carries (tagged fields too, in flexible versions)."""
    values: dict[str, Any] = {}
    for i, f in enumerate(fields):
        if not _in(f.get("versions"), version):
            continue
        if f.get("tag") is not None and not flexible:
            continue
        if not _in(f.get("taggedVersions", f.get("versions")), version) and "tag" in f:
            continue
        name = _snake(f["name"])
        t = f["type"]
        k = seed + i
        nullable = _in(f.get("nullableVersions"), version)
        if t.startswith("[]"):
            item = t[2:]
            if f.get("fields") is not None:
                sub = getattr(container, item)
                values[name] = [_sample(f["fields"], sub, version, flexible, k * 7 + j)
                                for j in range(2)]
            else:
                values[name] = [_scalar(item, k + j, False) for j in range(2)]
        elif f.get("fields") is not None:
            sub = getattr(container, t)
            values[name] = _sample(f["fields"], sub, version, flexible, k * 5)
        elif name == "error_code" and container.__name__.startswith("ApiVersions"):
            values[name] = 0  # an error makes clients read ApiVersions in the v0 layout
        elif name.endswith("authorized_operations"):
            values[name] = {2, 3, 5}  # kafka-python holds this one as a set of bits
        else:
            values[name] = _scalar(t, k, nullable)
    return container(**values)


def _scalar(t: str, k: int, nullable: bool) -> Any:
    if nullable and k % 3 == 0 and t != "records":  # a null record set reads as b""
        return None
    if t == "int8":
        return k % 100 + 1
    if t in ("int16", "uint16"):
        return k % 30000 + 1
    if t in ("int32", "uint32"):
        return 1000 + k
    if t == "int64":
        return 10**10 + k
    if t == "float64":
        return 1.5
    if t == "bool":
        return True
    if t == "string":
        return f"s{k}"
    if t in ("bytes", "records"):
        return bytes([k % 256]) * 3
    if t == "uuid":
        import uuid
        return uuid.UUID(int=k + 1)
    raise AssertionError(t)


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (not name[i - 1].isupper() or
                                   (i + 1 < len(name) and name[i + 1].islower())):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _cases() -> list[tuple[str, int, int, str]]:
    cases = []
    for key, schema in SCHEMAS.items():
        low, high = schema.version_range
        for kind in ("request", "response"):
            cls = KP.get((key, kind))
            if cls is None:
                continue
            for v in range(low, min(high, cls.max_version) + 1):
                cases.append((schema.name, key, v, kind))
    return cases


CASES = _cases()


def request_frames() -> list[bytes]:
    """One request frame (no size prefix) per API and version of the codec's tables, every
    field set, as kafka-python writes them (header v1, or v2 in flexible versions): the
    fuzz corpus of every API (tests/kafka/test_fuzz.py, tests/reliability/kafka_fuzz.py)."""
    frames = []
    for _, key, version, kind in CASES:
        if kind != "request":
            continue
        cls = KP[(key, kind)]
        message = _sample(cls.json["fields"], cls, version, cls.flexible_version_q(version), 2)
        message.with_header(correlation_id=version + 1, client_id="fz")
        frames.append(bytes(message.encode(version=version, header=True)))
    return frames


class KafkaPythonCrossCheckTests:
    @pytest.mark.parametrize("name, key, version, kind", CASES,
                             ids=[f"{n} v{v} {k}" for n, _, v, k in CASES])
    def test_read_then_write_is_byte_exact(self, name: str, key: int, version: int,
                                           kind: str) -> None:
        """kafka-python's encoding of a message with every field set, read by our table
        and written back, is the same bytes; a request read whole by ``parse_request``
        (header v1 or v2 by flexibility)."""
        cls = KP[(key, kind)]
        schema = SCHEMAS[key]
        flexible = schema.is_flexible(version)
        assert cls.flexible_version_q(version) == flexible
        message = _sample(cls.json["fields"], cls, version, flexible, 1)
        body = bytes(message.encode(version=version))
        struct = schema.request if kind == "request" else schema.response
        extra = {"header": c.RequestHeader(key, version, 1, "kp")} if kind == "request" else {}
        r = Reader(body)
        obj = read_struct(struct, r, version, flexible, **extra)
        r.end("body")
        w = Writer()
        write_struct(struct, w, obj, version, flexible)
        assert w.getvalue() == body
        if kind == "request":
            message.with_header(correlation_id=9, client_id="kp")
            parsed = c.parse_request(message.encode(header=True))
            assert not isinstance(parsed, c.MalformedRequest | c.UnsupportedRequest), parsed
            assert parsed.header == c.RequestHeader(key, version, 9, "kp")

    @pytest.mark.parametrize("name, key, version, kind",
                             [x for x in CASES if x[3] == "response"],
                             ids=[f"{n} v{v}" for n, _, v, k in CASES if k == "response"])
    def test_kafka_python_reads_our_frames(self, name: str, key: int, version: int,
                                           kind: str) -> None:
        """Our ``encode_response`` frame (size, response header v0/v1, body) is read by
        kafka-python as a whole, header included, to the end."""
        cls = KP[(key, kind)]
        schema = SCHEMAS[key]
        flexible = schema.is_flexible(version)
        body = bytes(_sample(cls.json["fields"], cls, version, flexible, 3).encode(
            version=version))
        obj = read_struct(schema.response, Reader(body), version, flexible)
        frame = c.encode_response(c.RequestHeader(key, version, 77, None), obj)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert frame[4:8] == (77).to_bytes(4, "big")
        header_v1 = flexible and key != c.ApiKey.API_VERSIONS
        if header_v1:
            assert frame[8] == 0  # response header v1: no tagged fields
        decoded = cls.decode(frame[9 if header_v1 else 8:], version=version)
        decoded._header = None  # decode leaves it unset; encode reads it
        assert bytes(decoded.encode(version=version)) == body


# ---------------------------------------------------------------- primitives

class FlexiblePrimitiveTests:
    @pytest.mark.parametrize("value, raw", [
        (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
        (2**31 - 1, "ffffffff07"), (2**32 - 1, "ffffffff0f")])
    def test_uvarint(self, value: int, raw: str) -> None:
        """Unsigned varints as KIP-482 writes them, both ways."""
        w = Writer()
        w.uvarint(value)
        assert w.getvalue() == h(raw)
        assert Reader(h(raw)).uvarint("n") == value

    def test_a_varint_longer_than_5_bytes_is_malformed(self) -> None:
        with pytest.raises(Malformed, match="longer than 5 bytes"):
            Reader(h("ffffffffff01")).uvarint("n")

    def test_compact_nulls(self) -> None:
        """Length 0 is null, 1 is empty."""
        r = Reader(h("00 01 00 01 03 6869"))
        assert r.compact_nullable_string("a") is None
        assert r.compact_nullable_string("b") == ""
        assert r.compact_nullable_bytes("c") is None
        assert r.compact_nullable_bytes("d") == b""
        assert r.compact_string("e") == "hi"
        with pytest.raises(Malformed, match="null where a string is required"):
            Reader(h("00")).compact_string("f")

    def test_unknown_tags_are_skipped_and_known_ones_read(self) -> None:
        """A tagged-fields section: tag 0 known (read from its own bytes), tag 5 unknown
        (skipped by its size)."""
        r = Reader(h("02 00 02 0001 05 03 aabbcc ff"))
        found = r.tagged_fields({0: lambda sub: sub.int16("x")}, "t")
        assert found == {0: 1}
        assert r.remaining() == 1

    def test_tags_out_of_order_are_malformed(self) -> None:
        with pytest.raises(Malformed, match="tags must ascend"):
            Reader(h("02 05 00 01 00")).tagged_fields({}, "t")

    def test_a_request_with_an_unknown_tag_in_its_header_and_body(self) -> None:
        """InitProducerId v2 (flexible) with unknown tags after the header and at the end
        of the body: read, tags skipped."""
        frame = h("0016 0002 00000005 0002 6b70 01 07 01 ff"
                  "00 00007530 01 09 02 abcd")
        assert c.parse_request(frame) == c.InitProducerIdRequest(
            c.RequestHeader(22, 2, 5, "kp"), None, 30000)


# ---------------------------------------------------------------- goldens of the handoff

def hdr(key: int, version: int, corr: int = 1) -> c.RequestHeader:
    return c.RequestHeader(key, version, corr, "kp")


BATCH = h("00" * 61)  # an opaque record batch: the codec does not look inside


class HandoffGoldenTests:
    def test_produce_v3_request(self) -> None:
        """v3 adds the transactional id (null) before acks; records stay opaque bytes."""
        frame = h("0000 0003 00000001 0002 6b70 ffff ffff 00007530 00000001 0002 7431"
                  "00000001 00000000 0000003d") + BATCH
        assert c.parse_request(frame) == c.ProduceRequest(hdr(0, 3), -1, 30000, (
            c.ProduceTopic("t1", (c.ProducePartition(0, BATCH),)),), None)

    def test_produce_v9_request_is_flexible(self) -> None:
        """v9: header v2 (client id still int16-length, then tags), compact strings and
        arrays, compact records, a tags byte closing every struct."""
        frame = h("0000 0009 00000001 0002 6b70 00 00 ffff 00007530 02 03 7431 02 00000000"
                  "3e") + BATCH + h("00 00 00")
        assert c.parse_request(frame) == c.ProduceRequest(hdr(0, 9), -1, 30000, (
            c.ProduceTopic("t1", (c.ProducePartition(0, BATCH),)),), None)

    def test_produce_v9_response(self) -> None:
        """Response header v1 (a tags byte after the correlation id); v5's log start
        offset, v8's record errors and error message."""
        response = c.ProduceResponse((c.ProduceTopicResponse("t1", (
            c.ProducePartitionResponse(0, 0, 5, -1, 0, (), None),)),))
        assert c.encode_response(hdr(0, 9), response) == h(
            "00000031 00000001 00 02 03 7431 02 00000000 0000 0000000000000005"
            "ffffffffffffffff 0000000000000000 01 00 00 00 00000000 00")

    def test_fetch_v4_request_and_response(self) -> None:
        """v4 adds the isolation level; its response the last stable offset and the
        aborted transactions (null)."""
        frame = h("0001 0004 00000001 0002 6b70 ffffffff 000001f4 00000001 03200000 01"
                  "00000001 0002 7431 00000001 00000000 0000000000000007 00100000")
        assert c.parse_request(frame) == c.FetchRequest(
            hdr(1, 4), -1, 500, 1, 50 << 20, (c.FetchTopic("t1", (
                c.FetchPartition(0, 7, 1 << 20),)),), isolation_level=1)
        response = c.FetchResponse((c.FetchTopicResponse("t1", (
            c.FetchPartitionResponse(0, 0, 9, BATCH, last_stable_offset=9),)),))
        assert c.encode_response(hdr(1, 4), response) == h(
            "0000006f 00000001 00000000 00000001 0002 7431 00000001 00000000 0000"
            "0000000000000009 0000000000000009 ffffffff 0000003d") + BATCH

    def test_fetch_v12_request(self) -> None:
        """v12: flexible; session id/epoch (v7), the current leader epoch (v9), the last
        fetched epoch (v12), log start offset (v5), forgotten topics (v7), rack (v11)."""
        frame = h("0001 000c 00000001 0002 6b70 00 ffffffff 000001f4 00000001 03200000 00"
                  "0000000a 00000002 02 03 7431 02 00000000 00000003 0000000000000007"
                  "ffffffff ffffffffffffffff 00100000 00 00 02 03 7432 02 00000001 00"
                  "04 723161 00")
        assert c.parse_request(frame) == c.FetchRequest(
            hdr(1, 12), -1, 500, 1, 50 << 20, (c.FetchTopic("t1", (
                c.FetchPartition(0, 7, 1 << 20, current_leader_epoch=3),)),),
            session_id=10, session_epoch=2,
            forgotten_topics=(c.ForgottenTopic("t2", (1,)),), rack_id="r1a")

    def test_fetch_v12_response_with_a_tagged_current_leader(self) -> None:
        """A tagged field differing from its default is written (tag 1: current leader,
        7 bytes with its own tags byte); aborted transactions and the preferred read
        replica (v11) in place."""
        response = c.FetchResponse((c.FetchTopicResponse("t1", (
            c.FetchPartitionResponse(
                0, 6, 9, None, 9, 0, (c.AbortedTransaction(4, 2),), -1,
                current_leader=c.LeaderIdAndEpoch(2, 5)),)),), session_id=3)
        assert c.encode_response(hdr(1, 12), response) == h(
            "00000057 00000001 00 00000000 0000 00000003 02 03 7431 02 00000000 0006"
            "0000000000000009 0000000000000009 0000000000000000"
            "02 0000000000000004 0000000000000002 00"
            "ffffffff 00 01 01 09 00000002 00000005 00 00 00")

    def test_list_offsets_v7(self) -> None:
        """v7 (flexible): the max-timestamp query (-3); the response's leader epoch."""
        frame = h("0002 0007 00000001 0002 6b70 00 ffffffff 00 02 03 7431 02 00000000"
                  "ffffffff fffffffffffffffd 00 00 00")
        assert c.parse_request(frame) == c.ListOffsetsRequest(hdr(2, 7), -1, (
            c.ListOffsetsTopic("t1", (c.ListOffsetsPartition(0, -3),)),))
        response = c.ListOffsetsResponse((c.ListOffsetsTopicResponse("t1", (
            c.ListOffsetsPartitionResponse(0, 0, 41, 1700000000000, leader_epoch=0),)),))
        assert c.encode_response(hdr(2, 7), response) == h(
            "0000002b 00000001 00 00000000 02 03 7431 02 00000000 0000 0000018bcfe56800"
            "0000000000000029 00000000 00 00 00")

    def test_init_producer_id_v4(self) -> None:
        """v4 (flexible since v2): an idempotent producer (null transactional id) with no
        id yet; the response gives id and epoch."""
        frame = h("0016 0004 00000001 0002 6b70 00 00 7fffffff ffffffffffffffff ffff 00")
        assert c.parse_request(frame) == c.InitProducerIdRequest(hdr(22, 4), None, 2**31 - 1)
        assert c.encode_response(hdr(22, 4), c.InitProducerIdResponse(0, 1000, 0)) == h(
            "00000016 00000001 00 00000000 0000 00000000000003e8 0000 00")

    def test_init_producer_id_v0(self) -> None:
        frame = h("0016 0000 00000001 0002 6b70 ffff 0000ea60")
        assert c.parse_request(frame) == c.InitProducerIdRequest(hdr(22, 0), None, 60000)
        assert c.encode_response(hdr(22, 0), c.InitProducerIdResponse(0, 7, 1)) == h(
            "00000014 00000001 00000000 0000 0000000000000007 0001")
