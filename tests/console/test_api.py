"""The console's JSON API, as a script reading it sees it: a real ``skerry serve`` with
``console_port`` on a free loopback port, two topics, a group behind, read over HTTP.

Every endpoint of ``docs/console.md`` is exercised here, and the ``curl`` examples of that
page are replayed as written. Authentication and TLS follow ``/metrics``: a token when
``auth.tokens_file`` is set (401 without), HTTPS with ``tls.cert``.
"""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.auth import hash_token
from broker.version import skerry_version
from tests.console.scenario import (
    BINARY_VALUE,
    INTERNAL_GROUP,
    INTERNAL_TOPIC,
    MEMBER,
    SCRIPT_VALUE,
    ConsoleBroker,
    basic,
    fill,
    get,
    produce_more,
    seed_consumer_group,
    seed_internal,
)
from tests.support import ROOT, BrokerProcess

TOKEN = "console-test-token-4e7d1a-never-logged"
DOC = ROOT / "docs" / "console.md"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    running = ConsoleBroker(tmp_path_factory.mktemp("console-api")).start()
    try:
        fill(running)
        yield running
    finally:
        running.stop()


def _decoded(encoded: dict[str, object]) -> bytes:
    return base64.b64decode(str(encoded["base64"]))


class EndpointTests:
    def test_overview(self, broker: ConsoleBroker) -> None:
        """The overview names this broker, its version, fsync policy, listeners and the
        storage the two topics use, and carries produce/consume rate samples."""
        doc = broker.api("overview").json()
        assert doc["brokers"] == [{"id": 0, "address": broker.v1, "local": True}]
        assert doc["cluster_mode"] == "single"
        assert doc["version"] and doc["fsync"] == "never"
        assert doc["listeners"]["v1"] == broker.v1
        assert doc["listeners"]["console"] == broker.base.split("://")[1]
        assert doc["storage"]["topics"] == 2 and doc["storage"]["partitions"] == 3
        assert doc["storage"]["used_bytes"] > 0
        assert doc["totals"]["messages_in"] == 8
        assert doc["uptime_s"] > 0 and doc["auth"] is False and doc["tls"] is False
        assert broker.api("overview").headers["x-skerry-poll-ms"] == "300"

    def test_rates_follow_produces(self, broker: ConsoleBroker) -> None:
        """After a burst of produces, a produce-rate sample above zero appears."""
        produce_more(broker, 5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            rates = broker.api("overview").json()["rates"]["produce"]
            if any(r["messages_per_s"] > 0 for r in rates):
                break
            time.sleep(0.2)
        assert any(r["messages_per_s"] > 0 for r in rates)
        assert all(r["age_s"] >= 0 for r in rates)

    def test_topics(self, broker: ConsoleBroker) -> None:
        """One row per topic with partitions, messages, bytes and retention."""
        rows = {t["name"]: t for t in broker.api("topics").json()["topics"]}
        assert set(rows) >= {"orders", "payments"}
        assert rows["payments"]["partitions"] == 1 and rows["payments"]["messages"] == 2
        assert rows["orders"]["partitions"] == 2 and rows["orders"]["messages"] >= 6
        assert rows["orders"]["bytes"] > 0 and rows["orders"]["retention_ms"] is None

    def test_topic_detail(self, broker: ConsoleBroker) -> None:
        """Per partition: first/last offset, hw, size, and this broker as leader and ISR."""
        doc = broker.api("topics/payments").json()
        assert doc["partitions"] == 1
        (p0,) = doc["partition_details"]
        assert (p0["first_offset"], p0["last_offset"], p0["hw"]) == (0, 1, 1)
        assert p0["size_bytes"] > 0 and p0["leader"] == 0 and p0["isr"] == [0]
        assert p0["under_replicated"] is False
        assert broker.api("topics/orders").json()["groups"] == ["billing"]

    def test_unknown_topic_is_404_and_not_created(self, broker: ConsoleBroker) -> None:
        """Asking about a topic that does not exist answers 404 and creates nothing (even
        with auto_create_topics on, the console only reads)."""
        for path in ("topics/ghost", "topics/ghost/messages"):
            answer = broker.api(path)
            assert answer.status == 404 and answer.json() == {"error": "no topic ghost"}
        assert "ghost" not in {t["name"] for t in broker.api("topics").json()["topics"]}

    def test_messages_from_an_offset(self, broker: ConsoleBroker) -> None:
        """The browser returns key, value, timestamp and headers; the script value comes
        back as the exact text, and a binary value as base64 with no text."""
        doc = broker.api("topics/orders/messages?partition=0&offset=0&limit=2").json()
        assert [m["offset"] for m in doc["messages"]] == [0, 1]
        first = doc["messages"][0]
        assert first["value"]["text"] == SCRIPT_VALUE
        assert _decoded(first["value"]) == SCRIPT_VALUE.encode()
        assert first["key"]["text"] == "k-script" and first["headers"] == []
        assert first["timestamp_us"] > 1_600_000_000_000_000
        assert doc["next_offset"] == 2
        binary = broker.api("topics/orders/messages?partition=1&offset=0&limit=1").json()
        value = binary["messages"][0]["value"]
        assert value["text"] is None and _decoded(value) == BINARY_VALUE
        assert value["size"] == len(BINARY_VALUE)

    def test_messages_latest_and_by_timestamp(self, broker: ConsoleBroker) -> None:
        """Without a start the browser shows the last ``limit`` messages; from a timestamp
        it starts at the first message at or after it (none after the future)."""
        latest = broker.api("topics/payments/messages?partition=0&limit=1").json()
        assert [m["value"]["text"] for m in latest["messages"]] == ["EUR-3.00"]
        both = broker.api("topics/payments/messages?partition=0&offset=0").json()["messages"]
        first_us, second_us = (m["timestamp_us"] for m in both)
        assert second_us - first_us >= 2000  # fill() waits between them
        ts_ms = second_us // 1000
        by_time = broker.api(f"topics/payments/messages?partition=0&timestamp_ms={ts_ms}")
        assert [m["offset"] for m in by_time.json()["messages"]] == [1]
        from_first = broker.api("topics/payments/messages?partition=0&timestamp_ms="
                                f"{first_us // 1000}")
        assert [m["offset"] for m in from_first.json()["messages"]] == [0, 1]
        future = broker.api("topics/payments/messages?partition=0&timestamp_ms=99999999999999")
        assert future.json()["messages"] == []

    def test_browsing_is_not_consumption(self, broker: ConsoleBroker) -> None:
        """Reading messages in the console does not count as consumer traffic."""
        before = broker.api("overview").json()["totals"]["messages_out"]
        broker.api("topics/orders/messages?partition=0&offset=0&limit=50")
        assert broker.api("overview").json()["totals"]["messages_out"] == before

    @pytest.mark.parametrize("query, message", [
        ("partition=7", "partition 7 out of range; topic orders has 2 partitions"),
        ("partition=x", "partition must be a whole number"),
        ("limit=0", "limit must be 1-500"),
        ("offset=1e3", "offset must be a whole number"),
    ])
    def test_bad_browser_queries_are_400(self, broker: ConsoleBroker, query: str,
                                         message: str) -> None:
        """A malformed query is answered 400 with a sentence saying what is wrong."""
        answer = broker.api(f"topics/orders/messages?{query}")
        assert (answer.status, answer.json()) == (400, {"error": message})

    def test_groups(self, broker: ConsoleBroker) -> None:
        """The group list shows state, members, assignor and total lag."""
        rows = broker.api("groups").json()["groups"]
        (row,) = [r for r in rows if r["group"] == "billing"]
        assert row["topic"] == "orders" and row["state"] == "stable"
        assert row["members"] == 1 and row["assignor"] == "round_robin"
        assert row["lag"] >= 4

    def test_group_detail_and_lag_history(self, broker: ConsoleBroker) -> None:
        """The group page's data: members and their partitions, committed offset, hw and
        lag per partition, and lag samples that rise when the group falls further behind."""
        doc = broker.api("groups/billing/orders").json()
        assert doc["members"] == [{"member_id": MEMBER, "partitions": [0, 1]}]
        for p in doc["partitions"]:
            assert p["member"] == MEMBER and p["committed"] == 1
            assert p["lag"] == p["hw"] + 1 - p["committed"]
        assert doc["lag"] == sum(p["lag"] for p in doc["partitions"])
        assert doc["history"]["interval_s"] == 0.3 and doc["history"]["window_s"] >= 3600
        before = doc["lag"]
        produce_more(broker, 3)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            samples = broker.api("groups/billing/orders").json()["history"]["samples"]
            if samples and sum(samples[-1]["lag"].values()) == before + 6:
                break
            time.sleep(0.2)
        assert sum(samples[-1]["lag"].values()) == before + 6
        assert set(samples[-1]["lag"]) == {"0", "1"}
        ages = [s["age_s"] for s in samples]
        assert ages == sorted(ages, reverse=True)  # oldest first

    def test_unknown_group_is_404(self, broker: ConsoleBroker) -> None:
        """A group the broker does not know is a 404 naming it."""
        answer = broker.api("groups/nobody/orders")
        assert answer.status == 404 and "nobody" in answer.json()["error"]

    def test_cluster(self, broker: ConsoleBroker) -> None:
        """A single broker is the only broker, the controller and every partition's leader."""
        doc = broker.api("cluster").json()
        assert doc["mode"] == "single" and doc["controller"] == 0
        assert doc["brokers"] == [{"id": 0, "address": broker.v1, "local": True,
                                   "leader_of": 3}]
        assert doc["under_replicated"] == 0
        assert {(p["topic"], p["partition"], p["leader"]) for p in doc["partitions"]} == {
            ("orders", 0, 0), ("orders", 1, 0), ("payments", 0, 0)}

    def test_unknown_endpoint_is_a_json_404(self, broker: ConsoleBroker) -> None:
        """A path the API does not have is a JSON 404 pointing at the documentation."""
        answer = broker.api("nothing/here")
        assert answer.status == 404 and "docs/console.md" in answer.json()["error"]

    def test_pages_and_assets_are_served_with_a_strict_policy(self,
                                                              broker: ConsoleBroker) -> None:
        """The page and its script and style come from the broker; every answer forbids
        scripts from anywhere else and inline scripts; nothing outside the asset list."""
        for path, kind in (("/", "text/html"), ("/console.js", "text/javascript"),
                           ("/console.css", "text/css"), ("/favicon.svg", "image/svg+xml")):
            answer = get(broker.base + path)
            assert answer.status == 200 and answer.headers["content-type"].startswith(kind)
            assert "script-src 'self'" in answer.headers["content-security-policy"]
            assert "unsafe-inline" not in answer.headers["content-security-policy"]
        assert "content-security-policy" in broker.api("overview").headers
        for path in ("/static/console.js", "/console.js/x", "/..%2fweb.py", "/web.py"):
            assert get(broker.base + path).status == 404
        page = get(broker.base + "/").body.decode()
        assert "http://" not in page and "https://" not in page  # nothing from a CDN

    def test_the_page_footer_names_the_version(self, broker: ConsoleBroker) -> None:
        """Every page carries the broker's version in its footer (the same as
        ``skerry --version`` and ``/health``)."""
        page = get(broker.base + "/").body.decode()
        assert f'<footer class="foot">Skerry <span id="version">{skerry_version()}</span>' \
            in page
        assert skerry_version() != "unknown"


class PageSourceTests:
    def test_the_script_never_writes_markup(self) -> None:
        """console.js builds every element with createElement/textContent: none of the
        APIs that parse a string as HTML (or run it) appears in it."""
        source = (ROOT / "broker" / "console" / "static" / "console.js").read_text()
        for api in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                    "eval(", "new Function", "DOMParser", "createContextualFragment"):
            assert api not in source, api


class DocumentedExamplesTests:
    def test_every_curl_example_of_the_docs_answers(self, broker: ConsoleBroker) -> None:
        """Each ``curl`` line of docs/console.md, pointed at this broker, answers 200 with
        JSON; together they cover every endpoint."""
        text = DOC.read_text(encoding="utf-8")
        paths = re.findall(r"curl -s[^\n]*?http://127\.0\.0\.1:9644(/api/[^'\s\"]+)", text)
        assert paths
        shapes = set()
        for path in paths:
            answer = get(broker.base + path)
            assert answer.status == 200, (path, answer.body[:200])
            answer.json()
            shape = re.sub(r"\?.*", "", path)
            shape = re.sub(r"^/api/topics/[^/]+", "/api/topics/T", shape)
            shapes.add(re.sub(r"^/api/groups/[^/]+/[^/]+", "/api/groups/G/T", shape))
        assert shapes == {"/api/overview", "/api/topics", "/api/topics/T",
                          "/api/topics/T/messages", "/api/groups", "/api/groups/G/T",
                          "/api/cluster", "/api/acls"}


def _tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"alice:{hash_token(TOKEN)}\n")
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    """A broker with ``auth.tokens_file`` (user ``alice``) and the console on."""
    workdir = tmp_path_factory.mktemp("console-auth")
    running = ConsoleBroker(workdir, auth={"tokens_file": str(_tokens_file(workdir)),
                                                "super_users": "alice"})
    running.start()
    running.user, running.token = "alice", TOKEN
    try:
        fill(running)
        yield running
    finally:
        running.stop()


class AuthTests:
    @pytest.mark.parametrize("path", ["overview", "topics", "topics/orders",
                                      "topics/orders/messages?partition=0", "groups",
                                      "groups/billing/orders", "cluster", "nothing"])
    def test_every_endpoint_wants_a_token(self, secured: ConsoleBroker, path: str) -> None:
        """Without a token, or with a wrong one, every /api/ path answers 401 with a Bearer
        challenge (no browser password dialog) and no data."""
        for authorization in (None, "Bearer wrong", basic("alice", "wrong"), "Basic !!"):
            answer = get(f"{secured.base}/api/{path}", authorization)
            assert answer.status == 401, (path, authorization)
            assert answer.json() == {"error": "authentication required"}
            assert answer.headers["www-authenticate"].startswith("Bearer")

    def test_bearer_and_basic_tokens_are_accepted(self, secured: ConsoleBroker) -> None:
        """A V1 user's token works as Bearer, and as HTTP Basic with the user name."""
        assert secured.api("topics", f"Bearer {TOKEN}").status == 200
        assert secured.api("groups/billing/orders", basic("alice", TOKEN)).status == 200
        assert secured.api("overview", f"Bearer {TOKEN}").json()["auth"] is True

    def test_acls_show_who_may_do_what(self, secured: ConsoleBroker) -> None:
        """/api/acls lists the super users and an ACL added over V1, as the V1 list does."""
        with secured.client() as c:
            assert c.request("ADMIN_ACL_ADD", "User:bob Topic orders Read") == "added=1"
        doc = secured.api("acls").json()
        assert doc["enabled"] is True and doc["super_users"] == ["User:alice"]
        assert doc["allow_everyone_if_no_acl_found"] is False
        assert doc["acls"] == [{"principal": "User:bob", "resource_type": "Topic",
                                "pattern": "Literal", "name": "orders", "operation": "Read",
                                "permission": "Allow"}]

    def test_pages_load_without_a_token_and_ask_for_one(self, secured: ConsoleBroker) -> None:
        """The page (no data in it) loads without a token; it holds the login form."""
        answer = get(secured.base + "/")
        assert answer.status == 200 and b'id="login-form"' in answer.body

    def test_no_token_in_the_log(self, secured: ConsoleBroker) -> None:
        """Refusals are logged without the token."""
        get(f"{secured.base}/api/overview", f"Bearer {TOKEN}x")
        text = secured.process.log_text()
        assert "console: refused a request for /api/overview" in text
        assert TOKEN not in text


class ListenerRuleTests:
    def test_non_loopback_console_without_auth_exits_2(self, tmp_path: Path) -> None:
        """Like /metrics, the console does not listen on a non-loopback address without
        authentication: the broker refuses to start and says why."""
        process = BrokerProcess(tmp_path, {"console_port": 0,
                                           "console": {"host": "0.0.0.0"}})
        with pytest.raises(RuntimeError, match="exited with 2") as failure:
            process.start(timeout=20)
        assert "console.host: refusing to listen on 0.0.0.0 without authentication" in str(
            failure.value)

    def test_https_with_tls(self, tmp_path: Path) -> None:
        """With tls.cert/tls.key the console speaks HTTPS only."""
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        running = ConsoleBroker(tmp_path, tls={"cert": str(cert), "key": str(key)}).start()
        try:
            assert running.base.startswith("https://")
            context = ssl.create_default_context(cafile=str(cert))
            answer = get(running.base + "/api/overview", context=context)
            assert answer.status == 200 and answer.json()["tls"] is True
            plain = running.base.replace("https://", "http://")
            with pytest.raises((OSError, http.client.HTTPException)):
                get(plain + "/api/overview")
            assert running.process.stop() == 0  # SIGTERM: a clean shutdown, console too
        finally:
            running.stop()


@pytest.fixture(scope="module")
def with_internal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    workdir = tmp_path_factory.mktemp("console-api-internal")
    seed_internal(workdir)
    running = ConsoleBroker(workdir).start()
    try:
        fill(running)
        yield running
    finally:
        running.stop()


class InternalNamesTests:
    """The Iggy transport's ``__iggy.*`` topics and ``iggy.consumer.*`` groups: left out of
    the lists unless ``?internal=1``, the rule of ``skerry topics list --internal``."""

    def test_topics_leave_internal_ones_out_unless_asked(self,
                                                         with_internal: ConsoleBroker) -> None:
        """``/api/topics`` lists ``orders`` and ``payments`` and says one was hidden;
        ``?internal=1`` (or ``true``) lists ``__iggy.0`` too."""
        doc = with_internal.api("topics").json()
        assert [t["name"] for t in doc["topics"]] == ["orders", "payments"]
        assert doc["internal_hidden"] == 1
        for flag in ("1", "true"):
            full = with_internal.api(f"topics?internal={flag}").json()
            assert [t["name"] for t in full["topics"]] == [INTERNAL_TOPIC, "orders", "payments"]
            assert full["internal_hidden"] == 0
        assert with_internal.api("topics?internal=0").json() == doc

    def test_groups_leave_internal_ones_out_unless_asked(self,
                                                         with_internal: ConsoleBroker) -> None:
        """``/api/groups`` lists ``billing`` only; ``?internal=1`` adds ``iggy.consumer.7``,
        and the internal topic's page names its group only then."""
        doc = with_internal.api("groups").json()
        assert [g["group"] for g in doc["groups"]] == ["billing"]
        assert doc["internal_hidden"] == 1
        full = with_internal.api("groups?internal=1").json()
        assert sorted(g["group"] for g in full["groups"]) == ["billing", INTERNAL_GROUP]
        assert with_internal.api(f"topics/{INTERNAL_TOPIC}").json()["groups"] == []
        assert with_internal.api(f"topics/{INTERNAL_TOPIC}?internal=1").json()["groups"] == \
            [INTERNAL_GROUP]

    def test_cluster_lists_internal_partitions_only_when_asked(
            self, with_internal: ConsoleBroker) -> None:
        """``/api/cluster``'s partition list leaves ``__iggy.0`` out unless asked; the
        broker's ``leader_of`` counts it either way (it is its work all the same)."""
        doc = with_internal.api("cluster").json()
        assert {p["topic"] for p in doc["partitions"]} == {"orders", "payments"}
        assert doc["internal_hidden"] == 1 and doc["brokers"][0]["leader_of"] == 4
        full = with_internal.api("cluster?internal=1").json()
        assert {p["topic"] for p in full["partitions"]} == {INTERNAL_TOPIC, "orders",
                                                           "payments"}

    def test_a_bad_flag_is_400(self, with_internal: ConsoleBroker) -> None:
        """``internal`` takes 1/0 or true/false; anything else is refused, naming it."""
        answer = with_internal.api("topics?internal=maybe")
        assert answer.status == 400 and "internal" in answer.json()["error"]


@pytest.fixture(scope="module")
def kip848(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleBroker]:
    running = ConsoleBroker(tmp_path_factory.mktemp("console-kip848")).start()
    try:
        seed_consumer_group(running)
        yield running
    finally:
        running.stop()


class ConsumerGroupTests:
    """KIP-848 consumer groups (GROUP_HEARTBEAT) in the console's API."""

    def test_list_and_detail_show_type_epochs_and_pending(self, kip848: ConsoleBroker) -> None:
        """The list says which groups are consumer groups; the detail has the group and
        assignment epochs and, per member, its epoch, what it owns and what it waits
        for."""
        (row,) = [r for r in kip848.api("groups").json()["groups"] if r["group"] == "dash"]
        assert (row["topic"], row["type"], row["state"], row["members"]) == \
            ("clicks", "consumer", "reconciling", 2)
        doc = kip848.api("groups/dash/clicks").json()
        assert (doc["type"], doc["group_epoch"], doc["assignment_epoch"]) == \
            ("consumer", 2, 2)
        assert doc["members"] == [
            {"member_id": "w1", "partitions": [0, 1], "member_epoch": 1, "pending": []},
            {"member_id": "w2", "partitions": [], "member_epoch": 2, "pending": [2, 3]}]
        assert [p["member"] for p in doc["partitions"]] == ["w1", "w1", None, None]

