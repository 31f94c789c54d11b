"""The refusal root keeps a domain's message as it is; each transport escapes it."""

from __future__ import annotations

from broker.errors import BadRequest
from broker.v1.codec.replies import err
from data.refusal import SkerryError
from groups.kafka_errors import KafkaGroupError, UnknownMemberId


class RefusalRootTests:
    def test_the_message_is_kept_as_given(self) -> None:
        """A ``|`` or a line break is the domain's text, not V1's business: the root keeps
        it (a Kafka error message carries it unchanged)."""
        assert SkerryError("topic a|b\nis odd").message == "topic a|b\nis odd"
        assert str(SkerryError()) == SkerryError.description

    def test_v1_escapes_what_its_line_cannot_carry(self) -> None:
        """V1's ERR line stays four separators and one line for such a message."""
        line = err("7", BadRequest("topic a|b\nis odd"))
        assert line == b"V1|7|ERR|BAD_REQUEST|topic a/b is odd\n"

    def test_kafka_group_refusals_are_refusals(self) -> None:
        """The Kafka coordinator's refusals derive from the root, message included."""
        assert issubclass(KafkaGroupError, SkerryError)
        assert UnknownMemberId("member m left").message == "member m left"
