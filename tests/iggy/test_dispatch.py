"""The Iggy dispatcher's table and its error table: every command has a handler, a command
without one gets the unknown-command fallback, and every refusal of the shell's services
has its own status."""

from __future__ import annotations

import pytest

from broker.iggy import codec
from broker.iggy.errors import STATUS_BY_ERROR, Status, status_for
from broker.services import errors as service_errors
from tests.iggy.harness import Harness, err, ok


def _command_classes() -> list[type[codec.Command]]:
    return [getattr(codec, name) for name in codec.__all__
            if isinstance(getattr(codec, name), type)
            and issubclass(getattr(codec, name), codec.Command)
            and getattr(codec, name) is not codec.Command]


class TableTests:
    def test_every_command_class_has_a_handler(self, tmp_path):
        """The table maps each of the codec's command classes, and nothing else."""
        h = Harness(tmp_path)
        assert set(h.service.handlers.table) == set(_command_classes())
        h.close()

    def test_a_command_without_a_handler_gets_invalid_command(self, tmp_path):
        """A decodable command the table does not serve is answered InvalidCommand (3) by
        the fallback, and the connection carries on."""
        h = Harness(tmp_path)
        conn = h.connect(login=True)
        del h.service.handlers.table[codec.GetMe]
        assert conn.call(codec.GetMe()) == err(3)
        assert conn.call(codec.Ping()) == ok()
        assert not conn.closed
        h.close()


class ErrorTableTests:
    @pytest.mark.parametrize("name", [n for n in service_errors.__all__ if n != "ServiceError"])
    def test_every_service_refusal_has_its_own_row(self, name):
        """Each refusal class of broker.services.errors has a row of its own, so none is
        answered with the catch-all ERROR (1)."""
        cls = getattr(service_errors, name)
        assert cls in STATUS_BY_ERROR
        assert status_for(cls("x")) not in (Status.OK, Status.ERROR)
