"""The kit's error table (``broker.transport.errors``): one walk of ``__mro__`` per class,
the nearest row wins, a carried code wins over the rows, and each transport's table answers
a domain error with its own code."""

from __future__ import annotations

import pytest

from broker.errors import NotLeader, SkerryError, StorageError, Unavailable
from broker.transport.errors import ErrorTable


class Base(Exception):
    pass


class Child(Base):
    pass


class Grandchild(Child):
    pass


class Carrier(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ErrorTableTests:
    def test_the_nearest_row_answers(self) -> None:
        """A class without a row takes its nearest base's; a class with one, its own."""
        table = ErrorTable({Base: 1, Grandchild: 3}, 0)
        assert table(Base()) == 1
        assert table(Child()) == 1
        assert table(Grandchild()) == 3

    def test_an_unknown_exception_gets_the_default(self) -> None:
        """What no row covers (a bug, not a refusal) gets the transport's INTERNAL answer."""
        table = ErrorTable({Base: 1}, -1)
        assert table(KeyError("x")) == -1
        assert table(ZeroDivisionError()) == -1

    def test_a_falsy_code_is_a_row(self) -> None:
        """A row whose code is 0 (Kafka's NONE, a status 0) is still a row, not a miss."""
        assert ErrorTable({Base: 0}, 9)(Child()) == 0

    def test_the_walk_is_done_once_per_class(self) -> None:
        """The second lookup of a class does not walk ``__mro__`` again: it is cached."""
        walks: list[type] = []

        class Counting(ErrorTable[int]):
            __slots__ = ()

            def row_of(self, cls: type[BaseException]) -> int:
                walks.append(cls)
                return super().row_of(cls)

        table = Counting({Base: 1}, 0)
        for _ in range(3):
            assert table(Grandchild()) == 1
        assert walks == [Grandchild]

    def test_a_carried_code_wins(self) -> None:
        """An exception that carries its own code (IggyError, KafkaError, TankRefusal)
        is answered with it, whatever the rows say."""
        table = ErrorTable({Carrier: 1}, 0, carries=(Carrier, lambda e: e.code))
        assert table(Carrier(42)) == 42
        assert table(Carrier(7)) == 7


@pytest.mark.parametrize(("error", "v1", "iggy", "kafka"), [
    (NotLeader("p0"), "NOT_LEADER", None, 6),
    (Unavailable("x"), "UNAVAILABLE", None, None),
    (StorageError("disk"), "STORAGE_ERROR", None, -1),
    (RuntimeError("bug"), "INTERNAL", "ERROR", -1),
])
def test_each_transport_fills_the_same_mechanism(error: BaseException, v1: str,
                                                 iggy: str | None, kafka: int | None) -> None:
    """V1, Iggy, Kafka and TANK each answer through an ``ErrorTable`` of their own codes; a
    bug (not a ``SkerryError``) gets each one's INTERNAL answer."""
    from broker.iggy.errors import status_for
    from broker.kafka.errors import code_for as kafka_code
    from broker.tank.codec import ProduceError
    from broker.tank.errors import codes_for
    from broker.v1.errors import code_for as v1_code

    for table in (v1_code, status_for, kafka_code, codes_for):
        assert isinstance(table, ErrorTable)
    assert v1_code(error) == v1
    if iggy is not None:
        assert status_for(error).name == iggy
    if kafka is not None:
        assert int(kafka_code(error)) == kafka
    if not isinstance(error, SkerryError):
        assert codes_for(error).produce == ProduceError.IO_FAULT
