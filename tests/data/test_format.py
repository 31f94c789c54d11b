"""The record byte layout, the user-header encoding and the V1 key header (data/format.py)."""

from __future__ import annotations

import os
import uuid

import pytest
import xxhash

from data import format as fmt
from data.index import positions_from_bytes, time_entries_from_bytes
from data.store import StorageConfig, Store, TopicConfig
from data.writer import random_ids
from tests.data.support import FakeClock, partition_path


def _le(value: int, size: int) -> bytes:
    return value.to_bytes(size, "little")


def _hand_made(offset: int, timestamp: int, ident: int, origin: int, payload: bytes, user_headers: bytes) -> bytes:
    """A record assembled byte by byte from the notes, independently of data/format.py."""
    after_checksum = (
        _le(ident, 16)
        + _le(offset, 8)
        + _le(timestamp, 8)
        + _le(origin, 8)
        + _le(len(user_headers), 4)
        + _le(len(payload), 4)
        + _le(0, 8)
        + payload
        + user_headers
    )
    return _le(xxhash.xxh3_64_intdigest(after_checksum), 8) + after_checksum


class GoldenBytesTests:
    __test__ = True  # collected despite the FooTests name (STYLE §6)

    def test_store_writes_exactly_the_documented_bytes(self, tmp_path):
        """Two appended messages land in the .log as the hand-assembled 64-byte header,
        payload, user headers; checksum = xxh3_64(record[8:]); indexes point at them."""
        clock = FakeClock(1_700_000_000_123_456)
        store = Store(str(tmp_path), StorageConfig(), now_us=clock)
        plog = store.create_topic("golden", TopicConfig(partitions=1)).partitions[0]
        key_headers = (
            bytes([2]) + _le(3, 4) + b"key" + bytes([2]) + _le(5, 4) + b"user1"
        )
        ident = 0x0123456789ABCDEF_FEDCBA9876543210
        first = plog.append(
            [b"hello", b""],
            [key_headers, b""],
            ids=[ident, 7],
            origin_timestamps=[1_699_999_999_000_000, 0],
        )
        assert first == 0
        expected = _hand_made(0, clock.now, ident, 1_699_999_999_000_000, b"hello", key_headers) + _hand_made(
            1, clock.now, 7, 0, b"", b""
        )
        store.close()
        pdir = partition_path(str(tmp_path), "golden", 0)
        with open(os.path.join(pdir, "00000000000000000000.log"), "rb") as f:
            on_disk = f.read()
        assert on_disk == expected
        assert len(expected) == 64 + 5 + len(key_headers) + 64
        assert int.from_bytes(on_disk[:8], "little") == xxhash.xxh3_64_intdigest(on_disk[8 : 64 + 5 + len(key_headers)])
        with open(os.path.join(pdir, "00000000000000000000.index"), "rb") as f:
            assert list(positions_from_bytes(f.read())) == [0, 64 + 5 + len(key_headers)]
        with open(os.path.join(pdir, "00000000000000000000.timeindex"), "rb") as f:
            ts, rel = time_entries_from_bytes(f.read())
        assert (list(ts), list(rel)) == ([clock.now], [0])

    def test_field_constants_match_the_layout(self):
        """The named offsets are the byte positions of the spec's header fields."""
        record = _hand_made(42, 1000, (1 << 127) + 5, 999, b"pay", b"")
        assert fmt.HEADER_SIZE == 64
        assert int.from_bytes(record[fmt.CHECKSUM_RANGE], "little") == xxhash.xxh3_64_intdigest(record[8:])
        assert int.from_bytes(record[fmt.ID_RANGE], "little") == (1 << 127) + 5
        assert int.from_bytes(record[fmt.OFFSET_RANGE], "little") == 42
        assert int.from_bytes(record[fmt.TIMESTAMP_RANGE], "little") == 1000
        assert int.from_bytes(record[fmt.ORIGIN_TIMESTAMP_RANGE], "little") == 999
        assert int.from_bytes(record[fmt.USER_HEADERS_LENGTH_RANGE], "little") == 0
        assert int.from_bytes(record[fmt.PAYLOAD_LENGTH_RANGE], "little") == 3
        assert record[fmt.RESERVED_RANGE] == bytes(8)
        assert fmt.decode_header(record) == fmt.RecordHeader(
            xxhash.xxh3_64_intdigest(record[8:]), (1 << 127) + 5, 42, 1000, 999, 0, 3, 0
        )

    def test_encode_record_matches_hand_made_and_round_trips(self):
        """encode_record produces the hand-assembled bytes; decode_record gives them back."""
        uh = fmt.key_header(b"k")
        raw = fmt.encode_record(3, 10, 99, 11, b"payload", uh)
        assert raw == _hand_made(3, 10, 99, 11, b"payload", uh)
        record, end = fmt.decode_record(raw + b"trailing", 0)
        assert end == len(raw)
        assert record == fmt.Record(3, 10, 99, 11, b"payload", uh)
        assert record.to_bytes() == raw
        assert record.key == b"k"


class VerifyTests:
    __test__ = True  # collected despite the FooTests name (STYLE §6)

    @pytest.mark.parametrize(
        ("damage", "reason"),
        [
            (lambda r: r[:40], "partial header"),
            (lambda r: r[:-1], "partial record"),
            (lambda r: r[:56] + _le(1, 8) + r[64:], "reserved"),
            (lambda r: r[:70] + bytes([r[70] ^ 1]) + r[71:], "checksum mismatch"),
            (lambda r: r[:52] + _le(10_000, 4) + r[56:], "partial record"),
        ],
    )
    def test_verify_record_rejects_damage(self, damage, reason):
        """verify_record names what is wrong: partial bytes, a non-zero reserved, a bad
        length, a flipped payload byte."""
        raw = fmt.encode_record(0, 1, 2, 3, b"some payload")
        with pytest.raises(ValueError, match=reason):
            fmt.verify_record(damage(raw))

    def test_verify_record_accepts_intact(self):
        """An intact record verifies and the returned position is its end."""
        raw = fmt.encode_record(5, 1, 2, 3, b"x" * 300, fmt.key_header(b"abc"))
        assert fmt.verify_record(raw) == len(raw)


class RecordChecksumsTests:
    __test__ = True

    @staticmethod
    def _records(sizes: list[int]) -> bytes:
        return b"".join(_hand_made(i, 7, i + 1, 7, os.urandom(size - 64), b"") for i, size in enumerate(sizes))

    @pytest.mark.parametrize("sizes", [[64], [164] * 3, [64, 300, 65, 1000, 164], [100 + i % 7 for i in range(9000)]])
    def test_each_record_checksum_as_stored(self, sizes):
        """Records back to back (from a non-zero start, in every buffer type the store and
        readers hand it): the checksum of each, equal to the one in its header, also for a
        run longer than one splitter and for the same shape asked again (cached splitter)."""
        area = b"pad" + self._records(sizes)
        want = [int.from_bytes(area[at:at + 8], "little") for at in
                [3 + sum(sizes[:i]) for i in range(len(sizes))]] if len(sizes) < 100 else None
        for buf in (area, bytearray(area), memoryview(area)):
            got = fmt.record_checksums(buf, 3, list(sizes))
            assert len(got) == len(sizes)
            if want is not None:
                assert got == want
            else:
                pos = 3
                for size, ck in zip(sizes, got, strict=True):
                    assert ck == int.from_bytes(area[pos:pos + 8], "little")
                    pos += size

    def test_digest_bytes_are_the_checksums_big_endian(self):
        sizes = [64, 164, 300, 99]
        area = self._records(sizes)
        digests = fmt.record_checksum_bytes(area, 0, sizes)
        assert [int.from_bytes(digests[i:i + 8], "big") for i in range(0, len(digests), 8)] == \
            fmt.record_checksums(area, 0, sizes)

    def test_a_flipped_byte_changes_only_its_record(self):
        sizes = [164, 170, 164]
        area = bytearray(self._records(sizes))
        before = fmt.record_checksums(area, 0, sizes)
        area[164 + 100] ^= 1
        after = fmt.record_checksums(area, 0, sizes)
        assert [a == b for a, b in zip(before, after, strict=True)] == [True, False, True]

    def test_records_past_the_buffer_are_an_error(self):
        import struct

        with pytest.raises(struct.error):
            fmt.record_checksums(self._records([164]), 0, [164, 164])


class UserHeaderTests:
    __test__ = True  # collected despite the FooTests name (STYLE §6)

    def test_round_trip_of_several_kinds(self):
        """Headers of several kinds encode as kind u8, len u32 LE, bytes and decode back."""
        headers = [(2, b"key", 2, b"user-1"), (1, b"raw", 1, b"\x00\xff"), (12, b"n", 12, _le(7, 8))]
        raw = fmt.encode_user_headers(headers)
        assert raw[:9] == bytes([2]) + _le(3, 4) + b"key" + bytes([2])
        assert fmt.decode_user_headers(raw) == headers
        assert fmt.encode_user_headers([]) == b""
        assert fmt.decode_user_headers(b"") == []

    @pytest.mark.parametrize(
        "headers",
        [
            [(0, b"k", 2, b"v")],
            [(2, b"k", 16, b"v")],
            [(2, b"", 2, b"v")],
            [(2, b"k", 2, b"")],
            [(2, b"k" * 256, 2, b"v")],
            [(2, b"k", 2, b"v" * 256)],
        ],
    )
    def test_encode_rejects_out_of_range(self, headers):
        """Kinds outside 1..15 and lengths outside 1..255 are refused with ValueError."""
        with pytest.raises(ValueError):
            fmt.encode_user_headers(headers)

    @pytest.mark.parametrize(
        "raw",
        [
            b"\x02",
            bytes([2]) + _le(3, 4) + b"ke",
            bytes([2]) + _le(3, 4) + b"key",
            bytes([2]) + _le(3, 4) + b"key" + bytes([2]) + _le(5, 4) + b"abc",
            bytes([0]) + _le(1, 4) + b"k" + bytes([2]) + _le(1, 4) + b"v",
            bytes([2]) + _le(0, 4) + bytes([2]) + _le(1, 4) + b"v",
            bytes([2]) + _le(1, 4) + b"k" + bytes([2]) + _le(300, 4) + b"v" * 300,
        ],
    )
    def test_decode_rejects_malformed(self, raw):
        """Truncated fields, bad kinds and bad lengths raise ValueError."""
        with pytest.raises(ValueError):
            fmt.decode_user_headers(raw)

    def test_key_header_and_extract_key(self):
        """A V1 key is one string header named "key"; the empty key is no header at all;
        extract_key finds it on the fast path and among other headers, and says None
        when there is none or the blob is malformed."""
        assert fmt.key_header(b"") == b""
        assert fmt.extract_key(b"") is None
        kh = fmt.key_header("clé".encode())
        assert fmt.decode_user_headers(kh) == [(2, b"key", 2, "clé".encode())]
        assert fmt.extract_key(kh) == "clé".encode()
        mixed = fmt.encode_user_headers([(2, b"trace", 1, b"\x01"), (2, b"key", 2, b"k9")])
        assert fmt.extract_key(mixed) == b"k9"
        assert fmt.extract_key(fmt.encode_user_headers([(2, b"other", 2, b"v")])) is None
        assert fmt.extract_key(kh[:-1]) is None
        with pytest.raises(ValueError):
            fmt.key_header(b"x" * 256)


class IdTests:
    __test__ = True  # collected despite the FooTests name (STYLE §6)

    def test_ids_are_unique_across_batches_and_rekeys(self, monkeypatch):
        """Ids stay distinct v4 UUIDs across many batches and across a new key (forced
        here every 64 KiB of keystream), and a batch larger than one key's share is drawn
        in parts."""
        from data import writer

        monkeypatch.setattr(writer, "_REKEY_BYTES", 65536)
        raw = b"".join(random_ids(n) for n in (1, 7, 1000, 4096, 5000, 3))
        assert len(raw) == 16 * 10107
        ids = {raw[i : i + 16] for i in range(0, len(raw), 16)}
        assert len(ids) == 10107
        for ident in list(ids)[:500]:
            u = uuid.UUID(int=int.from_bytes(ident, "little"))
            assert u.version == 4 and u.variant == uuid.RFC_4122

    def test_a_forked_child_does_not_repeat_its_parents_ids(self):
        """After fork the child draws a new key: without it, parent and child would hand
        out the same ids from the same keystream."""
        random_ids(1)  # the parent has a key before the fork
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its next ids to the parent, then out at once
            try:
                os.write(write, random_ids(4))
            finally:
                os._exit(0)
        os.close(write)
        child = b""
        while len(child) < 64:
            chunk = os.read(read, 64)
            if not chunk:
                break
            child += chunk
        os.close(read)
        os.waitpid(pid, 0)
        parent = random_ids(4)
        assert len(child) == 64 and child != parent
        assert {child[i : i + 16] for i in range(0, 64, 16)}.isdisjoint(
            parent[i : i + 16] for i in range(0, 64, 16))

    def test_generated_ids_are_uuid4(self):
        """Ids generated for a batch are distinct RFC 4122 version-4 UUIDs as u128."""
        raw = random_ids(500)
        ids = [int.from_bytes(raw[i : i + 16], "little") for i in range(0, len(raw), 16)]
        assert len(set(ids)) == 500
        for ident in ids:
            u = uuid.UUID(int=ident)
            assert u.version == 4
            assert u.variant == uuid.RFC_4122

    def test_store_replaces_zero_ids_only(self, tmp_path):
        """An id of 0 becomes a UUIDv4; a given non-zero id is stored unchanged."""
        store = Store(str(tmp_path))
        plog = store.create_topic("ids", TopicConfig(partitions=1)).partitions[0]
        plog.append([b"a", b"b", b"c"], ids=[0, 12345, 0])
        a, b, c = plog.read(0).records
        assert b.id == 12345
        assert uuid.UUID(int=a.id).version == 4 and uuid.UUID(int=c.id).version == 4
        assert a.id != c.id
        store.close()
