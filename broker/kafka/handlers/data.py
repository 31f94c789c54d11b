"""The Kafka data APIs: Produce, Fetch, ListOffsets.

Owns: ``VERSIONS`` (what they serve) and the handlers of those three APIs over the core's public methods, and their mapping
rules (kafka-wire-notes §6): a topic is a Skerry topic of the same name (the Iggy
transport's ``__iggy.*`` store topics hidden), brokers and leaders are this broker alone,
or in a cluster ``Context.placement``'s (a Fetch of a partition this member does not lead
answers NOT_LEADER_FOR_PARTITION, as Kafka's brokers do, so the client asks Metadata again),
Metadata auto-creates a requested topic as V1's PRODUCE would (``auto_create_topics``),
Kafka's high watermark is Skerry's ``hw + 1``, acks -1 is ``acks=all``, and keys and
values map as ``broker.kafka.mapping`` says.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from broker.core import ProducerBatch, ProduceRequest, ProduceResult
from broker.kafka import codec as c
from broker.kafka.errors import REFUSALS, ErrorCode, KafkaError, code_for
from broker.kafka.handlers.context import Context
from broker.kafka.mapping import (
    ENDS_IN_PLACE,
    MESSAGE_OVERHEAD,
    InvalidTimestamp,
    KeyTooLarge,
    ValueTooLarge,
    framed_columns,
    framed_raw_batches,
    message_set,
    record_batches,
)

__all__ = ["VERSIONS", "produce", "fetch", "list_offsets"]

VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.PRODUCE: (0, 9),
    c.ApiKey.FETCH: (0, 12),
    c.ApiKey.LIST_OFFSETS: (0, 7),
}
"""The versions these handlers serve: Produce v3+ carries record batches v2 and Fetch v4+
answers them (``broker.kafka.mapping``); the layouts are the codec's tables. What
ApiVersions advertises of them is capped by ``dispatch.CLASSIC_ERA`` while InitProducerId
is not served; a version the codec reads but is not advertised is answered with
UNSUPPORTED_VERSION (35) in its own layout."""


# ================================================================ Produce

ACKS = {0: "0", 1: "1", -1: "all"}
"""Kafka's acks -> V1's: -1 (both clients' default) is acks=all."""


def produce(ctx: Context, request: c.ProduceRequest
            ) -> c.ProduceResponse | None | Deferred[c.ProduceResponse | None]:
    """Each partition's MessageSet decoded (compressed wrappers opened, one record per
    inner message) and appended with one store append; the answer once every partition is
    as durable as ``acks`` asks. acks = 0: no answer at all (errors are invisible)."""
    acks = ACKS.get(request.acks)
    topics: list[tuple[str, list[Any]]] = []
    waiting: list[Deferred[Any]] = []
    for topic in request.topics:
        parts: list[Any] = []
        for part in topic.partitions:
            if acks is None:
                parts.append(c.ProducePartitionResponse(
                    part.index, int(ErrorCode.INVALID_REQUIRED_ACKS), -1))
                continue
            if request.transactional_id is not None:
                # A transactional producer: Skerry has no transactions, so no transaction
                # can be ongoing for this partition (kafka.md, record batches).
                parts.append(c.ProducePartitionResponse(
                    part.index, int(ErrorCode.INVALID_TXN_STATE), -1))
                continue
            try:
                answer = _produce_partition(ctx, topic.name, part, acks,
                                            ack_wait_ms(request.timeout_ms),
                                            request.header.api_version)
            except REFUSALS as error:
                answer = c.ProducePartitionResponse(part.index, int(code_for(error)), -1)
            if isinstance(answer, Deferred):
                waiting.append(answer)
            parts.append(answer)
        topics.append((topic.name, parts))
    if acks == "0":
        return None

    def build(_: object = None) -> c.ProduceResponse:
        return c.ProduceResponse(tuple(
            c.ProduceTopicResponse(name, tuple(_settled(p) for p in parts))
            for name, parts in topics))

    if not any(not d.called for d in waiting):
        return build()
    return _all_fired(waiting).addCallback(build)


def _settled(answer: Any) -> c.ProducePartitionResponse:
    if isinstance(answer, Deferred):
        return answer.result  # type: ignore[no-any-return]
    return answer  # type: ignore[no-any-return]


def _all_fired(ds: list[Deferred[Any]]) -> Deferred[None]:
    """Fires once every Deferred of ``ds`` (which never fail) has fired."""
    done: Deferred[None] = Deferred()
    left = [sum(1 for d in ds if not d.called)]

    def one(result: Any) -> Any:
        left[0] -= 1
        if left[0] == 0:
            done.callback(None)
        return result

    for d in ds:
        if not d.called:
            d.addBoth(one)
    return done


def _refuse_hidden(ctx: Context, name: str) -> None:
    """Another transport's own topics (``__iggy.*``) are unknown to Kafka clients; every
    other name is resolved by the core (``Topics.resolve``: unknown topic, invalid name,
    partition out of range, auto-create as ``auto_create_topics`` says)."""
    if not ctx.visible(name):
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name}")


MAX_ACK_WAIT_MS = 300_000
"""The longest a Kafka client's produce ``timeout_ms`` may hold an ``acks=-1`` answer."""


def ack_wait_ms(timeout_ms: int) -> int | None:
    """How long an ``acks=-1`` produce waits for the ISR: the request's ``timeout_ms``, as
    Kafka's brokers do (librdkafka and kafka-python send their request timeout, 30 s by
    default, longer than a follower takes to leave the ISR, so a dead follower does not turn
    into a timeout that the client retries and the log stores twice), at most
    ``MAX_ACK_WAIT_MS``; 0 or less: the broker's ``replication.ack_timeout_ms``."""
    return min(timeout_ms, MAX_ACK_WAIT_MS) if timeout_ms > 0 else None


def _framed_v01(ctx: Context, records: bytes) -> tuple[bytes, list[int]]:
    """A MessageSet of magic 0/1 -> framed records (``KafkaError`` / ``CorruptMessageSet``)."""
    cols = c.decode_message_columns(records)
    if not len(cols):
        return b"", []
    limit = ctx.max_message_bytes
    if int(cols.value_len.max()) > limit:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"a value of {int(cols.value_len.max())} bytes; at most {limit}")
    try:
        return framed_columns(cols, ctx.now_us())
    except KeyTooLarge as error:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, str(error)) from None


def _framed_v2(ctx: Context, records: bytes
               ) -> list[tuple[bytes, list[int], ProducerBatch | None]]:
    """Record batches v2 -> framed records (``KafkaError`` / ``CorruptRecordBatch``):
    transactional and control batches refused (``UnsupportedBatch``'s code). One part per
    batch of an idempotent producer (with its ``ProducerBatch``: the core checks and
    deduplicates each), the other batches together in one part."""
    try:
        raws = c.split_batches(records)
        for raw in raws:
            head = raw.head
            if head.producer_id >= 0 and (head.producer_epoch < 0 or head.base_sequence < 0):
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 f"batch of producer {head.producer_id} without an epoch or "
                                 f"a base sequence")
        plain = [raw for raw in raws if raw.head.producer_id < 0]
        parts: list[tuple[bytes, list[int], ProducerBatch | None]] = []
        if plain:
            parts.append((*framed_raw_batches(plain, ctx.now_us(), ctx.max_message_bytes),
                          None))
        for raw in raws:
            head = raw.head
            if head.producer_id >= 0 and raw.count:
                parts.append((*framed_raw_batches([raw], ctx.now_us(), ctx.max_message_bytes),
                              ProducerBatch(head.producer_id, head.producer_epoch,
                                            head.base_sequence)))
        return parts
    except c.UnsupportedBatch as error:
        raise KafkaError(error.error_code, str(error)) from None
    except (KeyTooLarge, ValueTooLarge) as error:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, str(error)) from None
    except InvalidTimestamp as error:
        raise KafkaError(ErrorCode.INVALID_TIMESTAMP, str(error)) from None


def _log_append_time(ctx: Context, topic: str) -> bool:
    """Whether the topic's ``message.timestamp.type`` is LogAppendTime."""
    config = ctx.core.topic_config(topic)
    return config is not None and config.message_timestamp_type == "LogAppendTime"


def _produce_partition(ctx: Context, topic: str, part: c.ProducePartition, acks: str,
                       ack_timeout_ms: int | None = None, version: int = 0
                       ) -> c.ProducePartitionResponse | Deferred[c.ProducePartitionResponse]:
    index = part.index
    _refuse_hidden(ctx, topic)
    records = part.records
    if not records:
        ctx.core.resolve(topic, index, True)  # nothing to append: still the topic's refusals
        return c.ProducePartitionResponse(index, 0, -1)
    if c.is_batch_v2(records):
        parts = _framed_v2(ctx, records)
    else:
        # Magic 0/1 in any version: kafka-python told api_version=(0, 10, 1) sends them in
        # the newest Produce version the broker offers (Kafka refuses that with 87).
        parts = [(*_framed_v01(ctx, records), None)]
    parts = [part for part in parts if part[1]]
    if not parts:
        ctx.core.resolve(topic, index, True)
        return c.ProducePartitionResponse(index, 0, -1)
    answers: list[Deferred[Any]] = []
    for n, (messages, ends, producer) in enumerate(parts):
        d: Deferred[Any] = Deferred()
        try:
            ctx.core.produce(ProduceRequest(topic, index, acks, framed=messages, ends=ends,
                                            create=True, producer=producer,
                                            ack_timeout_ms=ack_timeout_ms), d.callback)
        except REFUSALS as error:
            if n == 0:
                raise
            # The batches before it are appended: answer the refusal.
            d.callback(ProduceResult(index, -1, -1, 0, 0, error))
        answers.append(d)
        if d.called and d.result.error is not None:
            break  # a batch refused: the ones after it are not appended

    def answer(_: object) -> c.ProducePartitionResponse:
        results: list[ProduceResult] = [d.result for d in answers]
        for result in results:
            if result.error is not None:
                return c.ProducePartitionResponse(index, int(code_for(result.error)), -1)
        log_append = _log_append_time(ctx, topic)  # the topic exists now
        return c.ProducePartitionResponse(index, 0, results[0].offset,
                                          ctx.now_us() // 1000 if log_append else -1,
                                          ctx.core.earliest_offset(topic, index))

    if all(d.called for d in answers):
        return answer(None)
    return _all_fired(answers).addCallback(answer)


# ================================================================ Fetch

RECORD_OVERHEAD = {**MESSAGE_OVERHEAD, 2: 7}
"""The fewest bytes a fetched record takes besides its value, by magic (a v2 record: length,
attributes, two deltas, null key, value length, header count: one byte each)."""


def fetch(ctx: Context, request: c.FetchRequest
          ) -> c.FetchResponse | Deferred[c.FetchResponse]:
    """Committed records from each partition's offset, uncompressed, in the magic of the
    version; Kafka's high watermark is ``hw + 1``; an offset below the first retained one
    (or past the end) is error 1, so the client's ``auto.offset.reset`` applies. With fewer
    than ``min_bytes`` the fetch waits (the core's long poll) until data comes or
    ``max_wait_ms`` passes, or the answer is full (``kafka.fetch_max_bytes`` or the
    client's limit cut a partition short: waiting could not make it larger)."""
    if request.session_id != 0 and request.header.api_version >= 7:
        # No fetch sessions here (KIP-227): every answer has session id 0, which tells the
        # client to send full fetches; an id it did not get from us is unknown.
        return c.FetchResponse((), error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    response, size, waits = _fetch_once(ctx, request)
    if size >= request.min_bytes or request.max_wait_ms <= 0 or not waits \
            or ctx.core.closing:
        return response
    clock = ctx.clock
    deadline = clock.seconds() + request.max_wait_ms / 1000.0
    result: Deferred[c.FetchResponse] = Deferred()

    def wait(pending: list[tuple[str, int, int]]) -> None:
        left_ms = int((deadline - clock.seconds()) * 1000)
        if left_ms <= 0:
            answer()
            return
        ds = [ctx.core.wait_for_data(t, p, o, left_ms) for t, p, o in pending]
        first: Deferred[None] = Deferred()

        def woke(_: object) -> None:
            if not first.called:
                first.callback(None)

        for d in ds:
            d.addCallback(woke)
        first.addCallback(lambda _: again())

    def again() -> None:
        response, size, waits = _fetch_once(ctx, request)
        if size >= request.min_bytes or not waits or ctx.core.closing \
                or clock.seconds() >= deadline:
            result.callback(response)
        else:
            wait(waits)

    def answer() -> None:
        result.callback(_fetch_once(ctx, request)[0])

    wait(waits)
    return result


def _fetch_once(ctx: Context, request: c.FetchRequest
                ) -> tuple[c.FetchResponse, int, list[tuple[str, int, int]] | None]:
    """The response as of now, its record bytes, and the (topic, partition, offset) a long
    poll waits on; None instead of that list when the answer is full (a partition holds
    more than the byte limits let in)."""
    magic = c.fetch_magic(request.header.api_version)
    # The broker's own bound below the client's, as Kafka's broker fetch.max.bytes: the
    # answer is built in memory (Kafka sends file bytes), so this is a fetch's memory.
    left = min(request.max_bytes, ctx.fetch_max_bytes)
    size = 0
    waits: list[tuple[str, int, int]] = []
    full = False
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            try:
                answer, offset, more = _fetch_partition(ctx, topic.topic, part, magic,
                                                        min(part.partition_max_bytes, left),
                                                        whole_first=size == 0)
            except REFUSALS as error:
                parts.append(c.FetchPartitionResponse(part.partition, int(code_for(error)), -1))
                continue
            parts.append(answer)
            full = full or more
            got = len(answer.records)
            size += got
            left = max(0, left - got)
            if not got and answer.error_code == 0:
                waits.append((topic.topic, part.partition, offset))
        topics.append(c.FetchTopicResponse(topic.topic, tuple(parts)))
    return c.FetchResponse(tuple(topics)), size, None if full else waits


def _check_partition(ctx: Context, topic: str, partition: int) -> None:
    config = ctx.core.topic_config(topic) if ctx.visible(topic) else None
    if config is None or not 0 <= partition < config.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"unknown topic or partition {topic}/{partition}")


def leader_epoch(ctx: Context, topic: str, partition: int) -> int:
    """The partition's leader epoch as Metadata tells it (-1: none known, no checks)."""
    placement = ctx.placement
    if placement is None:
        return -1
    return int(getattr(placement.partition(topic, partition), "leader_epoch", -1))


def check_leader_epoch(ctx: Context, topic: str, partition: int, current: int) -> int:
    """The leader epoch, after KIP-320's check of the one a client sent (Fetch v9+,
    ListOffsets v4+): older is FENCED_LEADER_EPOCH (74), newer UNKNOWN_LEADER_EPOCH (75);
    -1 on either side checks nothing."""
    epoch = leader_epoch(ctx, topic, partition)
    if current >= 0 and epoch >= 0 and current != epoch:
        code = ErrorCode.FENCED_LEADER_EPOCH if current < epoch \
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        raise KafkaError(code, f"{topic}/{partition}: leader epoch {current}, ours {epoch}")
    return epoch


def _fetch_partition(ctx: Context, topic: str, part: c.FetchPartition, magic: int,
                     budget: int, whole_first: bool
                     ) -> tuple[c.FetchPartitionResponse, int, bool]:
    """One partition's answer, the offset it read from, and whether committed records
    were left out for lack of budget."""
    index = part.partition
    _check_partition(ctx, topic, index)
    placement = ctx.placement
    if placement is not None and not placement.leads(topic, index):
        raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION,
                         f"broker {ctx.node.broker_id} does not lead {topic}/{index}")
    epoch = check_leader_epoch(ctx, topic, index, part.current_leader_epoch)
    core = ctx.core
    offset = part.fetch_offset
    hw = core.hw(topic, index)
    first = core.earliest_offset(topic, index)
    # No transactions: the last stable offset is the high watermark.
    if offset < first or offset > hw + 1:
        return c.FetchPartitionResponse(index, int(ErrorCode.OFFSET_OUT_OF_RANGE), hw + 1,
                                        last_stable_offset=hw + 1,
                                        log_start_offset=first), offset, False
    if offset > hw or (budget <= 0 and not whole_first):
        return c.FetchPartitionResponse(index, 0, hw + 1, b"", hw + 1, first), offset, \
            offset <= hw
    budget = max(budget, 0)
    # The store's byte limit counts values only, and a Kafka message is its value plus
    # 26/34 bytes and its key: a read of ``budget`` value bytes holds every message that
    # fits ``budget`` (message_set trims the rest).
    result, hw, _first = core.fetch_raw(
        topic, index, offset, budget // RECORD_OVERHEAD[magic] + 1, budget,
        ends_array=magic == 2 and ENDS_IN_PLACE)
    config = core.topic_config(topic)
    # A compacted topic: an empty value is a tombstone, served as Kafka's null value.
    compacted = config is not None and config.cleanup_policy != "delete"
    if magic == 2:
        records, count = record_batches(
            result.raw, result.ends, budget, whole_first,
            config is not None and config.message_timestamp_type == "LogAppendTime", epoch,
            empty_is_null=compacted)
    else:
        records, count = message_set(result.raw, result.ends, magic, budget, whole_first,
                                     empty_is_null=compacted)
    more = count < result.count or result.next_offset <= hw
    return c.FetchPartitionResponse(index, 0, hw + 1, records, hw + 1, first), offset, more


# ================================================================ ListOffsets

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def list_offsets(ctx: Context, request: c.ListOffsetsRequest) -> c.ListOffsetsResponse:
    """Latest (-1) = ``hw + 1``; earliest (-2) = the first retained offset; a time (ms) =
    the first offset appended at or after it (Skerry's time index is over append time),
    none: v0 ``[]``, v1 offset -1."""
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            try:
                parts.append(_list_partition(ctx, topic.name, part))
            except REFUSALS as error:
                parts.append(c.ListOffsetsPartitionResponse(part.partition_index,
                                                            int(code_for(error))))
        topics.append(c.ListOffsetsTopicResponse(topic.name, tuple(parts)))
    return c.ListOffsetsResponse(tuple(topics))


def _list_partition(ctx: Context, topic: str, part: c.ListOffsetsPartition
                    ) -> c.ListOffsetsPartitionResponse:
    index = part.partition_index
    _check_partition(ctx, topic, index)
    epoch = check_leader_epoch(ctx, topic, index, part.current_leader_epoch)
    core = ctx.core
    hw = core.hw(topic, index)
    timestamp = -1
    if part.timestamp == LATEST:
        offset = hw + 1
    elif part.timestamp == EARLIEST:
        offset = core.earliest_offset(topic, index)
    elif part.timestamp == MAX_TIMESTAMP:
        # The last committed record (KIP-734 asks for the largest timestamp; see
        # docs/kafka.md: exact under LogAppendTime and for timestamps that only grow).
        offset = hw if hw >= core.earliest_offset(topic, index) else -1
        if offset >= 0:
            timestamp = _record_time(ctx, topic, index, offset)
    else:
        found = core.offset_for_timestamp(topic, index, part.timestamp * 1000)
        if found is None or found > hw:
            offset = -1
        else:
            offset = found
            timestamp = _record_time(ctx, topic, index, found)
    old_style = None
    if offset != -1 and part.max_num_offsets < 1:
        old_style = ()
    return c.ListOffsetsPartitionResponse(index, 0, offset, timestamp, old_style, epoch)


def _record_time(ctx: Context, topic: str, index: int, offset: int) -> int:
    """The timestamp (ms) a Kafka consumer sees on the record at ``offset``: its
    CreateTime (the origin timestamp; the append time when it has none), or the append time
    under LogAppendTime; -1 when it is gone."""
    read, _hw = ctx.core.read(topic, index, offset, 1, create=False)
    if not read.records:
        return -1
    record = read.records[0]
    if _log_append_time(ctx, topic):
        return record.timestamp // 1000
    return (record.origin_timestamp or record.timestamp) // 1000
