"""The golden bytes of spec/tank-notes.md §6, as hex, plus the messages they carry.

Requests were captured from libtank and replies accepted by it (notes §6 header). Two are
incomplete in the notes and are marked: §6.2's tail is elided ("...") and rebuilt here
from its stated layout (its announced lengths 0x93 and 0x7c check the rebuild), and
§6.3's snappy block is given only as a prefix.
"""

from __future__ import annotations

TS = 1_700_000_000_000  # 68e5cf8b01000000 as a u64 LE


def h(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def ts_hex(ts: int) -> str:
    return ts.to_bytes(8, "little").hex()


# §6.1 Produce: 2 messages, one keyed, same timestamp
PRODUCE_1 = h("013100000002000100000003632b2b0000000000010274310100001a08010068e5cf8b010000"
              "026b310568656c6c6f0205776f726c64")
PRODUCE_1_REPLY = h("01 05000000 01000000 00")
PRODUCE_1_BUNDLE = h("08 01 0068e5cf8b010000 02 6b31 05 68656c6c6f 02 05 776f726c64")


def _produce_2() -> bytes:
    """§6.2, rebuilt: m0..m19, a new timestamp (TS + i // 5) on every fifth message.
    Only the head and m0..m6 are printed in the notes; the rest follows their pattern."""
    msgs = ""
    for i in range(20):
        content = f"m{i}".encode()
        if i % 5 == 0:
            msgs += "00" + ts_hex(TS + i // 5)
        else:
            msgs += "02"
        msgs += f"{len(content):02x}" + content.hex()
    return h("01 93000000 0200 02000000 03632b2b 00 00000000 01 027431 01 0000 7c 00 14" + msgs)


PRODUCE_2 = _produce_2()
PRODUCE_2_PRINTED_PREFIX = h(
    "01 93000000 0200 02000000 03632b2b 00 00000000 01 027431 01 0000 7c"
    "00 14 00 0068e5cf8b010000 02 6d30 02 02 6d31  02 02 6d32  02 02 6d33  02 02 6d34"
    "00 0168e5cf8b010000 02 6d35 02 02 6d36")

# §6.3 Produce: 4 × 300-byte messages with key "kk", snappy (prefix only in the notes).
# Note its timestamp is TS + 1 (0168e5cf8b010000).
PRODUCE_3_PREFIX = h("01 68000000 0200 03000000 03632b2b 00 00000000 01 027431 01 0000 51"
                     "11 d009 38 01 0168e5cf8b010000 026b6b ac02 78fe0100 fe0100")
PRODUCE_3_LENGTH = 5 + 0x68
PRODUCE_3_PLAIN = (h("01 0168e5cf8b010000 02 6b6b ac02") + b"x" * 300
                   + (h("03 02 6b6b ac02") + b"x" * 300) * 3)

# §6.4 Produce to an unknown topic
PRODUCE_4 = h("012500000002000400000003632b2b000000000001046e6f70650100000c04000068e5cf8b0100000178")
PRODUCE_4_REPLY = h("01 05000000 04000000 ff")

# §6.5 Consume requests
CONSUME_5 = h("02 26000000 0200 05000000 00 0000000000000000 00000000 01 027431 01 0000"
              "0000000000000000 40000000")
CONSUME_7 = h("02 26000000 0200 07000000 00 f401000000000000 00000000 01 027431 01 0000"
              "ffffffffffffffff 00100000")
CONSUME_8 = h("02 26000000 0200 08000000 00 0000000000000000 00000000 01 027431 01 0000"
              "e803000000000000 00100000")

# §6.6 Consume replies
CONSUME_5_BUNDLE_1 = h("20 01 0068e5cf8b010000 02 6b31 05 68656c6c6f 02 05 776f726c64"
                       "02 02 6d30 02 02 6d31 02 02 6d32 02 02 6d33 02 02 6d34"
                       "00 0168e5cf8b010000 02 6d35")
CONSUME_5_CUT = h("35 20 00 0168")
CONSUME_5_REPLY = h("02 64000000 20000000 05000000 01 027431 01"
                    "0000 00 0100000000000000 1a00000000000000 40000000"
                    "3a") + CONSUME_5_BUNDLE_1 + CONSUME_5_CUT
CONSUME_7_REPLY = h("02 24000000 20000000 07000000 01 027431 01 0000 00"
                    "0100000000000000 1a00000000000000 00000000")
CONSUME_8_REPLY = h("02 2c000000 28000000 08000000 01 027431 01 0000 01"
                    "0000000000000000 1a00000000000000 00000000 0100000000000000")

# §6.7 DiscoverPartitions, CreateTopic
DISCOVER_9 = h("06 07000000 09000000 02 7431")
DISCOVER_9_REPLY = h("06 19000000 09000000 02 7431 0100 0100000000000000 1a00000000000000")
CREATE_10 = h("07 0a000000 0a000000 02 7432 0300 00")
CREATE_10_REPLY = h("07 08000000 0a000000 02 7432 00")

PING = h("03 00000000")

ALL_REQUESTS = [PRODUCE_1, PRODUCE_2, PRODUCE_4, CONSUME_5, CONSUME_7, CONSUME_8,
                DISCOVER_9, CREATE_10, PING]
ALL_REPLIES = [PRODUCE_1_REPLY, PRODUCE_4_REPLY, CONSUME_5_REPLY, CONSUME_7_REPLY,
               CONSUME_8_REPLY, DISCOVER_9_REPLY, CREATE_10_REPLY, PING]
