"""Run the real apache-iggy client's consumer-group consumer once, in its own process.

``python -m tests.iggy.group_consumer <port> <stream> <topic> <group> <commit> <expect>``
consumes until ``expect`` messages arrived (or 20 s passed) and the broker holds the
offsets of what it consumed, prints the messages as JSON lines
``[partition, offset, payload-hex]`` and exits, which closes its connection (the client
library keeps no public way to close one, and a consumer left behind would stay a group
member). ``commit`` is ``when_polling`` (the broker stores offsets as it serves polls) or
``after_each`` (the client stores each offset itself with StoreConsumerOffset).
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
from datetime import timedelta
from typing import Any

from apache_iggy import (
    AutoCommit,
    AutoCommitAfter,
    AutoCommitWhen,
    IggyClient,
    PollingStrategy,
)

from broker.iggy import codec
from broker.iggy.codec import Consumer, ConsumerKind, Identifier
from tests.iggy.harness import RawClient


async def consume(port: int, stream: str, topic: str, group: str, commit: str,
                  expect: int) -> list[tuple[int, int, str]]:
    client = IggyClient(f"127.0.0.1:{port}")
    await client.connect()
    await client.login_user("iggy", "iggy")
    auto = (AutoCommit.When(AutoCommitWhen.PollingMessages()) if commit == "when_polling"
            else AutoCommit.After(AutoCommitAfter.ConsumingEachMessage()))
    consumer = await client.consumer_group(
        group, stream, topic, polling_strategy=PollingStrategy.Next(), batch_length=4,
        auto_commit=auto, poll_interval=timedelta(milliseconds=20))
    got: list[tuple[int, int, str]] = []
    done = asyncio.Event()

    async def on_message(message: Any) -> None:
        got.append((message.partition_id(), message.offset(), message.payload().hex()))
        if len(got) >= expect:
            done.set()

    stop = asyncio.Event()
    task = asyncio.ensure_future(consumer.consume_messages(on_message, stop))
    try:
        await asyncio.wait_for(done.wait(), 20)
        await _offsets_stored(port, stream, topic, group, got)
    except TimeoutError:
        pass
    stop.set()
    await task
    return got


async def _offsets_stored(port: int, stream: str, topic: str, group: str,
                          got: list[tuple[int, int, str]]) -> None:
    """Wait until the broker holds the group's offset of the last message consumed from
    each partition (the client stores them in the background after consuming)."""
    last: dict[int, int] = {}
    for partition, offset, _ in got:
        last[partition] = max(offset, last.get(partition, -1))
    client = RawClient(port)
    client.login()
    consumer = Consumer(ConsumerKind.CONSUMER_GROUP, Identifier(group))
    try:
        while True:
            stored = {}
            for partition in last:
                reply = client.call(codec.GetConsumerOffset(consumer, Identifier(stream),
                                                            Identifier(topic), partition))
                stored[partition] = struct.unpack_from("<Q", reply, 8 + 12)[0] \
                    if len(reply) > 8 else -1
            if all(stored[p] >= last[p] for p in last):
                return
            await asyncio.sleep(0.02)
    finally:
        client.close()


def main(argv: list[str]) -> int:
    port, stream, topic, group, commit, expect = argv
    for item in asyncio.run(consume(int(port), stream, topic, group, commit, int(expect))):
        print(json.dumps(item))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Skip interpreter teardown: the client library's runtime can abort while being torn
    # down with tasks still pending; the kernel closes the connection either way.
    os._exit(code)
