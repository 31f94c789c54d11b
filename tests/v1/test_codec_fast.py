"""The PRODUCE fast path agrees with the full parser: whatever the scan the transport runs
(``Codec.scan_produce``: compiled, or its pure twin ``_scan_produce_py``, the one place the
fast-path rules are written) takes, parse_command accepts with the same fields; the shapes it
declines still parse or fail precisely."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.v1 import codec
from broker.v1.codec import Codec, CodecLimits, CommandError, Produce

CODEC = Codec(CodecLimits(max_message_bytes=64))

_tokens = st.sampled_from([b"V1", b"|", b"PRODUCE", b" ", b"  ", b":", b",", b"acks=", b"0",
                           b"1", b"all", b"2", b"orders", b".", b"..", b"k", b"v", b"\r",
                           b"\t", b"\xc3\xa9", b"\xa0", b"x" * 70, b"=", b"~", b"{"])


def fast(line: bytes) -> tuple[bytes, bytes, bytes, bytes, str] | None:
    """``(cid, topic, key, value, acks)`` when the transport's scan takes ``line`` (with its
    line feed) as one plain PRODUCE, else None; the pure twin must say the same."""
    buffer = line + b"\n"
    run, pos = CODEC.scan_produce(buffer, 0, 1, 1 << 20)
    twin = codec._scan_produce_py(buffer, 0, 1, 1 << 20, CODEC.limits.max_message_bytes)
    assert (run, pos) == twin
    if not run or pos != len(buffer):
        return None
    cid, topic, key, value, acks, start = run[0]
    assert start == 0
    return cid, topic, key, value, acks


def _check(line: bytes) -> None:
    taken = fast(line)
    if taken is None:
        return
    cid, topic, key, value, acks = taken
    try:
        slow = CODEC.parse_command(line)
    except CommandError as exc:  # pragma: no cover - would be the bug this test looks for
        raise AssertionError(f"fast path accepted {line!r}, parser said {exc.error}") from exc
    assert isinstance(slow, Produce)
    assert (slow.cid.encode(), slow.topic.encode(), slow.key.encode(), slow.value, slow.acks) == \
        (cid, topic, key, value, acks)
    assert slow.partition is None and slow.b64 is False


@settings(max_examples=3000, deadline=None)
@given(st.lists(_tokens, max_size=14).map(b"".join))
def test_fast_path_never_disagrees_with_the_parser(tail: bytes) -> None:
    """Random lines built from PRODUCE-ish pieces: fast path is a subset of the parser."""
    _check(b"V1|7|PRODUCE|" + tail)
    _check(tail)


def test_fast_path_examples() -> None:
    """The common shapes take the fast path; the unusual ones are left to the parser."""
    assert fast(b"V1|42|PRODUCE|orders user1:created") == \
        (b"42", b"orders", b"user1", b"created", "1")
    assert fast(b"V1|43|PRODUCE|orders user1:paid acks=all\r") == \
        (b"43", b"orders", b"user1", b"paid", "all")
    assert fast(b"V1|1|PRODUCE|t :") == (b"1", b"t", b"", b"", "1")
    for declined in [b"V1|4|PRODUCE|orders nocolon", b"V1|4|PRODUCE|.. a:b",
                     b"V1|4|PRODUCE|t  a:b", b"V1|4|PRODUCE|t a:b acks=2",
                     b"V1|4|PRODUCE|t a:b enc=b64", b"V1|4|PRODUCE|t a:" + b"x" * 65,
                     "V1|4|PRODUCE|t a:\u00e9".encode(),
                     b"V1|4|PRODUCE|__iggy.0 a:b", b"V1|4|PRODUCE|__x a:b"]:
        assert fast(declined) is None, declined
    # Topics starting with "__" go to the handlers, which refuse reserved names.
    assert CODEC.parse_command(b"V1|4|PRODUCE|__x a:b").topic == "__x"
