"""The error-table mechanism every transport fills with its own wire codes.

Owns: ``ErrorTable``, one mapping from exception class to a transport's answer (a V1 code,
an Iggy status, a Kafka error code, TANK's three codes, or another exception class), looked
up by the raised class or its nearest base class with a row: one walk of ``__mro__`` per
class, then cached, so the hot paths pay one dict lookup. An exception that carries its own
code (Iggy's ``IggyError.status``, Kafka's ``KafkaError.code``, TANK's ``TankRefusal``)
names it through ``carries``.

Each transport keeps its rows in its own ``errors`` module (docs/architecture.md: one
domain error, one row per transport); this module knows no transport and no code.

Must not import: Twisted, the core, any transport.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

__all__ = ["ErrorTable"]

CodeT = TypeVar("CodeT")


class ErrorTable(Generic[CodeT]):
    """Exception class -> answer, by the class's nearest row (``default`` without one).

    ``carries``: ``(cls, own)`` when an exception of ``cls`` knows its own answer
    (``own(error)``), which then wins over the rows.
    """

    __slots__ = ("rows", "default", "_carrier", "_own", "_cache")

    def __init__(self, rows: Mapping[type[BaseException], CodeT], default: CodeT, *,
                 carries: tuple[type[BaseException], Callable[[BaseException], CodeT]]
                 | None = None) -> None:
        self.rows = rows
        self.default = default
        self._carrier, self._own = carries if carries is not None else (None, None)
        self._cache: dict[type[BaseException], CodeT] = {}

    def __call__(self, error: BaseException) -> CodeT:
        """The answer to ``error``."""
        if self._carrier is not None and isinstance(error, self._carrier):
            return self._own(error)  # type: ignore[misc]
        cls = type(error)
        try:
            return self._cache[cls]
        except KeyError:
            code = self.row_of(cls)
            self._cache[cls] = code
            return code

    def row_of(self, cls: type[BaseException]) -> CodeT:
        """The row of ``cls`` or of its nearest base class that has one (uncached)."""
        rows = self.rows
        for base in cls.__mro__:
            code = rows.get(base)
            if code is not None:
                return code
        return self.default
