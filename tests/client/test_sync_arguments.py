"""The blocking client checks its arguments with the broker's own rules before it sends
anything, so a bad topic, group, member id or key is named as such instead of coming back
as a misleading broker answer (``message must be key:value`` for a topic with a space)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker.client.aio import Address
from broker.client.aio import RoutedProducer as AioRoutedProducer
from broker.client.codec import ClientError, InvalidArgumentError
from broker.client.sync import Client, RoutedProducer


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket that takes connections (in its backlog) and never answers: whatever a
    client sends there stays readable for the test."""
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield server
    finally:
        server.close()


def received(server: socket.socket) -> bytes:
    conn, _ = server.accept()
    conn.setblocking(False)
    try:
        return conn.recv(65536)
    except BlockingIOError:
        return b""
    finally:
        conn.close()


CALLS: list[tuple[str, Callable[[Client], Any], str]] = [
    ("produce topic with a space", lambda c: c.produce("bad name", "v", key="k"), "topic"),
    ("produce empty topic", lambda c: c.produce("", "v", key="k"), "topic"),
    ("produce topic with a pipe", lambda c: c.produce("a|b", "v", key="k"), "topic"),
    ("produce topic ..", lambda c: c.produce("..", "v"), "topic"),
    ("produce key with a colon", lambda c: c.produce("t", "v", key="a:b"), "key"),
    ("produce key with a space", lambda c: c.produce("t", "v", key=b"a b"), "key"),
    ("produce acks", lambda c: c.produce("t", "v", acks="2"), "acks"),
    ("produce negative partition", lambda c: c.produce("t", "v", partition=-1), "partition"),
    ("produce_many key", lambda c: c.produce_many("t", [(b"a,b", b"v", 0)]), "key"),
    ("produce_batch topic", lambda c: c.produce_batch("t t", 0, [b""], [b"v"]), "topic"),
    ("consume topic", lambda c: c.consume("t/x", 0, 0), "topic"),
    ("consume offset", lambda c: c.consume("t", 0, -5), "offset"),
    ("join group", lambda c: c.join("my group", "t", "m"), "group"),
    ("join member", lambda c: c.join("g", "t", "m:1"), "member_id"),
    ("commit generation", lambda c: c.commit("g", "t", "m", -1, 0, 0), "generation"),
    ("committed topic", lambda c: c.committed("g", "", 0), "topic"),
    ("create_topic topic", lambda c: c.create_topic("x" * 250, 3), "topic"),
    ("delete_group group", lambda c: c.delete_group("g|h", "t"), "group"),
]


class ArgumentTests:

    @pytest.mark.parametrize(("what", "call", "argument"), CALLS, ids=[c[0] for c in CALLS])
    def test_bad_arguments_are_named_and_nothing_is_sent(
            self, listener: socket.socket, what: str, call: Callable[[Client], Any],
            argument: str) -> None:
        """Each bad argument raises InvalidArgumentError (a ClientError and a ValueError)
        whose message starts with the argument's name, and the broker receives nothing."""
        client = Client(f"127.0.0.1:{listener.getsockname()[1]}", timeout=2)
        try:
            with pytest.raises(InvalidArgumentError) as caught:
                call(client)
        finally:
            client.close()
        assert caught.value.argument == argument
        assert str(caught.value).startswith(argument), str(caught.value)
        assert isinstance(caught.value, ClientError) and isinstance(caught.value, ValueError)
        assert received(listener) == b""

    def test_a_topic_name_error_says_the_rule(self, listener: socket.socket) -> None:
        """The message quotes the value and the rule the broker applies."""
        with Client(f"127.0.0.1:{listener.getsockname()[1]}", timeout=2) as client, \
                pytest.raises(InvalidArgumentError) as caught:
            client.produce("bad name", "v", key="k")
        assert str(caught.value) == ("topic 'bad name' is not a valid name: 1-249 characters "
                                     "of A-Z a-z 0-9 . _ - (not . or ..)")

    @pytest.mark.parametrize("bootstrap", ["127.0.0.1", "", "host:port", "127.0.0.1:0",
                                           "127.0.0.1:70000"])
    def test_a_bootstrap_without_a_port_is_a_client_error(self, bootstrap: str) -> None:
        """``Client("127.0.0.1")`` raises a ClientError naming the bootstrap argument, as
        docs/client.md promises for everything the client raises; so does RoutedProducer."""
        with pytest.raises(ClientError) as caught:
            Client(bootstrap)
        assert isinstance(caught.value, InvalidArgumentError)
        assert caught.value.argument == "bootstrap"
        assert caught.value.message.startswith("bootstrap must be host:port")
        with pytest.raises(ClientError):
            RoutedProducer(bootstrap).produce("t", b"v")

    def test_the_routed_producers_check_topic_and_key(self) -> None:
        """The routed producers (blocking and asyncio) refuse a bad topic or key before
        they ask any broker: nothing listens on the address, yet the error is the
        argument's, not a connection error."""
        with pytest.raises(InvalidArgumentError, match="^topic"):
            RoutedProducer("127.0.0.1:1").produce("bad name", b"v")
        with pytest.raises(InvalidArgumentError, match="^key"):
            RoutedProducer("127.0.0.1:1").produce("t", b"v", key=b"a:b")

        async def aio() -> None:
            producer = AioRoutedProducer(Address("127.0.0.1", 1))
            with pytest.raises(InvalidArgumentError, match="^topic"):
                await producer.produce("bad name", b"v")
            with pytest.raises(InvalidArgumentError, match="^acks"):
                await producer.produce("t", b"v", acks="2")

        asyncio.run(aio())


class NumberRuleTests:
    def test_whole_numbers_in_any_integer_type_pass(self) -> None:
        """Partitions and offsets may come as numpy integers (Spark, pandas) or digit
        strings; floats, negatives, booleans and words are refused with the argument's
        name."""
        import numpy as np

        from broker.client.codec import check_number

        assert check_number("partition", np.int64(2)) == 2
        assert check_number("offset", "17") == 17
        assert check_number("offset", 0) == 0
        for bad in (1.5, -1, True, "x", "-3", None):
            with pytest.raises(InvalidArgumentError, match="^offset must be a whole number"):
                check_number("offset", bad)
