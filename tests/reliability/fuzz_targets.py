"""Fuzz targets: every parser that reads bytes from outside, with the exceptions it is
documented to raise. Anything else escaping is a crash. Shared by tests/reliability/
test_fuzz.py (hypothesis, CI-sized) and bench/reliability.py (a mutation loop, >= 1,000,000
inputs per parser).

Must not import: the reactor.
"""

from __future__ import annotations

import json
import random
import select
import socket
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import xxhash
from twisted.internet.testing import StringTransport as _StringTransport

from access import InvalidAcl
from broker.client.codec import ProtocolViolation, parse_messages, parse_reply
from broker.errors import BadRequest
from broker.iggy.codec import decode_request
from broker.iggy.codec.permissions import GlobalPermissions as _GlobalPermissions
from broker.iggy.codec.permissions import Permissions as _Permissions
from broker.iggy.codec.permissions import StreamPermissions as _StreamPermissions
from broker.iggy.codec.permissions import TopicPermissions as _TopicPermissions
from broker.iggy.codec.permissions import permissions_field as _permissions_field
from broker.iggy.errors import IggyError
from broker.kafka.codec.batches import (
    BatchRecord,
    CorruptRecordBatch,
    RecordBatch,
    UnsupportedBatch,
    crc32c,
    encode_batch,
    split_batches,
)
from broker.kafka.mapping import (
    InvalidTimestamp,
    KeyTooLarge,
    ValueTooLarge,
    framed_raw_batches,
    record_batches,
)
from broker.peer_links import PeerProtocol as _PeerProtocol
from broker.peer_links import RawReply as _RawReply
from broker.peer_links import log as _peer_log
from broker.peer_links import parse_pull_raw_reply as _parse_pull_raw_reply
from broker.services.acls import decode_acls
from broker.services.group_router import group_view_from, groups_from
from broker.v1.codec import Codec, CommandError, ProduceBatch
from broker.v1.codec.framing import TOO_LONG, LineFramer
from broker.v1.codec.parse import _decode_batch_py, decode_batch
from broker.v1.codec.scan import _scan_produce_py
from data import speedups as _speedups
from data.format import decode_record, encode_record
from data.idempotence import _producer_runs_py, batch_ids, parse_record_id, producer_record_id
from data.idempotence import producer_runs as _producer_runs
from data.index import sindex_bytes, sindex_from_bytes
from data.store import TopicConfig
from data.writer import StampedBatch as _StampedBatch
from data.writer import _scan_stamped_py
from data.writer import scan_stamped as _scan_stamped
from groups.loader import GroupLog
from groups.store import groups_from_json, offset_metadata_from_json
from replication.errors import ProducerStateError
from replication.producer_state import ProducerStateManager, decode_snapshot, encode_snapshot
from replication.roles import ReplicationCheckpoint
from tests.reliability.kafka_fuzz import KAFKA_SEEDS, KIP848_SEEDS, run_kafka
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


def _v1_batch(data: bytes) -> object:
    """A PRODUCE_BATCH batch (after its base64): the compiled cut and the reference
    agree on every input, the same split or the same refusal."""
    try:
        got: object = decode_batch(data, 4096)
    except BadRequest as exc:
        got = ("BadRequest", str(exc))
    try:
        want: object = _decode_batch_py(data, 4096)
    except BadRequest as exc:
        want = ("BadRequest", str(exc))
    if got != want:
        raise AssertionError(f"compiled cut {got!r} != reference {want!r}")
    return None


class _LaneProbe:
    """The compiled read lane (``broker/v1/_clane.c``) on one socket pair, a connection
    registered clean, as ``broker.v1.lane`` uses it."""

    def __init__(self, clane: object) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.fd = self.ours.fileno()
        self.transport = object()
        self.pending: list[object] = []
        self.lane = clane.Lane({self.fd: self.transport}, 1 << 20, 1 << 20)  # type: ignore[attr-defined]
        self.settle()

    def settle(self) -> None:
        self.lane.settle(self.fd, self, self.transport, self.pending)


_LANE: list[_LaneProbe] = []


def _v1_lane(data: bytes) -> object:
    """One read through the compiled read lane: taken exactly when the reference scan
    (``_scan_produce_py``) finds one plain PRODUCE line and nothing else, with the same
    fields; otherwise handed back byte for byte. (Nothing when the lane is not built.)"""
    if not data or len(data) > 60000:
        return None
    if not _LANE:
        clane = _speedups.load("broker.v1._clane")
        if clane is None:
            return None
        _LANE.append(_LaneProbe(clane))
    probe = _LANE[0]
    probe.theirs.sendall(data)
    select.select([probe.ours], [], [], 5)
    _, reads, groups = probe.lane.take([(probe.fd, select.EPOLLIN)], None, True, False)
    run, pos = _scan_produce_py(data, 0, 1, 1 << 20, 1 << 20)
    one = run[0][:5] if run and pos == len(data) else None
    if groups:
        [(topic, acks, keys, values, slots, _)] = groups
        got = (slots[0][1], topic, keys[0], values[0], acks)
        probe.lane.answer(slots, 0, 0, 0)  # the reply goes out; the connection is clean
        probe.theirs.recv(65536)
        if got != one:
            raise AssertionError(f"the lane took {got!r}, the reference {one!r}")
        return None
    handed = b"".join(chunk for _, chunk in reads)
    while len(handed) < len(data):  # the socket gave it in parts: read the rest
        select.select([probe.ours], [], [], 5)
        handed += probe.ours.recv(65536)
    probe.settle()
    if one is not None or handed != data:
        raise AssertionError(f"the lane handed back {handed[:80]!r}, the reference took {one!r}")
    return None


def _v1_raw_batch(data: bytes) -> object:
    """A V1 byte stream with PRODUCE_BATCH ``enc=raw`` bodies, cut into reads by its own
    bytes, through the server's framing steps (``LineFramer.take_body``,
    ``Codec.body_size``, ``parse_command``, ``with_body``) as ``V1Protocol`` runs them: a
    body is exactly its size, and nothing but ``CommandError`` comes out."""
    framer = LineFramer(256)
    waiting: tuple[bytes, int] | None = None
    step = 1 + (data[0] % 17 if data else 0)
    for at in range(0, len(data), step):
        framer.feed(data[at:at + step])
        while True:
            if waiting is not None:
                line, size = waiting
                body = framer.take_body(size)
                if body is None:
                    break
                waiting = None
            else:
                item = framer.next_request()
                if item is None:
                    break
                if item is TOO_LONG:
                    return None
                line, body = item, None  # type: ignore[assignment]
                try:
                    size = _CODEC.body_size(line, 256)  # type: ignore[arg-type]
                except CommandError:
                    return None  # the protocol closes here
                if size is not None:
                    body = framer.take_body(size)
                    if body is None:
                        waiting = (line, size)  # type: ignore[assignment]
                        break
            try:
                cmd = _CODEC.parse_command(line)  # type: ignore[arg-type]
                if body is not None:
                    if len(body) != size or not isinstance(cmd, ProduceBatch) or cmd.size != size:
                        raise AssertionError(f"body of {len(body)} for {cmd!r}")
                    _CODEC.with_body(cmd, body)
                elif isinstance(cmd, ProduceBatch) and cmd.size is not None:
                    raise AssertionError(f"{cmd!r} has a size and no body was cut")
            except CommandError:
                continue  # refused with a protocol error: an answer, not a crash
        if framer.end_of_read() is not None:
            return None
    return None


def _v1_client(data: bytes) -> object:
    """The Python client reading the broker's answers: each line as a reply, and an OK
    one's ``messages=`` in every form (plain, base64, detail, detail with headers)."""
    for line in data.split(b"\n"):
        reply = parse_reply(line)
        if reply.ok and reply.has("messages"):
            for b64 in (False, True):
                for detail, headers in ((False, False), (True, False), (True, True)):
                    try:
                        parse_messages(reply, 0, b64=b64, detail=detail, headers=headers)
                    except ProtocolViolation:
                        pass
    return None


def _replica_pull_raw(data: bytes) -> object:
    """A leader's answers to a follower's pulls as the follower's connection reads them:
    the bytes after the first (cut where that byte says, so the raw tail is split across reads) to a
    ``PeerProtocol`` with three ``enc=raw`` pulls outstanding; each OK answer parsed into a
    ``PullReply`` and its records checked as ``append_records`` checks them, the compiled
    check and the reference agreeing (the same positions or the same refusal), then scanned
    for idempotent producers' batches as a follower keeping their state does
    (``producer_runs``, compiled and twin agreeing)."""
    proto = _PeerProtocol()
    proto.makeConnection(_StringTransport())
    answers: list[object] = []
    for _ in range(3):
        proto.request_raw(lambda cid: b"").addBoth(answers.append)
    cut, stream = (data[0], data[1:]) if data else (0, b"")
    was = _peer_log.disabled
    _peer_log.disabled = True  # a stream it cannot frame is logged and closed: expected here
    try:
        proto.dataReceived(stream[:cut])
        proto.dataReceived(stream[cut:])
    finally:
        _peer_log.disabled = was
    for answer in answers:
        if not isinstance(answer, _RawReply) or not answer.reply.ok:
            continue
        try:
            pulled = _parse_pull_raw_reply(answer.reply.payload, answer.body)
        except ProtocolViolation:
            continue
        if pulled.data:
            got = _scan_outcome(_scan_stamped, pulled.data, pulled.leo)
            want = _scan_outcome(_scan_stamped_py, pulled.data, pulled.leo)
            if got != want:
                raise AssertionError(f"compiled check {got!r} != reference {want!r}")
            got = _runs_outcome(_producer_runs, pulled.data)
            want = _runs_outcome(_producer_runs_py, pulled.data)
            if got != want:
                raise AssertionError(f"compiled runs {got!r} != reference {want!r}")
    proto.connectionLost(None)
    return None


def _scan_outcome(scan: Callable[..., object], raw: bytes, first: int) -> object:
    try:
        batch: _StampedBatch = scan(raw, first & ((1 << 62) - 1), 0)  # type: ignore[assignment]
    except ValueError as exc:
        return ("ValueError", str(exc))
    return (batch.count, batch.ends, batch.max_timestamp, batch.first_timestamp)


def _runs_outcome(scan: Callable[[bytes], object], raw: bytes) -> object:
    try:
        return scan(raw)
    except ValueError as exc:
        return ("ValueError", str(exc))


def _replica_pull_seeds() -> tuple[bytes, ...]:
    from broker.v1.codec import err, replica_pull_reply

    rec0 = encode_record(7, 1_700_000_000_000_000, 1, 1_700_000_000_000_000, b"hello", b"")
    rec1 = encode_record(8, 1_700_000_000_000_001, 2, 1_700_000_000_000_001, b"a,b|c\n", b"")
    one = replica_pull_reply("1", epoch=3, hw=7, leo=7, start=0, isr=[0, 1],
                             epochs=[(3, 5)], count=2, data=rec0 + rec1, raw=True)
    two = replica_pull_reply("2", epoch=3, hw=9, leo=9, start=0, isr=[0], epochs=[],
                             count=0, data=b"", raw=True)
    three = err("3", BadRequest("unknown option enc for REPLICA_PULL"))
    marked = b"".join(encode_record(4 + i, 1_700_000_000_000_000, producer_record_id(
        9, 0, i, i == 0, i == 2), 1_700_000_000_000_000, b"p", b"") for i in range(3))
    four = replica_pull_reply("1", epoch=3, hw=7, leo=7, start=0, isr=[0, 1], epochs=[],
                              count=3, data=marked, raw=True)
    return (b"\x10" + one + two + three, b"\x00" + one, b"\xff" + two + one, b"\x00" + four)


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


def _group_router(data: bytes) -> object:
    """A coordinator's answers as the Iggy transport reads them (``GroupRouter``): each
    line as a reply, an OK one as DESCRIBE_GROUP's group and LIST_GROUPS' pairs."""
    for line in data.split(b"\n"):
        reply = parse_reply(line)
        if reply.ok:
            for parse in (group_view_from, groups_from):
                try:
                    parse(reply)
                except ProtocolViolation:
                    pass
    return None


def _iggy(data: bytes) -> object:
    code = int.from_bytes(data[:4].ljust(4, b"\0"), "little")
    return decode_request(code % 1024 if data[4:5] != b"\xff" else code, data[4:])


def _frames(data: bytes) -> object:
    """The kit's length-prefixed splitter (``broker.transport.frames``) under Kafka's, TANK's
    and Iggy's heads: never raises, and any split of the input gives the same frames."""
    from broker.iggy.codec import request_splitter
    from broker.kafka.codec import FrameSplitter as KafkaSplitter
    from broker.tank.codec import FrameSplitter as TankSplitter

    cut = data[0] % (len(data) + 1) if data else 0
    out = []
    for make in (lambda: KafkaSplitter(64), lambda: TankSplitter(64),
                 lambda: request_splitter(64)):
        whole = make().feed(data)
        split = make()
        if split.feed(data[:cut]) + split.feed(data[cut:]) != whole:
            raise AssertionError(f"a split at {cut} changed the frames")
        out.append(whole)
    return out


_IGGY_PERMS = _Permissions(_GlobalPermissions(read_servers=True), (
    (0, _StreamPermissions(send_messages=True, topics=((0, _TopicPermissions(
        read_topic=True)),))),))


def _iggy_permissions(data: bytes) -> object:
    """Iggy's permissions blob (CreateUser, UpdatePermissions, an old iggy-users.json) to
    ACL bindings and back (broker/iggy/access.py): only the blob's own refusal."""
    from broker.iggy.access import bindings_for, permissions_from
    from broker.iggy.codec.permissions import decode_permissions

    perms = decode_permissions(data)
    acls = bindings_for("fuzz-user", perms, lambda sid: [(sid % 7, f"t{sid % 5}")])
    return permissions_from("fuzz-user", acls, lambda name: (1, 2))


def _kafka_codec(data: bytes) -> object:
    from broker.kafka.codec import parse_request

    return parse_request(data)


def _kafka_codec_seeds() -> tuple[bytes, ...]:
    try:  # one frame per API and version, written by kafka-python (tests/kafka/test_schema.py)
        from tests.kafka.test_schema import request_frames
    except Exception:  # pragma: no cover - kafka-python not installed
        return tuple(KAFKA_SEEDS)
    return tuple(request_frames()) + tuple(KAFKA_SEEDS)


_KAFKA_CODEC_SEEDS = _kafka_codec_seeds()
def _kafka_batches(data: bytes) -> object:
    """Record batches v2 as a producer sends them: opened as they are, then again with the
    first batch's CRC-32C made right (so mutations reach the records, not only the
    checksum); what opens is framed into stored records (the compiled framing where it is
    built, the reference where it declines) and built back into Fetch v4+ batches."""
    for candidate in (data, _crc_fixed(data)):
        try:
            raws = split_batches(candidate)
            raw, ends = framed_raw_batches(raws, 1, 1 << 20)
        except (CorruptRecordBatch, UnsupportedBatch, KeyTooLarge, InvalidTimestamp,
                ValueTooLarge):  # each answered for its partition (2, 48/87, 10, 32, 10)
            continue
        record_batches(raw, ends, 1 << 20, True, False, -1)
    return None


def _crc_fixed(data: bytes) -> bytes:
    if len(data) < 61:
        return data
    end = min(len(data), 12 + max(int.from_bytes(data[8:12], "big", signed=True), 0))
    if end <= 21:
        return data
    return data[:17] + crc32c(data[21:end]).to_bytes(4, "big") + data[21:]


_HEADERS = ((b"trace", b"abc"), (b"dup", b"1"), (b"dup", None), (b"", b""))
_BATCH_SEEDS = tuple(
    encode_batch(RecordBatch(0, 1_700_000_000_000, (
        BatchRecord(0, 0, b"k", b"v", _HEADERS), BatchRecord(1, -5, None, None),
        BatchRecord(2, 9, b"\xff", b"x" * 40, ((b"h", b"v" * 300),))),
        producer_id=7, producer_epoch=1, base_sequence=0), codec)
    for codec in range(5))

def _producer_snapshot(data: bytes) -> object:
    """A producer snapshot as read from disk: decoded as it is, then again with its checksum
    made right (so mutations reach the body), and the state it gives asked about a batch;
    every 16-byte window read as a record id."""
    for raw in (data, data[:-8] + xxhash.xxh3_64_intdigest(data[:-8]).to_bytes(8, "little")
                if len(data) >= 8 else data):
        try:
            state = decode_snapshot(raw)
        except ValueError:
            continue
        for entry in list(state):
            try:
                state.check(entry.producer_id, entry.epoch, entry.last_seq + 1 if
                            entry.last_seq >= 0 else 0, entry.last_seq + 5 if
                            entry.last_seq >= 0 else 4)
            except ProducerStateError:
                pass
    for at in range(0, max(0, len(data) - 15), 16):
        parse_record_id(int.from_bytes(data[at:at + 16], "little"))
    return None


def _snapshot_seeds() -> tuple[bytes, ...]:
    state = ProducerStateManager(0)
    state.append(7, 2, 0, 9, 0, 9, 1000)
    state.append(7, 2, 10, 12, 10, 12, 1001, complete=False)
    state.append(2**62, 0, 2**31 - 2, 1, 13, 16, 1002)
    return encode_snapshot(state), b"".join(bytes(row) for row in batch_ids(7, 2, 13, 3))


_RECORD = encode_record(7, 1_700_000_000_000_000, 12345, 1_700_000_000_000_000, b"payload")

TARGETS: dict[str, Target] = {
    "v1_codec": Target("v1_codec", _v1, (), (
        b"V1|1|PRODUCE|orders user1:created acks=all\n", b"V1|2|CONSUME|t 0 0 max=10 wait_ms=5",
        b"V1|3|JOIN|g t c assignor=range", b"V1|4|COMMIT|g t c 1 2 3", b"V1|5|AUTH|alice tok",
        b"V1|6|PRODUCE|t k:aGVsbG8= enc=b64 partition=1", b"V1|7|PING|",
        b"V1|8|CONSUME|t 0 0 detail=true headers=true enc=b64",
        b"V1|8|ADMIN_CREATE_TOPIC|t 1 1 cleanup_policy=compact,delete segment_bytes=4096",
        b"V1|9|ADMIN_ALTER_TOPIC|t min_compaction_lag_ms=0 segment_ms=none",
        b"V1|10|GROUP_HEARTBEAT|g m 0 topics=a,b regex=YXxi enc=b64 rebalance_timeout_ms=9",
        b"V1|11|GROUP_HEARTBEAT|g m leave_static instance=i owned=a:0,b:1",
        b"V1|12|ADMIN_ACL_ADD|User:alice Topic team-a. Write pattern=prefixed permission=deny",
        b"V1|13|ADMIN_ACL_REMOVE|principal=User:alice type=group operation=read",
        b"V1|14|ADMIN_ACL_LIST|name=orders pattern=literal permission=allow")),
    "v1_lane": Target("v1_lane", _v1_lane, (), (
        b"V1|1|PRODUCE|orders user1:created acks=all\n", b"V1|2|PRODUCE|t :v\r\n",
        b"V1|3|PRODUCE|t k:v acks=0\nV1|4|PING|\n", b"V1|5|PRODUCE|t k:v",
        b"V1|6|PRODUCE|__t k:v\n", b"V1|7|PRODUCE|.. k:v\n", b"V1|8|PING|\n")),
    "v1_batch": Target("v1_batch", _v1_batch, (), (
        b"\x02\x00\x00\x00\x05\x00\x07\x00\x00\x00\x06\x00\x00\x00user1createda,b|c\n",
        b"\x01\x00\x00\x00\x00\x03\x00\x00\x00abc", b"\x00\x00\x00\x00",
        b"\x03\x00\x00\x00\x01\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00abcxy")),
    "v1_raw_batch": Target("v1_raw_batch", _v1_raw_batch, (), (
        b"V1|1|PRODUCE_BATCH|t 0 enc=raw size=20\n\x02\x00\x00\x00\x01\x00\x01\x00\x00\x00"
        b"\x01\x00\x00\x00kvw\nV1|2|PING|\n",
        b"V1|1|PRODUCE_BATCH|t 0 pid=p seq=3 acks=all enc=raw size=13\n\x01\x00\x00\x00\x00"
        b"\x04\x00\x00\x00V1|\nV1|2|PRODUCE_BATCH|t 1 data=AQAAAAABAAAAeA==\n",
        b"V1|1|PRODUCE_BATCH|t 0 enc=raw size=99\nshort",
        b"V1|1|PRODUCE_BATCH|t 0 enc=raw size=4 size=4\n\x00\x00\x00\x00V1|2|PING|\n")),
    "v1_client": Target("v1_client", _v1_client, (ProtocolViolation,), (
        b"V1|1|OK|messages=0:created,1:a:b hw=1\nV1|0|ERR|BAD_REQUEST|line too long",
        b"V1|2|OK|messages=4:1700000000123:azE=:aGk=,5:7::/w== hw=5",
        b"V1|3|OK|messages=0:1795782611488:1700000000000:dHJhY2U=.YWJj;c3Jj.dGFuaw==:k1:a:b "
        b"hw=0")),
    "group_router": Target("group_router", _group_router, (ProtocolViolation,), (
        b"V1|fwd-1|OK|state=stable generation=4 assignor=range members=[a:0,1 b:2 c:] "
        b"partitions=[0 1 2] committed=[0 0 0] hw=[1 1 1] lag=[1 1 1] coordinator=2",
        b"V1|fwd-2|OK|groups=[g1:t g2:u iggy.consumer.7:orders]")),
    "record": Target("record", _record, (ValueError,), (_RECORD,)),
    "replica_pull_raw": Target("replica_pull_raw", _replica_pull_raw, (), _replica_pull_seeds()),
    "frames": Target("frames", _frames, (), (
        b"\x00\x00\x00\x03abc\x00\x00\x00\x00", b"\x01\x05\x00\x00\x00hello",
        b"\x0b\x00\x00\x00\x01\x00\x00\x00payload", b"\xff\xff\xff\xff")),
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
        b'[1,"offset","g","t",1]\n{"v":1,"offset":4096}',  # read without the JSON parser
        b'[1,"group","g","t"]\n{"v":1,"generation":2,"assignor":"range","partitions":1,'
        b'"members":[{"member_id":"c","session_timeout_ms":10000,"assigned":[0]}]}',
        b'[1,"kafka_group","g"]\n{"v":1,"state":"Empty","generation":1,"protocol_type":null,'
        b'"protocol":null,"leader":null,"members":[]}',
        b'[1,"offset","g","t",0]\n',
        # KIP-848 consumer groups (groups/consumer_records.py), loaded beside the rest
        b'[1,"consumer_group","g"]\n{"v":1,"epoch":3,"assignment_epoch":3,'
        b'"assignor":"uniform","topics":[{"name":"t","id":'
        b'"5c1e7a2e-9d3b-4f0e-8a61-0b6f3c2d9e48","partitions":2}]}',
        b'[1,"consumer_member","g","m"]\n{"v":1,"instance_id":null,"rack_id":null,'
        b'"client_id":"c","client_host":"h","topic_names":["t"],"topic_regex":null,'
        b'"server_assignor":null,"rebalance_timeout_ms":1000,"epoch":3,'
        b'"previous_epoch":2,"state":"STABLE","assigned":[],"revoking":[]}')),
    "topic_json": Target("topic_json", _json(TopicConfig.from_json), (ValueError,), (
        b'{"partitions": 3, "replication_factor": 1, "min_insync_replicas": 1, '
        b'"retention_ms": null, "retention_bytes": 1000}',
        b'{"partitions": 1, "cleanup_policy": "compact", "min_compaction_lag_ms": 0, '
        b'"delete_retention_ms": 5, "segment_bytes": 4096, "segment_ms": 1000}',
        b'{"partitions": 1, "topic_id": "0123456789abcdef0123456789abcdef"}')),
    # a compacted segment's offset index (data.index; recovery reads it)
    "sindex": Target("sindex", sindex_from_bytes, (ValueError,), (
        sindex_bytes(100, array("I", [3, 50, 99]), array("I", [0, 80, 160])),)),
    "state_json": Target("state_json", _json(ReplicationCheckpoint.from_json), (ValueError,), (
        b'{}', b'{"epochs": [[0, 0]]}')),
    # the stored ACL document (acls.json, the etcd key /skerry/<id>/acls)
    "acls_json": Target("acls_json", decode_acls, (InvalidAcl,), (
        b'{"version": 1, "acls": [{"principal": "User:alice", "resource_type": "Topic", '
        b'"name": "team-a.", "pattern_type": "Prefixed", "operation": "Write", '
        b'"permission": "Deny", "host": "*"}]}',)),
    "iggy": Target("iggy", _iggy, (IggyError,), (
        b"\x01\x00\x00\x00", b"\x0e\x00\x00\x00\x01\x00\x00\x00\x05admin",
        # UpdatePermissions (36) of user "alice" with a blob: one stream, one topic
        b"\x24\x00\x00\x00\x02\x05alice" + _permissions_field(_IGGY_PERMS),)),
    # Iggy permissions -> ACL bindings -> Iggy flags (broker/iggy/access.py)
    "iggy_permissions": Target("iggy_permissions", _iggy_permissions, (IggyError,), (
        _IGGY_PERMS.encode(), _Permissions.root().encode())),
    # The Kafka codec alone: every API and version of its tables (flexible headers and
    # bodies, tagged fields), through parse_request, which returns a result and never raises.
    "kafka_codec": Target("kafka_codec", _kafka_codec, (), _KAFKA_CODEC_SEEDS),
    # Kafka idempotent producers' state snapshots (read from disk) and record ids
    "producer_snapshot": Target("producer_snapshot", _producer_snapshot, (),
                                _snapshot_seeds()),
    # Kafka record batches v2 (produce), through the store mapping and the fetch builder
    "kafka_batches": Target("kafka_batches", _kafka_batches, (), _BATCH_SEEDS),
    # The whole Kafka path (frame, codec, handlers, core, group services) in process,
    # with a sentinel connection that must stay served: tests/reliability/kafka_fuzz.py.
    "kafka": Target("kafka", run_kafka, (), KAFKA_SEEDS),
    # the same path from KIP-848 frames only (ConsumerGroupHeartbeat/Describe v0-v1), so
    # that the mutations stay near the consumer-group parsers and handlers
    "kafka_kip848": Target("kafka_kip848", run_kafka, (), KIP848_SEEDS),
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
