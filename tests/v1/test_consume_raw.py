"""CONSUME answered straight from stored bytes says exactly what the record-by-record reply
says: the same line for plain and base64 values, and a refusal (None, so the handler takes
the record path that stops before the offending value) whenever a value is not plain."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.v1 import codec
from data.writer import build_batch

_values = st.one_of(
    st.sampled_from([b"", b"paid", b"a:b", b"x" * 300, b"caf\xc3\xa9", b"\x01ctrl", b"a,b",
                     b"a|b", b"a b", b"a\nb", b"\x1f", b"\xff", b"\xc3", b"\xa9", b"\xe2\x80\xa8"]),
    st.binary(max_size=20),
)


def _records(values: list[bytes], first: int) -> tuple[bytes, list[int], list[SimpleNamespace]]:
    raw, ends = build_batch(values, None, None, None, first, 1_700_000_000_000_000, 0)
    records = [SimpleNamespace(offset=first + i, timestamp=1_700_000_000_000_000, payload=v,
                               key=None) for i, v in enumerate(values)]
    return raw, ends[1:], records


@settings(max_examples=1500, deadline=None)
@given(st.lists(_values, max_size=12), st.integers(0, 2**40))
def test_raw_reply_matches_the_record_reply(values: list[bytes], first: int) -> None:
    """Plain: the same line when every value is plain, else None. Base64: always the same
    line. Offsets count from the first record's offset."""
    raw, ends, records = _records(values, first)
    plain = all(codec.is_plain_value(v) for v in values)
    fast = codec.consume_reply_raw("7", raw, ends, first, 99)
    if plain:
        assert fast == codec.consume_reply("7", records, 99)[0]
    else:
        assert fast is None
    assert codec.consume_reply_raw("7", raw, ends, first, 99, b64=True) == \
        codec.consume_reply("7", records, 99, b64=True)[0]


def test_empty_read_is_an_empty_message_list() -> None:
    """No records: ``messages= hw=<n>``, as the record path answers."""
    assert codec.consume_reply_raw("3", b"", [], 5, 4) == b"V1|3|OK|messages= hw=4\n"
    assert codec.consume_reply("3", [], 4)[0] == b"V1|3|OK|messages= hw=4\n"
