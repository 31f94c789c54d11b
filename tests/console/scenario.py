"""The console tests' shared setting: a real ``skerry serve`` with the console on, two
topics with messages, and a V1 group that falls behind.

Names match ``docs/console.md`` (topics ``orders`` and ``payments``, group ``billing`` on
``orders``), so the API examples of the page can be replayed against it as written.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.client.sync import Client
from tests.support import BrokerProcess

SCRIPT_VALUE = "<script>alert(1)</script>"
"""A value a careless page would run: the console must show it as text."""
BINARY_VALUE = b"\x00\xff\xfe\x01 not UTF-8"
MEMBER = "consumer-a"
_LISTEN_RE = re.compile(r"skerry listening on (.*?);")


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    """``{"v1": port, "console": port, ...}`` from the broker's startup line."""
    line = _LISTEN_RE.findall(broker.log_text())[-1]
    return {name: int(port) for name, port in re.findall(r"(\w+)=[0-9.]+:(\d+)", line)}


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


def get(url: str, authorization: str | None = None,
        context: ssl.SSLContext | None = None) -> Answer:
    """GET ``url``; any status is an ``Answer`` (urllib raises for >= 400)."""
    request = urllib.request.Request(url)
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return Answer(response.status, response.read(),
                          {k.lower(): v for k, v in response.headers.items()})
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read(), {k.lower(): v for k, v in exc.headers.items()})


class ConsoleBroker:
    """A broker process with the console on; ``base`` is the console's URL."""

    def __init__(self, workdir: Path, sample_interval_ms: int = 300,
                 **config: Any) -> None:
        raw = {"console_port": 0, "console": {"sample_interval_ms": sample_interval_ms},
               "storage": {"fsync": "never"},
               "topics": {"orders": {"partitions": 2}, "payments": {"partitions": 1}},
               **config}
        self.process = BrokerProcess(workdir, raw)
        self.base = ""
        self.v1 = ""
        self.user: str | None = None
        self.token: str | None = None

    def start(self) -> ConsoleBroker:
        self.process.start()
        ports = listener_ports(self.process)
        scheme = "https" if "tls" in self.process.config else "http"
        self.base = f"{scheme}://127.0.0.1:{ports['console']}"
        self.v1 = f"127.0.0.1:{ports['v1']}"
        return self

    def client(self) -> Client:
        return Client(self.v1, timeout=10, user=self.user, token=self.token)

    def stop(self) -> None:
        self.process.__exit__()

    def api(self, path: str, authorization: str | None = None) -> Answer:
        if authorization is None and self.token is not None:
            authorization = f"Bearer {self.token}"
        return get(f"{self.base}/api/{path}", authorization)


def fill(broker: ConsoleBroker) -> None:
    """Two topics with messages, and group ``billing`` on ``orders`` behind by the rest:
    ``orders`` holds 3 messages per partition (the script value among them, in partition 0,
    and a binary one in partition 1), ``payments`` 2; the group committed offset 1 of both
    partitions, so its lag is 2 + 2."""
    with broker.client() as c:
        c.produce("orders", SCRIPT_VALUE, key="k-script", partition=0)
        c.produce("orders", "created", key="user1", partition=0)
        c.produce("orders", "paid", key="user1", partition=0)
        c.produce("orders", BINARY_VALUE, key="k-bin", partition=1)
        c.produce("orders", "shipped", key="user2", partition=1)
        c.produce("orders", "returned", key="user2", partition=1)
        c.produce("payments", "EUR-12.50", key="p1")
        time.sleep(0.005)  # a few milliseconds apart, for the browse-by-time tests
        c.produce("payments", "EUR-3.00", key="p2")
        assignment = c.join("billing", "orders", MEMBER, session_timeout_ms=600_000)
        for partition in assignment.partitions:
            c.commit("billing", "orders", MEMBER, assignment.generation, partition, 1)


INTERNAL_TOPIC = "__iggy.0"
INTERNAL_GROUP = "iggy.consumer.7"


def seed_internal(workdir: Path) -> None:
    """Before the broker starts on ``workdir``: what the Iggy transport leaves in a data
    directory, a store topic ``__iggy.0`` (a stream other than ``default``) and the group
    ``iggy.consumer.7`` holding a plain Iggy consumer's offset on it (V1 may create
    neither, so they are written here as the transport would have)."""
    from data.store import Store, TopicConfig
    from groups.store import OFFSETS_FILE

    data = workdir / "skerry-data"
    store = Store(str(data))
    store.create_topic(INTERNAL_TOPIC, TopicConfig(partitions=1))
    store.close()
    (data / OFFSETS_FILE).write_text(json.dumps(
        {"version": 1, "offsets": [{"group": INTERNAL_GROUP, "topic": INTERNAL_TOPIC,
                                    "committed": {"0": 0}}]}))


def produce_more(broker: ConsoleBroker, count: int) -> None:
    """``count`` more messages to each partition of ``orders`` (the group falls behind)."""
    with broker.client() as c:
        for i in range(count):
            for partition in (0, 1):
                c.produce("orders", f"late-{i}", key="late", partition=partition)


def basic(user: str, token: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()


def catch_up(broker: ConsoleBroker, partition: int, offset: int) -> None:
    """The group's member commits ``offset`` for ``partition`` (it caught up a little)."""
    generation = broker.api("groups/billing/orders").json()["generation"]
    with broker.client() as c:
        c.commit("billing", "orders", MEMBER, generation, partition, offset)


def seed_consumer_group(broker: ConsoleBroker) -> None:
    """A KIP-848 consumer group ``dash`` (GROUP_HEARTBEAT) on a new topic ``clicks`` of 4
    partitions, caught mid-hand-over: ``w1`` (epoch 1) owns 0 and 1 and has not yet
    confirmed giving 2 and 3 up, ``w2`` (epoch 2) owns nothing and waits for 2 and 3."""
    client = broker.process.client()
    try:
        for line in ("ADMIN_CREATE_TOPIC|clicks 4 1",
                     "GROUP_HEARTBEAT|dash w1 0 topics=clicks",
                     "GROUP_HEARTBEAT|dash w2 0 topics=clicks",
                     "GROUP_HEARTBEAT|dash w1 1"):
            reply = client.request(f"V1|s|{line}")
            assert "|OK|" in reply, reply
    finally:
        client.close()
