"""InitProducerId's answers (broker/kafka/handlers/producers.py), over the producer id
service with a local block source: new ids with epoch 0, transactional requests refused
with 53, and 15 (retriable) when no id can be reserved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail

from broker.errors import Unavailable
from broker.kafka.handlers.producers import allocate_producer_id
from broker.services.producer_ids import LocalBlockSource, ProducerIds


class _Ctx:
    def __init__(self, producer_ids: Any) -> None:
        self.producer_ids = producer_ids


def answer(d: Deferred[Any]) -> Any:
    out: list[Any] = []
    d.addBoth(out.append)
    assert out
    return out[0]


class _Down:
    def reserve(self, size: int) -> Deferred[Any]:
        return fail(Unavailable("etcd unreachable"))


class InitProducerIdTests:

    def test_each_producer_gets_a_new_id_and_epoch_0(self, tmp_path: Path) -> None:
        """Non-transactional: ids 0, 1, 2... each with epoch 0, no error."""
        ctx = _Ctx(ProducerIds(LocalBlockSource(str(tmp_path))))
        got = [answer(allocate_producer_id(ctx, None)) for _ in range(3)]  # type: ignore[arg-type]
        assert got == [(0, 0, 0), (0, 1, 0), (0, 2, 0)]

    def test_transactional_producers_are_refused(self, tmp_path: Path) -> None:
        """A transactional_id: 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED, no id used."""
        ids = ProducerIds(LocalBlockSource(str(tmp_path)))
        ctx = _Ctx(ids)
        assert answer(allocate_producer_id(ctx, "tx-1")) == (53, -1, -1)  # type: ignore[arg-type]
        assert answer(allocate_producer_id(ctx, None)) == (0, 0, 0)  # type: ignore[arg-type]

    def test_no_id_available_is_retriable(self) -> None:
        """The block cannot be reserved (etcd down), or no service: 15, which clients retry."""
        assert answer(allocate_producer_id(_Ctx(ProducerIds(_Down())), None)) == (15, -1, -1)  # type: ignore[arg-type]
        assert answer(allocate_producer_id(_Ctx(None), None)) == (15, -1, -1)  # type: ignore[arg-type]


class WireTests:
    """InitProducerId over the Kafka transport (frames packed by hand, v0 and v1)."""

    def test_answers_in_the_wire_layout(self, tmp_path: Path) -> None:
        """ApiVersions offers InitProducerId 0-4; an idempotent producer gets ids 0, 1 with
        epoch 0; a transactional one gets 53; ids go on after a restart."""
        import struct

        from tests.kafka.harness import Harness, i32, string

        def init(conn: Any, version: int, txn: str | None) -> tuple[int, int, int]:
            body = conn.call(22, version, string(txn) + i32(60000))
            _throttle, error, pid, epoch = struct.unpack(">ihqh", body)
            return error, pid, epoch

        h = Harness(tmp_path)
        h.service.ctx.producer_ids = ProducerIds(LocalBlockSource(str(tmp_path / "data")))
        assert h.service.handlers.versions[22] == (0, 4)  # type: ignore[index]
        conn = h.connect()
        assert init(conn, 0, None) == (0, 0, 0)
        assert init(conn, 1, None) == (0, 1, 0)
        assert init(conn, 1, "tx") == (53, -1, -1)
        h.close()
        h = Harness(tmp_path)
        h.service.ctx.producer_ids = ProducerIds(LocalBlockSource(str(tmp_path / "data")))
        error, pid, epoch = init(h.connect(), 0, None)
        assert (error, epoch) == (0, 0) and pid >= 2
        h.close()
