"""Real Kafka clients in consumer groups against a real broker on a loopback port:
kafka-python (default, ``api_version`` (0,9) and (0,10,1)) and confluent-kafka (default, and
``broker.version.fallback`` 0.9.0) ``subscribe()`` with a group id, consume, commit, and a
second consumer of the same group resumes from the committed offsets; the commits are the
group's V1 ``OFFSET`` and ``DESCRIBE_GROUP`` lag. Debian's kcat ``-G`` likewise (from
``.ci/install-tools``; missing, skipped, failed in CI). Then acceptance 3 of issue 19: three
members (confluent-kafka and kafka-python mixed, each a child process) over six
partitions, one killed with SIGKILL: the others rebalance once its session times out,
every message is consumed and committed, and no partition is owned by two members at once.

Each member is ``tests/kafka/group_member.py`` in a child process, logging its assignments,
messages and commits to a JSON-lines file the test reads.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.harness import kafka_port_of
from tests.support import ROOT, BrokerProcess, V1Client, debian_tool

pytest.importorskip("kafka")
pytest.importorskip("confluent_kafka")

CLIENTS = [("kp", "default"), ("kp", "0.9"), ("kp", "0.10.1"), ("ck", "default"),
           ("ck", "0.9.0")]
SESSION_MS = 6000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    proc = BrokerProcess(tmp_path_factory.mktemp("kafka-groups"), {"kafka_port": 0})
    with proc:
        yield proc, kafka_port_of(proc.log_text())


def member(kafka_port: int, client: str, api: str, topic: str, group: str, log: Path,
           *, expect: int = 0, stop: Path | None = None, name: str = "member",
           max_seconds: float = 40.0) -> subprocess.Popen[bytes]:
    """Start one group member child process."""
    args = [sys.executable, "-m", "tests.kafka.group_member", "--client", client, "--api", api,
            "--bootstrap", f"127.0.0.1:{kafka_port}", "--topic", topic, "--group", group,
            "--log", str(log), "--name", name, "--session-ms", str(SESSION_MS),
            "--max-seconds", str(max_seconds)]
    if expect:
        args += ["--expect", str(expect)]
    if stop is not None:
        args += ["--stop", str(stop)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.endswith("}")]


def produce(v1: V1Client, topic: str, partitions: int, start: int, count: int) -> None:
    for i in range(start, start + count):
        reply = v1.request(f"V1|1|PRODUCE|{topic} k{i}:m{i} partition={i % partitions}")
        assert "|OK|" in reply, reply


def v1_offset(v1: V1Client, group: str, topic: str, partition: int) -> int:
    reply = v1.request(f"V1|2|OFFSET|{group} {topic} {partition}")
    match = re.search(r"offset=(\d+)", reply)
    assert match, reply
    return int(match.group(1))


def finish(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Wait for a member; a failure shows its stderr and the events of its log other than
    messages."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        stderr = proc.stderr.read().decode(errors="replace")[-3000:] if proc.stderr else ""
        story = [e for e in events(log) if e["e"] != "msg"]
        raise AssertionError(f"member exited with {proc.returncode}: {story}\n{stderr}")


class SubscribeTests:
    @pytest.mark.parametrize("client, api", CLIENTS, ids=[f"{c}-{a}" for c, a in CLIENTS])
    def test_group_consume_commit_and_resume(self, broker, tmp_path, client, api):
        """subscribe() + poll + commit consumes all 30 messages of 3 partitions; V1 OFFSET
        shows the group's commits (10 per partition) and DESCRIBE_GROUP lag 0; a second
        consumer of the group, started after 15 more messages, reads only those 15."""
        proc, kafka_port = broker
        topic, group = f"t-{client}-{api.replace('.', '')}", f"g-{client}-{api.replace('.', '')}"
        v1 = proc.client()
        assert "|OK|" in v1.request(f"V1|1|ADMIN_CREATE_TOPIC|{topic} 3 1")
        produce(v1, topic, 3, 0, 30)
        first = tmp_path / "first.log"
        finish(member(kafka_port, client, api, topic, group, first, expect=30), first)
        consumed = {e["v"] for e in events(first) if e["e"] == "msg"}
        assert consumed == {f"m{i}" for i in range(30)}
        assert [v1_offset(v1, group, topic, p) for p in range(3)] == [10, 10, 10]
        described = v1.request(f"V1|3|DESCRIBE_GROUP|{group} {topic}")
        assert "committed=[10 10 10]" in described and "lag=[0 0 0]" in described, described

        produce(v1, topic, 3, 30, 15)
        second = tmp_path / "second.log"
        finish(member(kafka_port, client, api, topic, group, second, expect=15), second)
        again = [(e["p"], e["o"]) for e in events(second) if e["e"] == "msg"]
        assert sorted(again) == [(p, o) for p in range(3) for o in range(10, 15)]
        assert [v1_offset(v1, group, topic, p) for p in range(3)] == [15, 15, 15]
        v1.close()

    def test_v1_join_refused_while_a_kafka_member_is_live(self, broker, tmp_path):
        """While a confluent-kafka member holds group g-live, V1 JOIN of that group is
        BAD_REQUEST naming Kafka; after it closed (LeaveGroup), V1 may join."""
        proc, kafka_port = broker
        v1 = proc.client()
        assert "|OK|" in v1.request("V1|1|ADMIN_CREATE_TOPIC|t-live 1 1")
        stop = tmp_path / "stop"
        log = tmp_path / "live.log"
        live = member(kafka_port, "ck", "default", "t-live", "g-live", log, stop=stop)
        try:
            deadline = time.monotonic() + 30
            while not any(e["e"] == "assign" for e in events(log)):
                assert time.monotonic() < deadline, "the member never got an assignment"
                time.sleep(0.1)
            reply = v1.request("V1|2|JOIN|g-live t-live v1-consumer")
            assert reply.startswith("V1|2|ERR|BAD_REQUEST|") and "kafka" in reply, reply
        finally:
            stop.touch()
            finish(live, log)
        assert "|OK|generation=" in v1.request("V1|3|JOIN|g-live t-live v1-consumer")
        v1.request("V1|4|LEAVE|g-live t-live v1-consumer 1")
        v1.close()


KCAT_SETTINGS = {
    "default": [],
    "0.9.0": ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"],
}


class KcatGroupTests:
    @pytest.mark.parametrize("setting", sorted(KCAT_SETTINGS))
    def test_kcat_balanced_consumer_commits_and_resumes(self, broker, setting):
        """kcat -G (librdkafka 2.0.2's balanced consumer, auto-commit) consumes the 30
        messages, its commits are V1 OFFSET's answer, and a second kcat -G of the group
        gets only the 15 produced after."""
        kcat = debian_tool("kcat", "kcat")
        proc, kafka_port = broker
        suffix = setting.replace(".", "")
        topic, group = f"t-kcat-{suffix}", f"g-kcat-{suffix}"
        v1 = proc.client()
        assert "|OK|" in v1.request(f"V1|1|ADMIN_CREATE_TOPIC|{topic} 3 1")
        produce(v1, topic, 3, 0, 30)

        def consume(count: int) -> list[str]:
            run = subprocess.run(
                [kcat, "-b", f"127.0.0.1:{kafka_port}", "-G", group, topic, "-c", str(count),
                 "-q", "-f", "%p:%o:%s\\n", "-X", "auto.offset.reset=earliest",
                 *KCAT_SETTINGS[setting]], capture_output=True, text=True, timeout=60)
            assert run.returncode == 0, run.stderr
            return run.stdout.splitlines()

        assert sorted(line.split(":")[2] for line in consume(30)) == \
            sorted(f"m{i}" for i in range(30))
        assert [v1_offset(v1, group, topic, p) for p in range(3)] == [10, 10, 10]
        produce(v1, topic, 3, 30, 15)
        assert sorted(line.split(":")[2] for line in consume(15)) == \
            sorted(f"m{i}" for i in range(30, 45))
        assert [v1_offset(v1, group, topic, p) for p in range(3)] == [15, 15, 15]
        v1.close()


class KillOneOfThreeTests:
    def test_three_mixed_members_one_killed(self, broker, tmp_path):
        """Acceptance 3: two confluent-kafka members and one kafka-python member share 6
        partitions; the first confluent member is killed with SIGKILL. Within the session
        timeout (plus one heartbeat and the rejoin) the two others own all 6 partitions,
        every one of the 600 messages is consumed, the group's commits reach the end of
        every partition (seen over V1 OFFSET), and no partition is ever owned by two
        members at once (ownership intervals from the members' own logs)."""
        proc, kafka_port = broker
        topic, group = "t-acc3", "g-acc3"
        v1 = proc.client()
        assert "|OK|" in v1.request(f"V1|1|ADMIN_CREATE_TOPIC|{topic} 6 1")
        produce(v1, topic, 6, 0, 300)
        stop = tmp_path / "stop"
        specs = [("ck", "default", "victim"), ("ck", "0.9.0", "ck-survivor"),
                 ("kp", "0.10.1", "kp-survivor")]
        logs = {name: tmp_path / f"{name}.log" for _, _, name in specs}
        procs = {name: member(kafka_port, client, api, topic, group, logs[name], stop=stop,
                              name=name, max_seconds=60)
                 for client, api, name in specs}
        try:
            # 1. All three members share the six partitions.
            current = self._wait_for(logs, list(procs), 30)
            assert sorted(p for parts in current.values() for p in parts) == list(range(6))
            # 2. kill -9 one member, then produce more.
            killed_at = time.time()
            procs["victim"].send_signal(signal.SIGKILL)
            procs["victim"].wait()
            produce(v1, topic, 6, 300, 300)
            survivors = ["ck-survivor", "kp-survivor"]
            owners = self._wait_for(logs, survivors, 30, after=killed_at)
            rebalanced_s = max(self._last_assign(logs[name]) for name in survivors) - killed_at
            noticed_s = min(e["t"] for name in survivors for e in events(logs[name])
                            if e["e"] == "revoke" and e["t"] > killed_at) - killed_at
            assert sorted(p for parts in owners.values() for p in parts) == list(range(6))
            # The victim's session ends at most one session timeout after the kill; the
            # survivors hear of it at their next heartbeat (1 s apart), then rejoin.
            assert noticed_s < SESSION_MS / 1000 + 2, noticed_s
            assert rebalanced_s < 2 * SESSION_MS / 1000, rebalanced_s
            # 3. Everything consumed and committed.
            deadline = time.monotonic() + 30
            while [v1_offset(v1, group, topic, p) for p in range(6)] != [100] * 6:
                assert time.monotonic() < deadline, [v1_offset(v1, group, topic, p)
                                                     for p in range(6)]
                time.sleep(0.2)
        finally:
            stop.touch()
            for name, p in procs.items():
                if name != "victim":
                    finish(p, logs[name])
        consumed = {e["v"] for log in logs.values() for e in events(log) if e["e"] == "msg"}
        assert consumed == {f"m{i}" for i in range(600)}
        self._assert_no_double_ownership(logs, killed_at)
        print(f"survivors told to rejoin {noticed_s:.2f} s and rebalanced {rebalanced_s:.2f} s "
              f"after the kill (session timeout {SESSION_MS / 1000:.0f} s)")
        v1.close()

    @staticmethod
    def _owners(logs: dict[str, Path], names: Any, after: float = 0.0
                ) -> dict[str, list[int]]:
        """Each named member's latest assignment made after ``after`` (members with none
        are left out)."""
        owners = {}
        for name in names:
            assigns = [e for e in events(logs[name]) if e["e"] == "assign" and e["t"] > after]
            if assigns and assigns[-1]["parts"]:
                owners[name] = assigns[-1]["parts"]
        return owners

    def _wait_for(self, logs: dict[str, Path], names: list[str], seconds: float,
                  after: float = 0.0) -> dict[str, list[int]]:
        """Wait until every named member's latest assignment (made after ``after``) is
        non-empty and together they cover the six partitions."""
        deadline = time.monotonic() + seconds
        while True:
            found = self._owners(logs, names, after)
            parts = sorted(p for ps in found.values() for p in ps)
            if len(found) == len(names) and parts == list(range(6)):
                return found
            assert time.monotonic() < deadline, found
            time.sleep(0.1)

    @staticmethod
    def _last_assign(log: Path) -> float:
        return max(e["t"] for e in events(log) if e["e"] == "assign")

    @staticmethod
    def _assert_no_double_ownership(logs: dict[str, Path], killed_at: float) -> None:
        """Ownership intervals [assign, revoke) per member and partition (the killed
        member's end at the kill, the others' open ones at the end) never overlap."""
        intervals: dict[int, list[tuple[float, float, str]]] = {}
        for name, log in logs.items():
            held: dict[int, float] = {}
            end_of_life = killed_at if name == "victim" else float("inf")
            for e in events(log):
                if e["e"] == "assign":
                    for p in e["parts"]:
                        held[p] = e["t"]
                elif e["e"] == "revoke":
                    for p in e["parts"]:
                        if p in held:
                            intervals.setdefault(p, []).append((held.pop(p), e["t"], name))
            for p, start in held.items():
                intervals.setdefault(p, []).append((start, end_of_life, name))
        for p, spans in intervals.items():
            spans.sort()
            held_until, holder = float("-inf"), ""
            for start, end, name in spans:
                assert start >= held_until, f"partition {p} owned by {holder} and {name} at once"
                held_until, holder = max(held_until, end), name


class CommitPastEndTests:
    def test_commit_past_the_end_is_stored_and_the_consumer_resets(self, broker) -> None:
        """confluent-kafka commits offset 1000 on a partition holding 3 messages: Kafka
        stores it, so Skerry does too (the commit succeeds and reads back); a consumer of
        the group starting there meets OFFSET_OUT_OF_RANGE and applies
        ``auto.offset.reset=earliest``, so it reads the 3 messages from the start."""
        from confluent_kafka import Consumer, TopicPartition

        proc, kafka_port = broker
        v1 = proc.client()
        assert "|OK|" in v1.request("V1|1|ADMIN_CREATE_TOPIC|past-end 1 1")
        produce(v1, "past-end", 1, 0, 3)
        config = {"bootstrap.servers": f"127.0.0.1:{kafka_port}", "group.id": "g-past",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        consumer = Consumer(config)
        try:
            [stored] = consumer.commit(offsets=[TopicPartition("past-end", 0, 1000)],
                                       asynchronous=False)
            assert stored.error is None
            [committed] = consumer.committed([TopicPartition("past-end", 0)], timeout=10)
            assert committed.offset == 1000
            assert v1_offset(v1, "g-past", "past-end", 0) == 1000
            consumer.assign([TopicPartition("past-end", 0)])  # from the committed offset
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(got) < 3 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    got.append(message.value())
            assert got == [b"m0", b"m1", b"m2"]
        finally:
            consumer.close()
            v1.close()
