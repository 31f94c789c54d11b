"""Property tests of the codec (hypothesis): robustness on any input, PRODUCE round trips,
CONSUME replies the SDK can read back, chunking invariance of the line splitter."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.errors import BadRequest, UnknownCommand
from broker.v1.codec import (
    COMMANDS,
    Codec,
    CodecLimits,
    CommandError,
    LineSplitter,
    Produce,
    consume_reply,
    err,
    is_plain_value,
)

CODEC = Codec(CodecLimits(max_message_bytes=4096))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAME_CHARS = "ABCXYZabcxyz0189._-"
names = st.text(NAME_CHARS, min_size=1, max_size=249).filter(lambda s: s not in (".", ".."))
# Keys: no whitespace, '|', ',' or ':' (and no surrogates: they cannot be UTF-8 encoded).
key_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="|,:").filter(
    lambda c: not c.isspace()
)
keys = st.text(key_chars, max_size=40).filter(lambda k: len(k.encode()) <= 255)
value_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="|,").filter(
    lambda c: not c.isspace()
)
plain_values = st.text(value_chars, max_size=60)
spaces = st.text(" ", min_size=1, max_size=3)
tokens = st.sampled_from(
    [
        "t",
        "g",
        "c",
        "0",
        "1",
        "-1",
        "k:v",
        "k:a,b",
        "acks=all",
        "acks=2",
        "enc=b64",
        "max=0",
        "detail=true",
        "partition=1",
        "..",
        "x=",
        "=",
        ":",
        "YQ==",
        "earliest",
        "99999999999999999999",
        "leader",
        "assignor=range",
        "\u00e9",
        "\t",
        "ts=5",
        "min_isr=1",
    ]
)


@dataclass
class Rec:
    offset: int
    payload: bytes
    key: bytes | None = None
    timestamp: int = 0


def check_refusal(exc: CommandError) -> None:
    assert isinstance(exc.error, BadRequest | UnknownCommand)
    line = err(exc.cid, exc.error)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert len(line[:-1].split(b"|")) == 5


class RobustnessTests:

    @SETTINGS
    @given(st.binary(max_size=300))
    def test_arbitrary_bytes(self, line: bytes) -> None:
        """On any bytes, parse_command returns None or a command, or raises CommandError
        with a well-formed error reply; never any other exception."""
        try:
            CODEC.parse_command(line)
        except CommandError as exc:
            check_refusal(exc)

    @SETTINGS
    @given(
        st.text(max_size=8),
        st.sampled_from([*COMMANDS, "NOPE", ""]),
        st.lists(tokens | st.text(max_size=10), max_size=8),
        st.sampled_from([" ", "  ", "\t"]),
    )
    def test_near_valid_lines(self, cid: str, command: str, args: list[str], sep: str) -> None:
        """Lines with a good envelope and shuffled plausible arguments never crash the codec,
        and a refusal echoes the request's cid unless the envelope itself was bad."""
        line = f"V1|{cid}|{command}|{sep.join(args)}".encode("utf-8", "surrogatepass")
        try:
            CODEC.parse_command(line)
        except CommandError as exc:
            check_refusal(exc)
            if exc.cid != "0":
                assert exc.cid == cid


class ProduceRoundTripTests:

    @SETTINGS
    @given(
        st.data(),
        st.text("0123456789abc", min_size=1, max_size=6),
        names,
        keys,
        st.one_of(
            plain_values.map(lambda v: (v.encode(), False)),
            st.binary(max_size=200).map(lambda b: (b, True)),
        ),
        st.sampled_from([None, "0", "1", "all"]),
        st.none() | st.integers(0, 2**63 - 1),
        spaces,
    )
    def test_formatted_produce_parses_back(
        self,
        data: st.DataObject,
        cid: str,
        topic: str,
        key: str,
        value: tuple[bytes, bool],
        acks: str | None,
        partition: int | None,
        sep: str,
    ) -> None:
        """Any valid PRODUCE, formatted as a request line (options in any order, runs of
        spaces), parses back into the same Produce command."""
        payload, b64 = value
        text = base64.b64encode(payload).decode() if b64 else payload.decode()
        options = []
        if acks is not None:
            options.append(f"acks={acks}")
        if partition is not None:
            options.append(f"partition={partition}")
        if b64:
            options.append("enc=b64")
        options = data.draw(st.permutations(options))
        args = sep.join([topic, f"{key}:{text}", *options])
        line = f"V1|{cid}|PRODUCE|{sep}{args}".encode() + data.draw(st.sampled_from([b"", b"\r"]))
        expected = Produce(cid, topic, key, payload, acks or "1", partition, b64)
        assert CODEC.parse_command(line) == expected


class ConsumeReplyPropertyTests:

    @SETTINGS
    @given(st.lists(st.binary(max_size=30), max_size=20), st.booleans())
    def test_sdk_reads_back_what_was_stored(self, payloads: list[bytes], b64: bool) -> None:
        """Reading a CONSUME reply like the SDK (split messages= on ',' and each item on the
        first ':') returns the stored values in order: all with enc=b64, else the longest
        plain prefix; the reply never carries a non-plain value raw."""
        records = [Rec(i, p) for i, p in enumerate(payloads)]
        try:
            line, count = consume_reply("1", records, len(records) - 1, b64=b64)
        except BadRequest:
            assert not b64 and records and not is_plain_value(records[0].payload)
            return
        body = line.decode().rstrip("\n").split("|", 3)[3]
        messages = body[len("messages=") : body.rindex(" hw=")]
        items = [item.split(":", 1) for item in messages.split(",")] if messages else []
        got = [
            (int(o), base64.b64decode(v, validate=True) if b64 else v.encode()) for o, v in items
        ]
        assert got == [(r.offset, r.payload) for r in records[:count]]
        if not b64:
            plain = 0
            while plain < len(records) and is_plain_value(records[plain].payload):
                plain += 1
            assert count == plain
        else:
            assert count == len(records)


class SplitterPropertyTests:

    @SETTINGS
    @given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=10), st.integers(0, 40))
    def test_split_points_do_not_matter(self, data: bytes, cuts: list[int], limit: int) -> None:
        """Whatever the split points, the splitter yields the same lines and markers as when
        the whole stream is fed at once."""
        whole = LineSplitter(limit).feed(data)
        splitter = LineSplitter(limit)
        pieces = []
        previous = 0
        for cut in sorted(c for c in cuts if c <= len(data)) + [len(data)]:
            pieces.extend(splitter.feed(data[previous:cut]))
            previous = cut
        assert pieces == whole
