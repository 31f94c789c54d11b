"""The TANK produce requests: Produce (0x01) and ProduceWithSeqnum (0x05, answered as 0x01).

Owns: ``ProduceHandlers``: per request topic, the unknown-topic answer (0xff: TANK never
creates a topic on produce); per partition, the unknown-partition answer (0x01), the
bundle decoded and framed as records in one go (``codec.bundle_to_records``) and appended
as **one all-or-nothing store append** through the core's batch path
(``BrokerCore.produce``), answered once it is as durable as V1 ``acks=1`` (``all``
for a replicated topic) makes it. The reply goes out when every partition of the request
is answered. A bundle Skerry refuses is 0x02 for its partition (logged), a follower
partition 0xfd (0xfc with the leader's address once ``Context.leader_of`` knows it).

ProduceWithSeqnum: Skerry's offsets are dense, so the bundle's sequence numbers (its
``base_seq`` then one per message, or a sparse bundle's explicit ones) must be exactly
the partition's next ones (next offset + 1 onwards); anything else is 0x0a (invalid
sequence numbers) and nothing is written.

Must not import: Twisted's reactor, sockets, files, the store, the protocol.
"""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet.defer import Deferred

from broker.core import ProduceRequest, ProduceResult
from broker.errors import NotLeader, SkerryError
from broker.tank.codec import (
    BundleError,
    ProduceError,
    ProducePartition,
    ProducePartitionAck,
    ProduceReply,
    ProduceTopicAck,
    ProduceWithSeqnum,
    bundle_to_records,
)
from broker.tank.errors import produce_code
from broker.tank.handlers.context import Context

__all__ = ["ProduceHandlers"]

log = logging.getLogger("skerry.tank")

_OK = ProducePartitionAck()
_UNKNOWN_PARTITION = ProducePartitionAck(ProduceError.UNKNOWN_PARTITION)


class ProduceHandlers:
    """Produce and ProduceWithSeqnum."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.core = ctx.core

    def produce(self, req: Any) -> ProduceReply | Deferred[ProduceReply]:
        with_seqnum = type(req) is ProduceWithSeqnum
        topics: list[list[ProducePartitionAck | Deferred[ProducePartitionAck]] | None] = []
        waiting = 0
        for topic in req.topics:
            found = self.ctx.topic(topic.name)
            if found is None:
                topics.append(None)
                continue
            name, partitions = found
            acks = self.ctx.acks_for(name)
            answers: list[ProducePartitionAck | Deferred[ProducePartitionAck]] = []
            for part in topic.partitions:
                if part.partition >= partitions:
                    answers.append(_UNKNOWN_PARTITION)
                    continue
                answer = self._append(name, part, acks, with_seqnum)
                if isinstance(answer, Deferred):
                    waiting += 1
                answers.append(answer)
            topics.append(answers)
        if not waiting:
            return self._reply(req.request_id, topics)  # type: ignore[arg-type]
        done: Deferred[ProduceReply] = Deferred()
        left = [waiting]

        def settle(ack: ProducePartitionAck, t: int, p: int) -> None:
            answers = topics[t]
            assert answers is not None
            answers[p] = ack
            left[0] -= 1
            if not left[0]:
                done.callback(self._reply(req.request_id, topics))  # type: ignore[arg-type]

        for t, answers in enumerate(topics):
            for p, answer in enumerate(answers or ()):
                if isinstance(answer, Deferred):
                    answer.addCallback(settle, t, p)
        return done

    @staticmethod
    def _reply(request_id: int, topics: list[list[ProducePartitionAck] | None]) -> ProduceReply:
        return ProduceReply(request_id, tuple(
            ProduceTopicAck(topic_error=ProduceError.UNKNOWN_TOPIC) if answers is None
            else ProduceTopicAck(tuple(answers)) for answers in topics))

    def _fault(self, topic: str, partition: int, error: BaseException) -> ProducePartitionAck:
        code = produce_code(error)
        if code == ProduceError.NO_LEADER:
            leader = self.ctx.leader_of(topic, partition)
            if leader is not None:
                return ProducePartitionAck(ProduceError.OTHER_LEADER, leader)
        return ProducePartitionAck(code)

    def _append(self, topic: str, part: ProducePartition, acks: str, with_seqnum: bool
                ) -> ProducePartitionAck | Deferred[ProducePartitionAck]:
        ctx = self.ctx
        partition = part.partition
        if not ctx.is_leader(topic, partition):
            return self._fault(topic, partition, NotLeader(f"{topic}/{partition}"))
        try:
            stored = bundle_to_records(part.bundle, max_message_bytes=ctx.max_message_bytes)
        except BundleError as exc:
            log.info("tank: refused a bundle for %s/%d: %s", topic, partition, exc.reason)
            return ProducePartitionAck(ProduceError.IO_FAULT)
        if with_seqnum or stored.seqs is not None:
            self.core.flush()  # what V1 queued this turn takes its offsets first
            next_seq = self.core.partition_summary(topic, partition).next_offset + 1
            seqs = stored.seqs
            if seqs is None:
                base = part.base_seq if part.base_seq is not None else next_seq
                ok = base == next_seq
            else:
                ok = seqs[0] == next_seq and seqs[-1] == next_seq + len(seqs) - 1 and \
                    (part.base_seq in (None, 0, seqs[0]))
            if not ok:
                log.info("tank: sequence numbers for %s/%d do not start at %d or have gaps",
                         topic, partition, next_seq)
                return ProducePartitionAck(ProduceError.INVALID_SEQNUMS)
        d: Deferred[ProducePartitionAck] = Deferred()

        def done(result: ProduceResult) -> None:
            if result.error is None:
                d.callback(_OK)
            else:
                d.callback(self._fault(topic, partition, result.error))

        try:
            self.core.produce(ProduceRequest(topic, partition, acks, framed=stored.area,
                                             ends=stored.ends), done)
        except SkerryError as exc:  # refusals that changed nothing
            log.info("tank: produce to %s/%d refused: %s", topic, partition, exc)
            return self._fault(topic, partition, exc)
        return d
