"""Table-driven tests of the additive data-tool commands of the V1 codec: FETCH (its
``enc=raw`` form included) and PRODUCE_BATCH (the request, the batch layout, the replies).

The ``FooTests`` classes are plain pytest classes (so tables can use ``parametrize``).
"""

from __future__ import annotations

import base64
import binascii
import struct

import pytest

from broker.client.codec import encode_batch
from broker.v1.codec import (
    ALL_COMMANDS,
    DATA_COMMANDS,
    Codec,
    CodecLimits,
    CommandError,
    Fetch,
    ProduceBatch,
    decode_batch,
    fetch_raw_reply,
    fetch_reply,
    ok,
    produce_batch_payload,
)
from broker.v1.errors import code_for

CODEC = Codec()


def batch(keys: list[bytes], values: list[bytes]) -> bytes:
    """The batch layout written out by hand (independent of the encoders under test)."""
    return (struct.pack("<I", len(values)) + bytes(len(k) for k in keys)
            + b"".join(struct.pack("<I", len(v)) for v in values) + b"".join(keys) + b"".join(values))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def refusal(line: bytes, codec: Codec = CODEC) -> CommandError:
    with pytest.raises(CommandError) as info:
        codec.parse_command(line)
    return info.value


BINARY = [b"a,b|c\nd\x00e", b"", b"\r\n", bytes(range(256)), b"=" * 7]
KEYS = [b"k", b"", b"user-1", b"\xff\x00binary key", b"x" * 255]

VALID: list[tuple[bytes, object]] = [
    (b"V1|1|FETCH|t 0 5", Fetch("1", "t", 0, 5)),
    (b"V1|1|FETCH|t 2 0 max=10 max_bytes=99", Fetch("1", "t", 2, 0, 10, 99)),
    (b"V1|1|FETCH|t 0 0 enc=b64", Fetch("1", "t", 0, 0, None, None, False)),
    (b"V1|1|FETCH|t 0 0 enc=raw", Fetch("1", "t", 0, 0, None, None, True)),
    (b"V1|1|FETCH|t 0 0 enc=raw max=3", Fetch("1", "t", 0, 0, 3, None, True)),
    (b"V1|7|PRODUCE_BATCH|orders 1 data=" + b64(batch([b"k"], [b"v"])).encode(),
     ProduceBatch("7", "orders", 1, (b"k",), (b"v",))),
    (b"V1|7|PRODUCE_BATCH|orders 0 acks=all data=" + b64(batch(KEYS, BINARY)).encode(),
     ProduceBatch("7", "orders", 0, tuple(KEYS), tuple(BINARY), "all")),
    (b"V1|7|PRODUCE_BATCH|o 3 pid=spark.1 seq=40 acks=0 data=" + b64(batch([b""] * 2, [b"", b""])).encode(),
     ProduceBatch("7", "o", 3, (b"", b""), (b"", b""), "0", "spark.1", 40)),
]

REFUSED: list[tuple[bytes, str]] = [
    (b"V1|2|FETCH|t 0 0 enc=hex", "invalid encoding 'hex'; expected enc=b64 or enc=raw"),
    (b"V1|2|PRODUCE_BATCH|t 0", "PRODUCE_BATCH needs data=<base64 batch>"),
    (b"V1|2|PRODUCE_BATCH|t", "PRODUCE_BATCH expects 2 positional arguments, got 1"),
    (b"V1|2|PRODUCE_BATCH|t 0 extra data=AAAA", "unexpected argument 'extra'"),
    (b"V1|2|PRODUCE_BATCH|t x data=AAAA", "partition must be a non-negative integer"),
    (b"V1|2|PRODUCE_BATCH|t 0 acks=2 data=AAAA", "invalid ack mode"),
    (b"V1|2|PRODUCE_BATCH|t 0 seq=1 data=AAAA", "pid= and seq= go together"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=AA", "data is not valid base64"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=AB==", "data is not canonical base64"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=AAAA", "batch of 3 bytes is shorter than its 4-byte message count"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(struct.pack("<I", 0)).encode(), "a batch holds at least one message"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(struct.pack("<I", 3) + b"\x00").encode(),
     "too short for the lengths of 3 messages"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(batch([b"k"], [b"v"]) + b"!").encode(),
     "add up to 11 bytes; the batch has 12"),
    (b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(batch([b"k"], [b"v"])[:-1]).encode(),
     "add up to 11 bytes; the batch has 10"),
]


class DataCommandParseTests:

    @pytest.mark.parametrize(("line", "expected"), VALID, ids=[repr(v[0])[:50] for v in VALID])
    def test_valid_line(self, line: bytes, expected: object) -> None:
        """Each well-formed FETCH / PRODUCE_BATCH line parses into exactly the expected
        command; batch keys and values come back byte for byte, whatever bytes they hold."""
        assert CODEC.parse_command(line) == expected

    @pytest.mark.parametrize(("line", "message"), REFUSED, ids=[repr(r[0])[:50] for r in REFUSED])
    def test_refused_line(self, line: bytes, message: str) -> None:
        """A malformed request is BAD_REQUEST with the request's cid and a message that says
        what is wrong; nothing is half-parsed."""
        error = refusal(line)
        assert (error.cid, code_for(error.error)) == ("2", "BAD_REQUEST")
        assert message in error.error.message

    def test_both_commands_are_data_commands(self) -> None:
        """FETCH and PRODUCE_BATCH are additive data commands of the codec's command set."""
        assert DATA_COMMANDS == {"FETCH": Fetch, "PRODUCE_BATCH": ProduceBatch}
        assert set(DATA_COMMANDS) <= set(ALL_COMMANDS)

    def test_value_over_the_message_limit_refuses_the_whole_batch(self) -> None:
        """One value over max_message_bytes refuses the batch (BAD_REQUEST naming the size);
        a value of exactly the limit is accepted."""
        codec = Codec(CodecLimits(max_message_bytes=10))
        fits = b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(batch([b"", b""], [b"x" * 10, b"y"])).encode()
        assert codec.parse_command(fits).values == (b"x" * 10, b"y")  # type: ignore[union-attr]
        over = b"V1|2|PRODUCE_BATCH|t 0 data=" + b64(batch([b"", b""], [b"y", b"x" * 11])).encode()
        assert "value is 11 bytes; the maximum message size is 10 bytes" in refusal(over, codec).error.message


class BatchLayoutTests:

    @pytest.mark.parametrize("count", [1, 2, 3, 100])
    def test_client_encoder_matches_the_broker_decoder(self, count: int) -> None:
        """broker.client.codec.encode_batch writes exactly the documented layout, and
        decode_batch reads it back to the same keys and values."""
        keys = [KEYS[i % len(KEYS)] for i in range(count)]
        values = [BINARY[i % len(BINARY)] + b"%d" % i for i in range(count)]
        assert encode_batch(keys, values) == batch(keys, values)
        assert decode_batch(batch(keys, values), 1 << 20) == (tuple(keys), tuple(values))

    def test_encoder_refuses_what_the_layout_cannot_hold(self) -> None:
        """A key over 255 bytes, an empty batch and mismatched keys/values are refused before
        anything is sent."""
        with pytest.raises(ValueError):
            encode_batch([b"k" * 256], [b"v"])
        with pytest.raises(ValueError):
            encode_batch([], [])
        with pytest.raises(ValueError):
            encode_batch([b"a"], [b"v", b"w"])


class DataReplyTests:

    def test_fetch_reply_base64(self) -> None:
        """FETCH's default reply carries the records in base64 on its one line."""
        records = b"\x00\n|,raw bytes"
        line = fetch_reply("9", hw=4, start=0, next_offset=3, count=2, data=records)
        assert line == b"V1|9|OK|hw=4 start=0 next=3 count=2 data=" + base64.b64encode(records) + b"\n"

    @pytest.mark.parametrize("records", [b"", b"\n", b"\x00\n|,raw\r\nbytes" * 3])
    def test_fetch_raw_reply_is_a_line_then_exactly_size_bytes(self, records: bytes) -> None:
        """enc=raw: the reply line ends with size=<n> and exactly n raw bytes follow it, so a
        newline inside the records cannot end the reply early."""
        reply = fetch_raw_reply("9", hw=4, start=1, next_offset=3, count=2, data=records)
        head, _, rest = reply.partition(b"\n")
        assert head == b"V1|9|OK|hw=4 start=1 next=3 count=2 size=%d" % len(records)
        assert rest == records

    def test_produce_batch_payload(self) -> None:
        """PRODUCE_BATCH answers first offset, count and hw; an idempotent batch adds how many
        of its messages the partition already held."""
        assert ok("7", produce_batch_payload(1, 40, 5, 44)) == b"V1|7|OK|partition=1 offset=40 count=5 hw=44\n"
        assert produce_batch_payload(0, 3, 0, 9, 5) == "partition=0 offset=3 count=0 hw=9 duplicates=5"

    def test_base64_alphabet_of_every_length_is_accepted(self) -> None:
        """Every batch length (so every padding: none, =, ==) decodes, canonical padding only."""
        for size in range(1, 12):
            data = batch([b""], [b"\xff" * size])
            line = b"V1|1|PRODUCE_BATCH|t 0 data=" + binascii.b2a_base64(data, newline=False)
            assert CODEC.parse_command(line).values == (b"\xff" * size,)  # type: ignore[union-attr]
