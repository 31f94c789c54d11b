"""The blocking client over a loopback socket against a tiny fake broker built on the
server codec: the greeting ping, replies out of order by request id."""

from __future__ import annotations

import socket
import threading

from broker.tank import client as tc
from broker.tank import codec as sc

T1 = b"t1"


class FakeBroker:
    """Accepts one connection, pings, holds a Consume until the next Produce has been
    answered, then answers the Consume (out of order), with a stray ping in between."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[sc.Request] = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.sendall(sc.PING_FRAME)
            splitter, held = sc.FrameSplitter(), None
            while data := conn.recv(65536):
                for frame in splitter.feed(data):
                    req = sc.parse_request(frame)
                    self.requests.append(req)
                    if isinstance(req, sc.Consume):
                        held = req
                    elif isinstance(req, sc.Produce):
                        bundle = sc.decode_bundle(req.topics[0].partitions[0].bundle)
                        conn.sendall(sc.encode_reply(sc.ProduceReply(req.request_id, (
                            sc.ProduceTopicAck((sc.ProducePartitionAck(),)),))))
                        conn.sendall(sc.PING_FRAME)
                        if held is not None:
                            chunk = sc.build_chunk([sc.encode_bundle(bundle.messages)], 1 << 20)
                            conn.sendall(sc.encode_reply(sc.ConsumeReply(held.request_id, (
                                sc.ConsumeTopicReply(T1, (sc.ConsumePartitionReply(
                                    0, base_seq=1, hw=len(bundle.messages), chunk=chunk),)),))))
                    elif isinstance(req, sc.CreateTopic):
                        conn.sendall(sc.encode_reply(sc.CreateTopicReply(
                            req.request_id, req.topic)))

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=5)


class BlockingClientTests:
    def test_out_of_order_replies(self) -> None:
        """A long-poll consume sent first is answered after a later produce; the client
        matches both by request id and ignores pings."""
        broker = FakeBroker()
        try:
            with tc.TankClient("127.0.0.1", broker.port, timeout=5) as client:
                assert client.pings == 1
                assert client.create_topic(T1, 1) is None
                consume_id = client.new_request_id()
                entries = [(T1, 0, tc.SEQ_TAIL, 4096)]
                client.send(tc.build_consume(consume_id, entries, max_wait=1000))
                rid, acks, faults = client.produce([(T1, 0, [tc.Msg(b"hi", b"k", 5)])])
                assert (acks, faults) == ([tc.ProduceAck(T1, 0)], [])
                _, payload = client.wait_reply(consume_id)
                res = tc.decode_consume_reply(payload, entries)
                assert [(m.seq, m.key, m.content, m.ts) for m in res.data[0].messages] == [
                    (1, b"k", b"hi", 5)]
                assert client.pings == 2
        finally:
            broker.close()
        assert [type(r) for r in broker.requests] == [sc.CreateTopic, sc.Consume, sc.Produce]
