"""End-to-end tests of the ``skerry`` client commands: each runs as a real process
(``python -m broker ...``) against a real broker (``tests.support.BrokerProcess``), and its
output, JSON included, is checked as a person or a script would read it."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from broker.auth import hash_token
from broker.cli.consume import format_message, parse_timestamp
from broker.cli.produce import count_lines, request_args
from broker.cli.table import human_bytes, render_table
from broker.client.aio import Message, Reply, ToolError, parse_detail_messages
from tests.support import ROOT, BrokerProcess

SUMMARY_RE = re.compile(r"produced (\d+) messages? to (\S+) in [0-9.]+ s \([0-9,]+ msgs/s\); "
                        r"(\d+) errors?")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("tools")) as proc:
        yield proc


def env_for(broker: BrokerProcess) -> dict[str, str]:
    return dict(os.environ, SKERRY_BOOTSTRAP=f"127.0.0.1:{broker.port}", PYTHONUNBUFFERED="1")


def skerry(broker: BrokerProcess, *args: str, stdin: bytes = b"", timeout: float = 60.0,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run one ``skerry`` command to completion, stdout and stderr captured (pipes)."""
    return subprocess.run([sys.executable, "-m", "broker", *args], input=stdin,
                          capture_output=True, cwd=ROOT, env={**env_for(broker), **(env or {})},
                          timeout=timeout)


def spawn(broker: BrokerProcess, *args: str) -> subprocess.Popen[bytes]:
    """Start a long-running ``skerry`` command; Ctrl-C (SIGINT) reaches it as in a shell."""
    return subprocess.Popen(
        [sys.executable, "-m", "broker", *args], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env_for(broker),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float = 20.0) -> list[bytes]:
    """``count`` lines of a running process's stdout, waiting at most ``timeout``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < count:
        left = deadline - time.monotonic()
        assert left > 0, f"got only {buf!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"stdout closed after {buf!r}"
            buf += chunk
    return buf.splitlines()[:count]


def describe(broker: BrokerProcess, group: str, topic: str) -> dict[str, Any]:
    result = skerry(broker, "groups", "describe", group, "--topic", topic, "--json")
    assert result.returncode == 0, result.stderr
    docs = json.loads(result.stdout)
    assert len(docs) == 1
    return docs[0]


def group_state(broker: BrokerProcess, group: str, topic: str) -> dict[str, Any] | None:
    """DESCRIBE_GROUP straight over V1 (for checks of broker state, not of the tool):
    state, member -> partitions, committed offsets and lags; None while no such group."""
    client = broker.client()
    try:
        reply = client.request(f"V1|1|DESCRIBE_GROUP|{group} {topic}")
    finally:
        client.close()
    if not reply.startswith("V1|1|OK|"):
        return None

    def items(key: str) -> list[str]:
        return re.search(rf"{key}=\[([^\]]*)\]", reply).group(1).split()

    return {
        "state": re.search(r"state=(\S+)", reply).group(1),
        "members": {m.split(":")[0]: [int(p) for p in m.split(":")[1].split(",") if p]
                    for m in items("members")},
        "committed": [int(x) for x in items("committed")],
        "lag": sum(int(x) for x in items("lag")),
    }


def members(broker: BrokerProcess, group: str, topic: str) -> dict[str, list[int]]:
    state = group_state(broker, group, topic)
    return {} if state is None else state["members"]


def json_lines(output: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.decode().splitlines()]


class HelperTests:
    """The pure pieces of the tools, without a broker."""

    def test_tables_right_align_numbers_and_sizes(self) -> None:
        """Numbers and sizes are right-aligned, text left-aligned, missing values are '-'
        (a column of only '-' stays left-aligned), lists are comma-joined."""
        text = render_table(["topic", "hw", "isr", "size", "member"],
                            [["a", -1, [0, 1], "1.5 KiB", None], ["bbbb", 12, [], "0 B", None]])
        assert text.splitlines() == [
            "TOPIC  HW  ISR     SIZE  MEMBER",
            "a      -1  0,1  1.5 KiB  -",
            "bbbb   12  -        0 B  -",
        ]
        assert human_bytes(812) == "812 B" and human_bytes(3 * 1024**3) == "3.0 GiB"

    @pytest.mark.parametrize(("line", "key", "expected"), [
        (b"user1:created", None, b"t user1:created"),
        (b"k:a:b", None, b"t k:a:b"),
        (b":", None, b"t :"),
        (b"k:two words", None, b"t k:dHdvIHdvcmRz enc=b64"),
        (b"whole line, raw", b"key", b"t key:d2hvbGUgbGluZSwgcmF3 enc=b64"),
        (b"\xff", b"", b"t :/w== enc=b64"),
    ])
    def test_request_args(self, line: bytes, key: bytes | None, expected: bytes) -> None:
        """Lines split at the first ':'; values that are not plain go base64 on their own."""
        assert request_args("t", line, key, "1", None) == expected

    @pytest.mark.parametrize("line", [b"nocolon", b"bad key:v", b"k,1:v", "ké y:v".encode()])
    def test_request_args_refuses_lines_the_broker_would(self, line: bytes) -> None:
        """A line without ':' or with a key that cannot travel plain is refused here."""
        with pytest.raises(ToolError):
            request_args("t", line, None, "1", None)

    def test_parse_timestamp(self) -> None:
        """Milliseconds pass through; ISO-8601 with a zone is exact; nonsense is a usage
        error (exit 2)."""
        assert parse_timestamp("1700000000123") == 1700000000123
        assert parse_timestamp("2023-11-14T22:13:20.123+00:00") == 1700000000123
        assert parse_timestamp("2023-11-15T00:13:20.123+02:00") == 1700000000123
        with pytest.raises(ToolError) as info:
            parse_timestamp("yesterday")
        assert info.value.exit_code == 2

    def test_detail_messages_and_json_lines(self) -> None:
        """A detail=true enc=b64 CONSUME answer decodes to exact bytes; JSON carries text
        as text and other bytes as base64 with a flag, for keys and values alike."""
        reply = Reply(True, None, "messages=4:1700000000123:azE=:aGk=,5:7::/w== hw=5")
        first, second = parse_detail_messages(reply, 3)
        assert first == Message(3, 4, 1700000000123, b"k1", b"hi")
        assert second == Message(3, 5, 7, b"", b"\xff")
        assert parse_detail_messages(Reply(True, None, "messages= hw=-1"), 0) == []
        assert json.loads(format_message(second, "json")) == {
            "partition": 3, "offset": 5, "timestamp": 7, "key": "", "value": "/w==",
            "value_encoding": "base64"}
        odd_key = json.loads(format_message(Message(0, 0, 0, b"\x80", b"v"), "json"))
        assert odd_key["key_encoding"] == "base64" and "value_encoding" not in odd_key
        assert format_message(first, "plain") == b"hi\n"

    def test_reply_fields(self) -> None:
        """Payload fields are read to the next space, lists between brackets."""
        reply = Reply(True, None, "topic=t partitions=3 hw=[-1 4 0] roles=[leader] isr=[]")
        assert reply.number("partitions") == 3
        assert reply.ints("hw") == [-1, 4, 0]
        assert reply.items("roles") == ["leader"] and reply.items("isr") == []
        assert reply.has("hw") and not reply.has("size")
        with pytest.raises(ToolError):
            reply.field("size")

    def test_every_refusal_is_one_line_of_words(self) -> None:
        """Each wire code of docs/protocol.md becomes one line without the protocol's
        ``COMMAND: CODE:`` text; the common ones say what to do."""
        from broker.cli.explain import explain
        from broker.client.codec import for_code

        codes = ["BAD_REQUEST", "UNKNOWN_COMMAND", "REPLICATION_TIMEOUT", "NOT_LEADER",
                 "GENERATION_MISMATCH", "UNAVAILABLE", "UNAUTHENTICATED", "STORAGE_ERROR",
                 "INTERNAL", "NOT_AUTHORIZED"]
        for code in codes:
            line = explain(for_code(code)(code, "something went wrong", "ADMIN_X"), "t")
            assert "\n" not in line and f"{code}:" not in line and "ADMIN_X:" not in line, line
        assert explain(for_code("BAD_REQUEST")("BAD_REQUEST", "topic already exists",
                                               "ADMIN_CREATE_TOPIC"), "orders") == \
            "topic orders exists already; add --if-not-exists to leave it as it is (exit " \
            "status 0)"
        assert "$SKERRY_USER" in explain(for_code("UNAUTHENTICATED")(
            "UNAUTHENTICATED", "send AUTH <user> <token> first", "METADATA"))
        assert "skerry acls add" in explain(for_code("NOT_AUTHORIZED")(
            "NOT_AUTHORIZED", "User:bob may not Write Topic:t", "PRODUCE"), "t")
        assert "skerry cluster elect t" in explain(for_code("NOT_LEADER")(
            "NOT_LEADER", "partition 0 of t is a follower", "PRODUCE"), "t")

    def test_count_lines_of_a_file_leaves_its_position(self, tmp_path: Path) -> None:
        """The progress bar's total: lines left in a regular file (a last line without
        newline counts), read without moving the file position; None for a pipe."""
        path = tmp_path / "in.txt"
        path.write_bytes(b"a\nb\nc")
        with open(path, "rb") as stream:
            stream.readline()
            assert count_lines(stream) == 2
            assert stream.read() == b"b\nc"
        read_end, write_end = os.pipe()
        with os.fdopen(read_end, "rb") as pipe:
            os.close(write_end)
            assert count_lines(pipe) is None


class VersionTests:
    def test_version_flag_prints_the_package_version(self) -> None:
        """``skerry --version`` prints ``skerry <version of pyproject.toml>`` and exits 0
        (it was an argparse error)."""
        import tomllib

        expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        result = subprocess.run([sys.executable, "-m", "broker", "--version"],
                                capture_output=True, cwd=ROOT, timeout=60)
        assert (result.returncode, result.stdout, result.stderr) == \
            (0, f"skerry {expected}\n".encode(), b"")


class ProduceTests:
    def test_key_value_lines_arrive_and_a_summary_is_printed(self, broker: BrokerProcess) -> None:
        """key:value lines are produced (a value with spaces, commas and '|' goes base64
        on its own and comes back intact), blank lines are skipped, stderr ends with the
        summary and, not being a terminal, shows no progress bar."""
        data = b"user1:created\n\nuser1:paid, with a comma | and a pipe\r\nuser2:x:y\n"
        result = skerry(broker, "produce", "t-produce", stdin=data)
        assert result.returncode == 0, result.stderr
        err = result.stderr.decode()
        match = SUMMARY_RE.fullmatch(err.strip())
        assert match and match.groups() == ("3", "t-produce", "0"), err
        assert "\r" not in err and "msg/s" not in err and "%|" not in err
        out = skerry(broker, "consume", "t-produce", "--format", "json")
        assert out.returncode == 0, out.stderr
        got = {(m["key"], m["value"]) for m in json_lines(out.stdout)}
        assert got == {("user1", "created"), ("user1", "paid, with a comma | and a pipe"),
                       ("user2", "x:y")}
        assert out.stderr.decode().strip() == "consumed 3 messages from t-produce"

    def test_bad_lines_are_reported_by_number_and_fail_the_run(
            self, broker: BrokerProcess) -> None:
        """Lines that cannot be sent are reported with their line number; the others are
        still produced and the exit status is 1."""
        result = skerry(broker, "produce", "t-bad", stdin=b"a:1\nnocolon\nbad key:x\nb:2\n")
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert err[0].startswith("skerry produce: line 2: no ':' between key and value")
        assert err[1].startswith("skerry produce: line 3: the key has whitespace")
        assert SUMMARY_RE.fullmatch(err[2]).groups() == ("2", "t-bad", "2")

    def test_a_slow_pipe_is_sent_line_by_line(self, broker: BrokerProcess) -> None:
        """Lines are sent as they arrive, not when a batch is full: with stdin still open,
        a bad line's error is already printed and a good line already consumable."""
        proc = subprocess.Popen([sys.executable, "-m", "broker", "produce", "t-slow"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, cwd=ROOT, env=env_for(broker))
        try:
            assert proc.stdin is not None and proc.stderr is not None
            proc.stdin.write(b"k:first\nbad\n")
            proc.stdin.flush()
            fd = proc.stderr.fileno()
            assert select.select([fd], [], [], 20)[0], "no error printed while stdin is open"
            assert os.read(fd, 4096).startswith(b"skerry produce: line 2: no ':'")
            assert skerry(broker, "consume", "t-slow", "-q").stdout == b"first\n"
            proc.stdin.close()
            assert proc.wait(timeout=30) == 1
        finally:
            proc.kill()

    def test_broker_refusals_count_as_errors(self, broker: BrokerProcess) -> None:
        """An answer ERR from the broker about one line (a partition out of range) is
        printed per line in the broker's words and counted; the exit status is 1."""
        result = skerry(broker, "produce", "t-refused", "--partition", "9",
                        stdin=b"k:1\nk:2\n")
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert err[0].startswith("skerry produce: line 1: partition 9 out of range")
        assert SUMMARY_RE.fullmatch(err[-1]).groups() == ("0", "t-refused", "2")

    def test_key_partition_acks_and_binary_values(self, broker: BrokerProcess) -> None:
        """With --key every line is a value under that key; --partition and --acks all are
        honoured; bytes that are not UTF-8 survive the round trip (base64 in JSON)."""
        data = b"plain\n\xff\xfe binary\nlast\n"
        result = skerry(broker, "produce", "t-opts", "--key", "k1", "--partition", "2",
                        "--acks", "all", stdin=data)
        assert result.returncode == 0, result.stderr
        out = skerry(broker, "consume", "t-opts", "--partition", "2", "--format", "json")
        messages = json_lines(out.stdout)
        assert [(m["partition"], m["offset"], m["key"]) for m in messages] == \
            [(2, 0, "k1"), (2, 1, "k1"), (2, 2, "k1")]
        assert messages[0]["value"] == "plain" and "value_encoding" not in messages[0]
        assert messages[1]["value_encoding"] == "base64"
        assert messages[1]["value"] == "//4gYmluYXJ5"  # b"\xff\xfe binary"
        plain = skerry(broker, "consume", "t-opts", "--partition", "2", "-q")
        assert plain.stdout == data and plain.stderr == b""

    def test_progress_bar_shows_on_a_terminal_only(self, broker: BrokerProcess,
                                                   tmp_path: Path) -> None:
        """With stdin a file, the bar (with its msg/s rate) is drawn when stderr is a
        terminal, and never when stderr is a pipe."""
        source = tmp_path / "lines.txt"
        source.write_bytes(b"".join(b"k:%d\n" % i for i in range(2000)))
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        with open(source, "rb") as stdin:
            proc = subprocess.Popen([sys.executable, "-m", "broker", "produce", "t-bar"],
                                    stdin=stdin, stdout=subprocess.DEVNULL, stderr=slave,
                                    cwd=ROOT, env=env_for(broker))
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        os.close(master)
        assert proc.wait(timeout=60) == 0
        text = seen.decode(errors="replace")
        assert "produce t-bar:" in text and "msg/s" in text and "/2.00k" in text
        assert SUMMARY_RE.search(text).groups() == ("2000", "t-bar", "0")
        with open(source, "rb") as stdin:
            piped = subprocess.run([sys.executable, "-m", "broker", "produce", "t-bar"],
                                   stdin=stdin, capture_output=True, cwd=ROOT,
                                   env=env_for(broker), timeout=60)
        assert piped.returncode == 0
        assert SUMMARY_RE.fullmatch(piped.stderr.decode().strip()), piped.stderr


STOPPED_RE = re.compile(
    r"produced (\d+) messages? to \S+ in [0-9.]+ s \([0-9,]+ msgs/s\); (\d+) errors?; "
    r"stopped: (.+?)(?:; (\d+) messages? sent without an answer \(lines (\d+)-(\d+)\), "
    r"stored or not)?; last acknowledged line (\d+), resume from line (\d+)")
ENDLESS = ("import sys\ni = 0\nwhile True:\n    i += 1\n"
           "    sys.stdout.write(f'k{i % 7}:{i}\\n')\n")
"""A program writing numbered ``k<i mod 7>:<i>`` lines without end: input never runs out."""


def stored_messages(broker: BrokerProcess, topic: str) -> int:
    """How many messages ``topic`` holds (every partition's hw + 1), straight over V1."""
    client = broker.client()
    try:
        reply = client.request(f"V1|1|METADATA|{topic}")
    finally:
        client.close()
    if not reply.startswith("V1|1|OK|"):
        return 0
    return sum(int(hw) + 1 for hw in re.search(r"hw=\[([^\]]*)\]", reply).group(1).split())


def produce_endlessly(broker: BrokerProcess, topic: str) -> tuple[subprocess.Popen[bytes],
                                                                  subprocess.Popen[bytes]]:
    """``skerry produce topic`` fed by ``ENDLESS`` through a pipe, once the topic holds at
    least 20000 of its messages: (the producer, the feeder)."""
    feeder = subprocess.Popen([sys.executable, "-c", ENDLESS], stdout=subprocess.PIPE)
    producer = subprocess.Popen(
        [sys.executable, "-m", "broker", "produce", topic], stdin=feeder.stdout,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env_for(broker),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert feeder.stdout is not None
    feeder.stdout.close()
    wait_for(lambda: stored_messages(broker, topic) >= 20_000, "20000 messages stored",
             timeout=60)
    assert producer.poll() is None, producer.stderr.read() if producer.stderr else ""
    return producer, feeder


def stopped_report(broker: BrokerProcess, topic: str,
                   stop: Callable[[subprocess.Popen[bytes]], None],
                   exit_code: int) -> tuple[str | None, ...]:
    """Produce to ``topic`` without end, ``stop(producer)`` in the middle, and return the
    groups of the producer's report (``STOPPED_RE``), having checked its exit status and
    that no traceback was printed."""
    producer, feeder = produce_endlessly(broker, topic)
    try:
        stop(producer)
        _, err = producer.communicate(timeout=60)
    finally:
        producer.kill()
        feeder.kill()
        feeder.wait()
    text = err.decode()
    assert producer.returncode == exit_code, text
    assert "Traceback" not in text and "never retrieved" not in text, text
    match = STOPPED_RE.fullmatch(text.strip())
    assert match, text
    return match.groups()


def stored_numbers(broker: BrokerProcess, topic: str) -> set[int]:
    out = skerry(broker, "consume", topic, "-q", timeout=120)
    assert out.returncode == 0, out.stderr
    return {int(value) for value in out.stdout.split()}


class InterruptedProduceTests:
    def test_ctrl_c_reports_exactly_what_the_topic_holds(self, broker: BrokerProcess) -> None:
        """Ctrl-C in the middle of a stream: the producer sends nothing more, takes the
        answers to what it sent, and reports exactly the count the topic holds, the last
        acknowledged input line and the line to resume from, without any traceback."""
        report = stopped_report(broker, "t-sigint",
                                lambda producer: producer.send_signal(signal.SIGINT), 130)
        produced, errors, why, unanswered, _, _, last, resume = report
        assert (errors, why, unanswered) == ("0", "interrupted", None)
        stored = stored_messages(broker, "t-sigint")
        assert int(produced) == stored >= 20_000
        assert int(last) == stored and int(resume) == stored + 1
        assert stored_numbers(broker, "t-sigint") == set(range(1, stored + 1))

    def test_a_lost_connection_names_the_unanswered_lines(self, tmp_path: Path) -> None:
        """The broker killed in the middle of a stream: the report counts every
        acknowledged message (also answers of a batch cut short), names the lines sent
        without an answer, and resuming from the line it names loses nothing; exit 1 and
        no traceback."""
        with BrokerProcess(tmp_path) as doomed:
            report = stopped_report(doomed, "t-lost", lambda _: doomed.kill9(), 1)
            produced, errors, why, unanswered, first, final, last, resume = report
            assert errors == "0" and ("closed the connection" in why or "lost" in why), why
            assert int(last) == int(produced) and int(resume) == int(produced) + 1
            if unanswered is not None:
                assert int(first) == int(resume)
                assert int(final) - int(first) + 1 == int(unanswered)
            doomed.start()
            numbers = stored_numbers(doomed, "t-lost")
            sent = int(final) if unanswered is not None else int(last)
            assert set(range(1, int(last) + 1)) <= numbers <= set(range(1, sent + 1))

class ConsumeTests:
    def test_json_lines_have_partition_offset_timestamp_key_value(
            self, broker: BrokerProcess) -> None:
        """--format json prints one object per message with exactly these fields (headers
        only when a message has some); a V1 message's timestamp is its append time."""
        skerry(broker, "produce", "t-json", "--partition", "0", stdin=b"a:1\nb:2\n")
        out = skerry(broker, "consume", "t-json", "--format", "json", "-q")
        messages = json_lines(out.stdout)
        assert [list(m) for m in messages] == [["partition", "offset", "timestamp",
                                                "append_time", "key", "value"]] * 2
        assert [(m["offset"], m["key"], m["value"]) for m in messages] == \
            [(0, "a", "1"), (1, "b", "2")]
        now_ms = time.time() * 1000
        assert all(now_ms - 600_000 < m["timestamp"] <= now_ms + 1000 for m in messages)
        assert all(m["timestamp"] == m["append_time"] for m in messages)

    def test_offset_partition_and_max_messages(self, broker: BrokerProcess) -> None:
        """--partition with --offset starts there; --max-messages stops after N."""
        skerry(broker, "produce", "t-offset", "--key", "k", "--partition", "1",
               stdin=b"m0\nm1\nm2\nm3\n")
        out = skerry(broker, "consume", "t-offset", "--partition", "1", "--offset", "1",
                     "--max-messages", "2")
        assert out.returncode == 0
        assert out.stdout == b"m1\nm2\n"
        assert out.stderr.decode().strip() == "consumed 2 messages from t-offset"
        latest = skerry(broker, "consume", "t-offset", "--offset", "latest", "-q")
        assert latest.stdout == b""

    def test_from_timestamp_in_milliseconds_and_iso_8601(self, broker: BrokerProcess) -> None:
        """--from-timestamp starts at the first message at or after the time, given as
        epoch milliseconds or as an ISO-8601 time."""
        skerry(broker, "produce", "t-time", "--partition", "0", stdin=b"k:early\n")
        skerry(broker, "produce", "t-time", "--partition", "0", stdin=b"k:late1\nk:late2\n")
        messages = json_lines(skerry(broker, "consume", "t-time", "--format", "json").stdout)
        assert [m["value"] for m in messages] == ["early", "late1", "late2"]
        boundary = messages[1]["timestamp"]
        assert boundary > messages[0]["timestamp"]
        by_ms = skerry(broker, "consume", "t-time", "--from-timestamp", str(boundary), "-q")
        assert by_ms.stdout == b"late1\nlate2\n"
        iso = datetime.fromtimestamp(boundary / 1000, UTC).isoformat(timespec="milliseconds")
        by_iso = skerry(broker, "consume", "t-time", "--from-timestamp", iso, "-q")
        assert by_iso.stdout == b"late1\nlate2\n"
        after = skerry(broker, "consume", "t-time", "--from-timestamp",
                       str(messages[-1]["timestamp"] + 1), "-q")
        assert after.stdout == b""

    def test_follow_prints_new_messages_as_they_come(self, broker: BrokerProcess) -> None:
        """--follow waits for messages produced after it started (on every partition)
        and, with --max-messages, exits by itself once it printed them."""
        assert skerry(broker, "topics", "create", "t-follow").returncode == 0
        proc = spawn(broker, "consume", "t-follow", "--follow", "--from-beginning",
                     "--max-messages", "3", "--wait-ms", "200")
        try:
            produced = skerry(broker, "produce", "t-follow", stdin=b"a:1\nb:2\nc:3\n")
            assert produced.returncode == 0
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 0
        assert sorted(out.splitlines()) == [b"1", b"2", b"3"]
        assert err.decode().strip() == "consumed 3 messages from t-follow"

    def test_group_member_commits_what_it_printed_and_leaves(
            self, broker: BrokerProcess) -> None:
        """With --group, a run prints the group's unread messages, commits them and leaves;
        the next run prints only what arrived since."""
        skerry(broker, "produce", "t-group", stdin=b"a:1\nb:2\nc:3\nd:4\ne:5\n")
        first = skerry(broker, "consume", "t-group", "--group", "g1", "--consumer-id", "c1")
        assert first.returncode == 0, first.stderr
        assert sorted(first.stdout.splitlines()) == [b"1", b"2", b"3", b"4", b"5"]
        assert first.stderr.decode().strip() == \
            "consumed 5 messages from t-group as c1 in group g1"
        doc = describe(broker, "g1", "t-group")
        assert doc["state"] == "empty" and doc["members"] == []
        assert [p["committed"] for p in doc["partitions"]] == \
            [p["hw"] + 1 for p in doc["partitions"]]
        assert doc["lag"] == 0
        again = skerry(broker, "consume", "t-group", "--group", "g1", "-q")
        assert again.stdout == b""
        skerry(broker, "produce", "t-group", stdin=b"f:6\ng:7\n")
        third = skerry(broker, "consume", "t-group", "--group", "g1", "-q")
        assert sorted(third.stdout.splitlines()) == [b"6", b"7"]

    def test_ctrl_c_commits_and_leaves_the_group(self, broker: BrokerProcess) -> None:
        """A following group member stopped with Ctrl-C has committed what it printed and
        LEAVEs at once (not after its 60 s session timeout), exiting with status 0."""
        assert skerry(broker, "topics", "create", "t-int").returncode == 0
        proc = spawn(broker, "consume", "t-int", "--group", "g-int", "--consumer-id", "c-int",
                     "--follow", "--session-timeout-ms", "60000", "--wait-ms", "200")
        try:
            wait_for(lambda: list(members(broker, "g-int", "t-int")) == ["c-int"],
                     "the member to join")
            skerry(broker, "produce", "t-int", stdin=b"k:hello\n")
            assert read_lines(proc, 1) == [b"hello"]
            wait_for(lambda: group_state(broker, "g-int", "t-int")["lag"] == 0, "the commit")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        assert err.decode().strip() == "consumed 1 message from t-int as c-int in group g-int"
        state = group_state(broker, "g-int", "t-int")
        assert state["members"] == {} and state["state"] == "empty"
        assert sum(state["committed"]) == 1

    def test_two_members_share_the_partitions(self, broker: BrokerProcess) -> None:
        """Two following members of one group split the partitions (after the second
        joins, the first rejoins) and between them print every message; the group ends
        with nothing left to read."""
        assert skerry(broker, "topics", "create", "t-share", "--partitions", "4").returncode == 0
        common = ("consume", "t-share", "--group", "g-share", "--follow",
                  "--session-timeout-ms", "1500", "--wait-ms", "200")
        first = spawn(broker, *common, "--consumer-id", "m1")
        second = None
        try:
            wait_for(lambda: len(members(broker, "g-share", "t-share")) == 1,
                     "the first member")
            second = spawn(broker, *common, "--consumer-id", "m2")
            wait_for(lambda: [bool(p) for p in members(broker, "g-share", "t-share").values()]
                     == [True, True], "both members with partitions")
            values = [f"v{i}" for i in range(40)]
            data = "".join(f"key{i}:{v}\n" for i, v in enumerate(values)).encode()
            assert skerry(broker, "produce", "t-share", stdin=data).returncode == 0
            wait_for(lambda: group_state(broker, "g-share", "t-share")["lag"] == 0,
                     "everything committed")
            outputs = []
            for proc in (first, second):
                proc.send_signal(signal.SIGTERM)
                out, _ = proc.communicate(timeout=30)
                assert proc.returncode == 0
                outputs.append(out.decode().split())
        finally:
            first.kill()
            if second is not None:
                second.kill()
        assert set(outputs[0]) | set(outputs[1]) == set(values)
        assert outputs[0] and outputs[1]
        assert members(broker, "g-share", "t-share") == {}

    def test_mistakes_are_reported_with_exit_codes(self, broker: BrokerProcess) -> None:
        """An unknown topic exits 1 with one clear line (and creates nothing); contradictory
        flags exit 2; a broker that is not there exits 1 naming the address."""
        unknown = skerry(broker, "consume", "t-nowhere")
        assert (unknown.returncode, unknown.stderr) == \
            (1, b"skerry consume: topic t-nowhere does not exist (`skerry topics list` shows "
                b"the topics; `skerry topics create t-nowhere` creates it; `--follow` waits "
                b"for it)\n")
        assert "t-nowhere" not in skerry(broker, "topics", "list").stdout.decode()
        both = skerry(broker, "consume", "t-json", "--group", "g", "--from-beginning")
        assert both.returncode == 2 and b"--group reads from the group's committed" in both.stderr
        numeric = skerry(broker, "consume", "t-json", "--offset", "3")
        assert numeric.returncode == 2 and b"needs --partition" in numeric.stderr
        away = subprocess.run([sys.executable, "-m", "broker", "topics", "list",
                               "--bootstrap", "127.0.0.1:1"], capture_output=True, cwd=ROOT,
                              timeout=60)
        assert away.returncode == 1
        assert away.stderr.startswith(b"skerry topics list: cannot connect to the broker at "
                                      b"127.0.0.1:1")

    def test_print_key_and_timestamp_in_the_plain_format(self, broker: BrokerProcess) -> None:
        """--print-timestamp and --print-key put the timestamp (ms) and the key before each
        value, tab-separated; with --format json they are refused (exit 2)."""
        skerry(broker, "produce", "t-print", "--partition", "0", stdin=b"k1:a\nk2:b c\n")
        before = int(time.time() * 1000)
        out = skerry(broker, "consume", "t-print", "--print-key", "-q")
        assert out.stdout == b"k1\ta\nk2\tb c\n"
        both = skerry(broker, "consume", "t-print", "--print-timestamp", "--print-key", "-q")
        rows = [line.split(b"\t") for line in both.stdout.splitlines()]
        assert [row[1:] for row in rows] == [[b"k1", b"a"], [b"k2", b"b c"]]
        assert all(before - 60_000 < int(row[0]) <= before for row in rows), rows
        stamps = skerry(broker, "consume", "t-print", "--print-timestamp", "-q")
        assert [line.split(b"\t")[1] for line in stamps.stdout.splitlines()] == [b"a", b"b c"]
        refused = skerry(broker, "consume", "t-print", "--print-key", "--format", "json")
        assert refused.returncode == 2
        assert b"--print-key, --print-timestamp and --print-headers are for the plain format" \
            in refused.stderr

    def test_follow_waits_for_a_topic_to_be_created(self, broker: BrokerProcess) -> None:
        """--follow on a topic that does not exist says it waits, does not create it, and
        prints what is produced once it exists, from its start."""
        proc = spawn(broker, "consume", "t-later", "--follow", "-n", "2")
        try:
            assert proc.stderr is not None
            fd = proc.stderr.fileno()
            said = b""
            while not said.endswith(b"\n"):
                assert select.select([fd], [], [], 20)[0], f"no word that it waits: {said!r}"
                chunk = os.read(fd, 4096)
                assert chunk, said
                said += chunk
            assert said == (b"skerry consume: topic t-later does not exist yet; waiting for "
                            b"it to be created (Ctrl-C to stop)\n")
            time.sleep(1.0)  # a few looks for the topic
            assert proc.poll() is None
            assert stored_messages(broker, "t-later") == 0
            listed = skerry(broker, "topics", "list", "--json").stdout
            assert "t-later" not in {t["topic"] for t in json.loads(listed)}
            skerry(broker, "produce", "t-later", stdin=b"k:one\nk:two\n")
            assert read_lines(proc, 2) == [b"one", b"two"]
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
        unknown = skerry(broker, "consume", "t-never")
        assert (unknown.returncode, unknown.stderr) == \
            (1, b"skerry consume: topic t-never does not exist (`skerry topics list` shows "
                b"the topics; `skerry topics create t-never` creates it; `--follow` waits "
                b"for it)\n")


class InspectTests:
    """``skerry consume`` shows what a message carries, kcat-style: the producer's own
    timestamp (not the broker's append time passed off as it), the append time apart, and
    the headers."""

    def test_the_help_shows_the_format_string_as_typed(self) -> None:
        """``skerry consume --help`` shows its kcat-style example with single ``%`` signs,
        as a user types it (a description is not %-formatted, so ``%%`` showed doubled)."""
        from broker.cli.main import build_parser

        consume = build_parser()._subparsers._group_actions[0].choices["consume"]
        text = " ".join(consume.format_help().split())
        assert "--format '%p:%o %k=%s\\n'" in text
        assert "'%%p" not in text

    def test_format_print_headers_and_timestamps(self, tmp_path: Path) -> None:
        """A TANK message sent with ts=1700000000000 and an Iggy message with a header:
        ``--format`` tokens, ``--print-timestamp``/``--print-headers`` and JSON show the
        producer's timestamp, the append time only where asked, and the headers."""
        import struct

        from broker.iggy import codec as iggy
        from broker.iggy.codec import Identifier, PartitioningKind
        from broker.tank import client as tc
        from tests.iggy.harness import RawClient, iggy_port_of
        from tests.tank.harness import tank_port_of

        ts = 1_700_000_000_000
        with BrokerProcess(tmp_path, {"tank_port": 0, "iggy_port": 0}) as multi:
            text = multi.log_text()
            with tc.TankClient("127.0.0.1", tank_port_of(text)) as tank:
                assert tank.create_topic(b"t-inspect", 1) is None
                assert tank.produce([(b"t-inspect", 0, [tc.Msg(b"hello", b"k1", ts)])])[2] == []
            raw = RawClient(iggy_port_of(text))
            raw.login()
            header = (b"\x02" + struct.pack("<I", 5) + b"trace" + b"\x02" + struct.pack("<I", 3)
                      + b"abc")
            sent = iggy.encode_messages([b"world"], [header], [1], [(ts + 5000) * 1000])  # µs
            assert raw.call(iggy.SendMessages(
                Identifier("default"), Identifier("t-inspect"), PartitioningKind.PARTITION_ID,
                struct.pack("<I", 0), 1, sent)) == b"\x00" * 8
            custom = skerry(multi, "consume", "t-inspect", "-q", "--format",
                            "%t/%p/%o key=%k (%K) value=%s (%S) ts=%T headers=%h|%A\\n")
            plain = skerry(multi, "consume", "t-inspect", "-q", "--print-timestamp",
                           "--print-headers", "--print-key")
            documents = json_lines(skerry(multi, "consume", "t-inspect", "-q", "--format",
                                          "json").stdout)
            bad = skerry(multi, "consume", "t-inspect", "--format", "%x")
        assert custom.returncode == 0, custom.stderr
        first, second = custom.stdout.decode().splitlines()
        assert first.startswith("t-inspect/0/0 key=k1 (2) value=hello (5) ts=1700000000000 "
                                "headers=|"), first
        assert second.startswith("t-inspect/0/1 key= (0) value=world (5) ts=1700000005000 "
                                 "headers=trace=abc|"), second
        appended = int(first.rsplit("|", 1)[1])
        assert appended > ts + 3_600_000  # the broker's clock, not the producer's
        assert plain.stdout == (b"1700000000000\tNO_HEADERS\tk1\thello\n"
                                b"1700000005000\ttrace:abc\t\tworld\n")
        assert [(d["timestamp"], d["append_time"], d.get("headers")) for d in documents] == [
            (ts, appended, None), (ts + 5000, documents[1]["append_time"],
                                   [{"key": "trace", "value": "abc"}])]
        assert bad.returncode == 2
        assert bad.stderr.decode().startswith("skerry consume: --format: unknown token %x; use "
                                              "%t topic, %p partition")


class TopicsTests:
    def test_create_list_describe_delete(self, broker: BrokerProcess) -> None:
        """topics create/list/describe/delete read well as tables and say the same in
        --json: per partition role, hw, earliest and next offset, ISR, under-replication,
        size and segments."""
        created = skerry(broker, "topics", "create", "t-admin", "--partitions", "2")
        assert created.stdout == b"created topic t-admin: 2 partitions, replication factor 1\n"
        again = skerry(broker, "topics", "create", "t-admin")
        assert again.returncode == 1
        assert again.stderr == (b"skerry topics create: topic t-admin exists already; add "
                                b"--if-not-exists to leave it as it is (exit status 0)\n")
        skerry(broker, "produce", "t-admin", "--partition", "1", stdin=b"k:abc\nk:def\n")
        listed = json.loads(skerry(broker, "topics", "list", "--json").stdout)
        row = next(t for t in listed if t["topic"] == "t-admin")
        assert row["partition_count"] == 2 and row["messages"] == 2
        table = skerry(broker, "topics", "list").stdout.decode().splitlines()
        assert table[0].split() == ["TOPIC", "PARTITIONS", "REPLICATION", "MESSAGES", "SIZE"]
        assert any(line.split()[:4] == ["t-admin", "2", "1", "2"] for line in table)
        doc = json.loads(skerry(broker, "topics", "describe", "t-admin", "--json").stdout)
        p0, p1 = doc["partitions"]
        assert (p0["hw"], p0["next"], p0["messages"], p0["size_bytes"]) == (-1, 0, 0, 0)
        assert (p1["role"], p1["hw"], p1["earliest"], p1["next"], p1["messages"]) == \
            ("leader", 1, 0, 2, 2)
        assert p1["isr"] == [0] and p1["under_replicated"] is False and p1["segments"] == 1
        assert p1["size_bytes"] > 2 * 64 and doc["size_bytes"] == p1["size_bytes"]
        text = skerry(broker, "topics", "describe", "t-admin").stdout.decode().splitlines()
        assert text[0].startswith("topic t-admin: 2 partitions, replication factor 1, "
                                  "min in-sync replicas 1, 2 messages, ")
        assert text[1].split() == ["PARTITION", "ROLE", "HW", "EARLIEST", "NEXT", "MESSAGES",
                                   "ISR", "UNDER-REPLICATED", "SIZE", "SEGMENTS"]
        assert text[3].split()[:8] == ["1", "leader", "1", "0", "2", "2", "0", "no"]
        deleted = skerry(broker, "topics", "delete", "t-admin", "--json")
        assert json.loads(deleted.stdout) == {"topic": "t-admin", "deleted": True}
        gone = skerry(broker, "topics", "describe", "t-admin")
        assert (gone.returncode, gone.stderr) == \
            (1, b"skerry topics describe: topic t-admin does not exist (`skerry topics list` "
                b"shows the topics; `skerry topics create t-admin` creates it)\n")

    def test_create_if_not_exists_and_alter(self, broker: BrokerProcess) -> None:
        """--if-not-exists leaves an existing topic as it is (exit 0); topics alter adds
        partitions and replaces the retention, kept in topic.json; asking for fewer
        partitions, nothing, or an unknown topic is refused."""
        first = skerry(broker, "topics", "create", "t-alter", "--partitions", "2",
                       "--if-not-exists")
        assert first.stdout == b"created topic t-alter: 2 partitions, replication factor 1\n"
        again = skerry(broker, "topics", "create", "t-alter", "--partitions", "5",
                       "--if-not-exists")
        assert (again.returncode, again.stdout) == (0, b"topic t-alter exists already (2 "
                                                       b"partitions, replication factor 1); "
                                                       b"left as it is\n")
        doc = json.loads(skerry(broker, "topics", "create", "t-alter", "--if-not-exists",
                                "--json").stdout)
        assert doc == {"topic": "t-alter", "partitions": 2, "replication_factor": 1,
                       "created": False}
        altered = skerry(broker, "topics", "alter", "t-alter", "--partitions", "4",
                         "--retention-ms", "3600000")
        assert altered.stdout == (b"altered topic t-alter: partitions 2 -> 4, retention_ms "
                                  b"3600000, retention_bytes none\n"), altered.stderr
        config = json.loads((broker.data_dir / "topics" / "t-alter" / "topic.json").read_text())
        assert (config["partitions"], config["retention_ms"], config["retention_bytes"]) == \
            (4, 3_600_000, None)
        doc = json.loads(skerry(broker, "topics", "alter", "t-alter", "--retention-ms", "none",
                                "--retention-bytes", "1048576", "--json").stdout)
        assert doc == {"topic": "t-alter", "partitions_before": 4, "partitions": 4,
                       "retention_ms": None, "retention_bytes": 1048576}
        config = json.loads((broker.data_dir / "topics" / "t-alter" / "topic.json").read_text())
        assert (config["retention_ms"], config["retention_bytes"]) == (None, 1048576)
        fewer = skerry(broker, "topics", "alter", "t-alter", "--partitions", "3")
        assert (fewer.returncode, fewer.stderr) == (1, b"skerry topics alter: topic t-alter "
                                                       b"has 4 partitions; --partitions must "
                                                       b"be more (partitions are never "
                                                       b"removed)\n")
        nothing = skerry(broker, "topics", "alter", "t-alter")
        assert nothing.returncode == 2 and b"nothing to change" in nothing.stderr
        unknown = skerry(broker, "topics", "alter", "t-nothere", "--retention-ms", "5")
        assert (unknown.returncode, unknown.stderr) == \
            (1, b"skerry topics alter: topic t-nothere does not exist (`skerry topics list` "
                b"shows the topics; `skerry topics create t-nothere` creates it)\n")

    def test_create_and_alter_compaction_settings(self, broker: BrokerProcess) -> None:
        """topics create and topics alter take the cleanup policy, the compaction and the
        segment settings; they land in topic.json (none: back to the broker's segment
        size)."""
        created = skerry(broker, "topics", "create", "t-compact", "--partitions", "1",
                         "--cleanup-policy", "compact", "--segment-bytes", "4096")
        assert created.returncode == 0, created.stderr
        path = broker.data_dir / "topics" / "t-compact" / "topic.json"
        config = json.loads(path.read_text())
        assert (config["cleanup_policy"], config["segment_bytes"]) == ("compact", 4096)
        altered = skerry(broker, "topics", "alter", "t-compact", "--cleanup-policy",
                         "compact,delete", "--min-compaction-lag-ms", "1000",
                         "--segment-bytes", "none")
        assert altered.stdout == (b"altered topic t-compact: retention_ms none, retention_bytes "
                                  b"none, cleanup_policy compact,delete, min_compaction_lag_ms "
                                  b"1000, segment_bytes none\n"), altered.stderr
        config = json.loads(path.read_text())
        assert (config["cleanup_policy"], config["min_compaction_lag_ms"]) == \
            ("compact,delete", 1000)
        assert "segment_bytes" not in config
        bad = skerry(broker, "topics", "alter", "t-compact", "--cleanup-policy", "shrink")
        assert bad.returncode == 2 and b"invalid choice" in bad.stderr


class GroupsTests:
    def test_list_describe_and_reset_offsets(self, broker: BrokerProcess) -> None:
        """groups describe covers every topic a group consumes (--topic narrows it) with
        members, committed offset, hw and lag; reset-offsets is a dry run unless
        --execute, and then moves the committed offsets."""
        client = broker.client()
        for topic, offset in (("t-ga", 2), ("t-gb", 3)):  # 3 messages, `offset` read
            assert client.request(f"V1|1|ADMIN_CREATE_TOPIC|{topic} 1 1").startswith("V1|1|OK")
            client.send(b"".join(b"V1|2|PRODUCE|%b k:%d\n" % (topic.encode(), i)
                                 for i in range(3)))
            assert client.readlines(3)[-1] == b"V1|2|OK|partition=0 offset=2 hw=2"
            assert client.request(f"V1|3|ADMIN_COMMIT|g-ops {topic} 0 {offset}") == \
                "V1|3|OK|committed=true"
        client.close()
        listed = json.loads(skerry(broker, "groups", "list", "--json").stdout)
        mine = [g for g in listed if g["group"] == "g-ops"]
        assert [(g["topic"], g["state"], g["members"], g["lag"]) for g in mine] == \
            [("t-ga", "empty", 0, 1), ("t-gb", "empty", 0, 0)]
        docs = json.loads(skerry(broker, "groups", "describe", "g-ops", "--json").stdout)
        assert [(d["topic"], d["partitions"]) for d in docs] == [
            ("t-ga", [{"partition": 0, "member_id": None, "committed": 2, "hw": 2, "lag": 1}]),
            ("t-gb", [{"partition": 0, "member_id": None, "committed": 3, "hw": 2, "lag": 0}]),
        ]
        text = skerry(broker, "groups", "describe", "g-ops", "--topic", "t-ga").stdout.decode()
        assert text.splitlines() == [
            "group g-ops",
            "TOPIC  STATE  GENERATION  ASSIGNOR     MEMBERS",
            "t-ga   empty           0  round_robin  -",
            "",
            "TOPIC  PARTITION  MEMBER  COMMITTED  HW  LAG",
            "t-ga           0  -               2   2    1",
        ]
        plan = skerry(broker, "groups", "reset-offsets", "g-ops", "--topic", "t-ga",
                      "--to-earliest")
        assert plan.stdout.decode().splitlines() == [
            "plan to reset group g-ops on topic t-ga to earliest",
            "PARTITION  BEFORE  AFTER",
            "        0       2      0",
            "dry run: nothing changed; add --execute to apply",
        ]
        assert group_state(broker, "g-ops", "t-ga")["committed"] == [2]
        done = json.loads(skerry(broker, "groups", "reset-offsets", "g-ops", "--topic", "t-ga",
                                 "--to-offset", "1", "--execute", "--json").stdout)
        assert done["executed"] is True
        assert done["offsets"] == [{"partition": 0, "before": 2, "after": 1}]
        assert group_state(broker, "g-ops", "t-ga")["committed"] == [1]
        missing = skerry(broker, "groups", "describe", "g-none")
        assert (missing.returncode, missing.stderr) == \
            (1, b"skerry groups describe: no consumer group g-none\n")

    def test_describe_a_consumer_group(self, broker: BrokerProcess) -> None:
        """groups describe of a KIP-848 group (GROUP_HEARTBEAT) shows its type, group and
        assignment epochs, each member's epoch, what it owns and what it still waits for
        (w2 waits for partitions 2 and 3 until w1 confirms giving them up)."""
        client = broker.client()
        assert client.request("V1|1|ADMIN_CREATE_TOPIC|t-kip 4 1").startswith("V1|1|OK")
        for line in ("g-kip w1 0 topics=t-kip", "g-kip w2 0 topics=t-kip", "g-kip w1 1"):
            assert "|OK|" in client.request(f"V1|2|GROUP_HEARTBEAT|{line}")
        client.close()
        [doc] = json.loads(skerry(broker, "groups", "describe", "g-kip", "--json").stdout)
        assert (doc["type"], doc["state"], doc["generation"], doc["group_epoch"],
                doc["assignment_epoch"]) == ("consumer", "reconciling", 2, 2, 2)
        assert doc["members"] == [
            {"member_id": "w1", "partitions": [0, 1], "member_epoch": 1, "pending": []},
            {"member_id": "w2", "partitions": [], "member_epoch": 2, "pending": [2, 3]}]
        text = skerry(broker, "groups", "describe", "g-kip").stdout.decode()
        assert text.splitlines()[:8] == [
            "group g-kip (consumer group: group epoch 2, assignment epoch 2)",
            "TOPIC  STATE        GENERATION  ASSIGNOR  MEMBERS",
            "t-kip  reconciling           2  uniform   w1, w2",
            "",
            "TOPIC  MEMBER  EPOCH  ASSIGNED  PENDING",
            "t-kip  w1          1  0,1       -",
            "t-kip  w2          2  -         2,3",
            "",
        ]
        listed = json.loads(skerry(broker, "groups", "list", "--json").stdout)
        assert [(g["topic"], g["type"], g["members"]) for g in listed
                if g["group"] == "g-kip"] == [("t-kip", "consumer", 2)]
        table = skerry(broker, "groups", "list").stdout.decode().splitlines()
        assert table[0].split() == ["GROUP", "TOPIC", "TYPE", "STATE", "GENERATION", "MEMBERS",
                                    "LAG"]
        assert [line.split()[:3] for line in table[1:] if line.startswith("g-kip ")] == \
            [["g-kip", "t-kip", "consumer"]]

    def test_delete_a_group_on_one_or_every_topic(self, broker: BrokerProcess) -> None:
        """groups delete forgets a group on --topic, or on every topic it consumes; an
        unknown group and a group with live members are refused (exit 1)."""
        client = broker.client()
        for i, topic in enumerate(("t-da", "t-db", "t-dc")):
            assert client.request(f"V1|{i}|ADMIN_CREATE_TOPIC|{topic} 1 1").startswith(
                f"V1|{i}|OK")
            assert client.request(f"V1|c{i}|ADMIN_COMMIT|g-del {topic} 0 0") == \
                f"V1|c{i}|OK|committed=true"
        one = skerry(broker, "groups", "delete", "g-del", "--topic", "t-da")
        assert one.stdout == b"deleted group g-del on topic t-da\n", one.stderr
        assert group_state(broker, "g-del", "t-da") is None
        doc = json.loads(skerry(broker, "groups", "delete", "g-del", "--json").stdout)
        assert doc == {"group": "g-del", "deleted_topics": ["t-db", "t-dc"]}
        assert group_state(broker, "g-del", "t-db") is None
        gone = skerry(broker, "groups", "delete", "g-del")
        assert (gone.returncode, gone.stderr) == \
            (1, b"skerry groups delete: no consumer group g-del\n")
        assert client.request("V1|j|JOIN|g-live t-da member-1").startswith("V1|j|OK")
        client.close()
        live = skerry(broker, "groups", "delete", "g-live")
        assert live.returncode == 1
        assert live.stderr.startswith(b"skerry groups delete: cannot delete group g-live on "
                                      b"topic t-da: ")
        assert members(broker, "g-live", "t-da") == {"member-1": [0]}

    def test_reset_offsets_to_a_datetime_and_by_a_shift(self, broker: BrokerProcess) -> None:
        """--to-datetime moves to the first message at or after the time (the end when
        there is none); --shift-by moves from the committed offset, forwards or back."""
        assert skerry(broker, "topics", "create", "t-when", "--partitions", "1").returncode == 0
        skerry(broker, "produce", "t-when", stdin=b"k:old1\nk:old2\nk:old3\n")
        time.sleep(0.05)
        middle = datetime.now(UTC)
        time.sleep(0.05)
        skerry(broker, "produce", "t-when", stdin=b"k:new1\nk:new2\n")
        client = broker.client()
        assert client.request("V1|1|ADMIN_COMMIT|g-when t-when 0 1") == "V1|1|OK|committed=true"
        client.close()
        iso = middle.isoformat().replace("+00:00", "Z")
        plan = skerry(broker, "groups", "reset-offsets", "g-when", "--topic", "t-when",
                      "--to-datetime", iso)
        assert plan.stdout.decode().splitlines() == [
            f"plan to reset group g-when on topic t-when to {iso}",
            "PARTITION  BEFORE  AFTER",
            "        0       1      3",
            "dry run: nothing changed; add --execute to apply",
        ]
        done = json.loads(skerry(broker, "groups", "reset-offsets", "g-when", "--topic",
                                 "t-when", "--to-datetime", str(int(middle.timestamp() * 1000)),
                                 "--execute", "--json").stdout)
        assert done["offsets"] == [{"partition": 0, "before": 1, "after": 3}]
        assert group_state(broker, "g-when", "t-when")["committed"] == [3]
        future = json.loads(skerry(broker, "groups", "reset-offsets", "g-when", "--topic",
                                   "t-when", "--to-datetime", "2999-01-01T00:00:00Z",
                                   "--json").stdout)
        assert future["offsets"][0]["after"] == 5 and future["clamped"] == []
        back = skerry(broker, "groups", "reset-offsets", "g-when", "--topic", "t-when",
                      "--shift-by", "-2", "--execute")
        assert back.stdout.decode().splitlines()[0] == \
            "reset group g-when on topic t-when by -2"
        assert group_state(broker, "g-when", "t-when")["committed"] == [1]
        skerry(broker, "groups", "reset-offsets", "g-when", "--topic", "t-when",
               "--shift-by", "+3", "--execute")
        assert group_state(broker, "g-when", "t-when")["committed"] == [4]
        bad = skerry(broker, "groups", "reset-offsets", "g-when", "--topic", "t-when",
                     "--to-datetime", "yesterday")
        assert bad.returncode == 2 and b"--to-datetime must be" in bad.stderr

    def test_reset_offsets_says_when_it_clamps(self, broker: BrokerProcess) -> None:
        """An offset past the end (or a shift below the start) is moved into the range,
        and the output says so, in the plan, after --execute and in --json."""
        assert skerry(broker, "topics", "create", "t-clamp", "--partitions", "1").returncode == 0
        skerry(broker, "produce", "t-clamp", stdin=b"k:a\nk:b\n")
        client = broker.client()
        assert client.request("V1|1|ADMIN_COMMIT|g-clamp t-clamp 0 1") == \
            "V1|1|OK|committed=true"
        client.close()
        note = ("note: partition 0: offset 99 is past the end (latest 2: hw + 1); moved to 2 "
                "instead")
        plan = skerry(broker, "groups", "reset-offsets", "g-clamp", "--topic", "t-clamp",
                      "--to-offset", "99").stdout.decode().splitlines()
        assert plan[2:4] == ["        0       1      2", note]
        done = skerry(broker, "groups", "reset-offsets", "g-clamp", "--topic", "t-clamp",
                      "--to-offset", "99", "--execute").stdout.decode().splitlines()
        assert done == ["reset group g-clamp on topic t-clamp to 99",
                        "PARTITION  BEFORE  AFTER", "        0       1      2", note]
        doc = json.loads(skerry(broker, "groups", "reset-offsets", "g-clamp", "--topic",
                                "t-clamp", "--shift-by", "-5", "--json").stdout)
        assert doc["clamped"] == [{"partition": 0, "requested": -3, "after": 0, "earliest": 0,
                                   "latest": 2}]
        exact = skerry(broker, "groups", "reset-offsets", "g-clamp", "--topic", "t-clamp",
                       "--to-offset", "1").stdout.decode()
        assert "note:" not in exact

    def test_execute_refuses_an_unknown_group_unless_create(
            self, broker: BrokerProcess) -> None:
        """--execute on a group without offsets on the topic (a typo) is refused and
        creates nothing; the dry run says so; --create starts it."""
        assert skerry(broker, "topics", "create", "t-typo", "--partitions", "1").returncode == 0
        refused = skerry(broker, "groups", "reset-offsets", "g-tpyo", "--topic", "t-typo",
                         "--to-earliest", "--execute")
        assert (refused.returncode, refused.stderr.decode()) == (
            1, "skerry groups reset-offsets: no consumer group g-tpyo on topic t-typo: check "
               "the name (skerry groups list), or add --create to start it with these "
               "offsets\n")
        assert group_state(broker, "g-tpyo", "t-typo") is None
        plan = skerry(broker, "groups", "reset-offsets", "g-tpyo", "--topic", "t-typo",
                      "--to-earliest").stdout.decode()
        assert "note: group g-tpyo on topic t-typo has no offsets yet; --execute starts it " \
               "only with --create" in plan
        created = skerry(broker, "groups", "reset-offsets", "g-tpyo", "--topic", "t-typo",
                         "--to-earliest", "--execute", "--create")
        assert created.returncode == 0, created.stderr
        assert created.stdout.decode().splitlines()[-1] == \
            "started group g-tpyo on topic t-typo (--create)"
        assert group_state(broker, "g-tpyo", "t-typo")["committed"] == [0]


class SecurityTests:
    def test_auth_and_tls(self, tmp_path: Path) -> None:
        """Against a broker that wants AUTH over TLS, the tools authenticate as
        $SKERRY_USER with $SKERRY_TOKEN and check the certificate with --cafile (or
        $SKERRY_CAFILE); each missing piece is reported in one line with exit status 1."""
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        token = "s3cret-token"
        tokens = tmp_path / "tokens"
        tokens.write_text(f"alice:{hash_token(token)}\n")
        config = {"auth": {"tokens_file": str(tokens), "super_users": "alice"},
                  "tls": {"cert": str(cert), "key": str(key)}}
        with BrokerProcess(tmp_path / "b", config) as secured:
            good = {"SKERRY_USER": "alice", "SKERRY_TOKEN": token, "SKERRY_CAFILE": str(cert)}
            produced = skerry(secured, "produce", "t-sec", stdin=b"k:v1\nk:v2\n", env=good)
            assert produced.returncode == 0, produced.stderr
            consumed = skerry(secured, "consume", "t-sec", "-q", env=good)
            assert consumed.stdout == b"v1\nv2\n"
            anonymous = skerry(secured, "topics", "list", "--cafile", str(cert))
            assert anonymous.returncode == 1
            assert anonymous.stderr == (b"skerry topics list: the broker asks for "
                                        b"authentication (send AUTH <user> <token> first): "
                                        b"set $SKERRY_USER and $SKERRY_TOKEN (see --help)\n")
            wrong = skerry(secured, "topics", "list", env={**good, "SKERRY_TOKEN": "nope"})
            assert wrong.returncode == 1
            assert wrong.stderr == (b"skerry topics list: authentication as alice failed: the "
                                    b"broker says 'invalid user or token'; check $SKERRY_USER "
                                    b"and $SKERRY_TOKEN\n")
            untrusted = skerry(secured, "topics", "list", "--tls",
                               env={"SKERRY_USER": "alice", "SKERRY_TOKEN": token})
            assert untrusted.returncode == 1
            assert b"TLS with the broker at 127.0.0.1:" in untrusted.stderr
            no_token = skerry(secured, "topics", "list", "--user", "alice",
                              env={"SKERRY_TOKEN": ""})
            assert (no_token.returncode, no_token.stderr) == \
                (2, b"skerry topics list: --user alice needs its token in $SKERRY_TOKEN\n")
        assert token not in secured.log_text()


class FailFastTests:
    """A refusal that every later line would get too stops ``skerry produce`` at once, in
    one line that says what to do and where to resume, instead of one error per line."""

    def test_produce_without_credentials_stops_at_the_first_line(
            self, tmp_path: Path) -> None:
        """5000 lines against a broker that wants AUTH, without $SKERRY_USER: one line
        naming $SKERRY_USER/$SKERRY_TOKEN and the resume line, not 5000 UNAUTHENTICATED."""
        tokens = tmp_path / "tokens"
        tokens.write_text(f"alice:{hash_token('s3cret')}\n")
        with BrokerProcess(tmp_path / "b", {"auth": {"tokens_file": str(tokens)}}) as secured:
            result = skerry(secured, "produce", "t-auth",
                            stdin=b"".join(b"k:v%d\n" % i for i in range(5000)))
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert len(err) == 1, err[:3]
        assert SUMMARY_RE.match(err[0]).groups() == ("0", "t-auth;", "1") or \
            err[0].startswith("produced 0 messages to t-auth in ")
        assert err[0].endswith(
            "; 1 error; stopped: line 1: the broker asks for authentication (send AUTH "
            "<user> <token> first): set $SKERRY_USER and $SKERRY_TOKEN (see --help); no "
            "line acknowledged, resume from line 1"), err[0]

    def test_produce_to_a_topic_the_broker_will_not_create_stops(
            self, tmp_path: Path) -> None:
        """With auto_create_topics off, an unknown topic stops the run at its first line
        and says how to create it."""
        with BrokerProcess(tmp_path, {"auto_create_topics": False}) as strict:
            result = skerry(strict, "produce", "t-absent", stdin=b"a:1\nb:2\nc:3\n")
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert len(err) == 1, err
        assert err[0].endswith(
            "; 1 error; stopped: line 1: topic t-absent does not exist (`skerry topics list` "
            "shows the topics; `skerry topics create t-absent` creates it); no line "
            "acknowledged, resume from line 1"), err[0]

    def test_an_over_long_line_names_the_limit_and_the_setting(self, tmp_path: Path) -> None:
        """A line over the broker's limits.max_line_bytes stops the run (the broker closes
        the connection) with the limit, the setting and the line to resume from."""
        with BrokerProcess(tmp_path, {"limits": {"max_line_bytes": 1024}}) as small:
            result = skerry(small, "produce", "t-long", stdin=b"k:a\nk:" + b"x" * 2000 + b"\n")
        assert result.returncode == 1
        err = result.stderr.decode().splitlines()
        assert len(err) == 1, err
        assert err[0].startswith("produced 1 message to t-long in "), err[0]
        assert err[0].endswith(
            "; 1 error; stopped: line 2: the line is too long for the broker: more than 1024 "
            "bytes (the broker's limits.max_line_bytes); send a smaller value, or raise that "
            "setting in the broker's configuration; last acknowledged line 1, resume from "
            "line 2"), err[0]


class WrongAddressTests:
    """The usual ways of pointing the tools at the wrong place each get a message that
    says what is wrong, at once."""

    def test_a_host_name_that_cannot_be_resolved_is_named(self, tmp_path: Path) -> None:
        """An unknown host says that its name cannot be resolved (not "Unknown error -2")."""
        result = subprocess.run([sys.executable, "-m", "broker", "topics", "list",
                                 "--bootstrap", "nosuchhost.invalid:9092"],
                                capture_output=True, cwd=ROOT, timeout=60)
        assert result.returncode == 1
        err = result.stderr.decode()
        assert err.startswith("skerry topics list: cannot connect to the broker at "
                              "nosuchhost.invalid:9092: the host name nosuchhost.invalid "
                              "cannot be resolved ("), err
        assert "Unknown error" not in err

    def test_the_metrics_port_is_recognised_as_http_at_once(self, tmp_path: Path) -> None:
        """The broker's HTTP metrics port given as --bootstrap is named as such at once,
        not after the answer timeout."""
        with BrokerProcess(tmp_path, {"metrics_port": 0}) as metered:
            port = re.search(r"metrics=127\.0\.0\.1:(\d+)", metered.log_text()).group(1)
            for name, command in (("topics list", ["topics", "list"]),
                                  ("consume", ["consume", "t-any"])):
                started = time.monotonic()
                result = skerry(metered, *command, "--bootstrap", f"127.0.0.1:{port}",
                                "--timeout", "30")
                assert time.monotonic() - started < 10, command
                assert result.returncode == 1
                assert result.stderr.decode() == (
                    f"skerry {name}: 127.0.0.1:{port} answered in HTTP: this is "
                    "an HTTP port (metrics?), not a Skerry V1 port; see --bootstrap (the V1 "
                    "port is the broker's `port`, 9092 by default)\n")

    def test_the_kafka_iggy_and_tank_ports_are_named(self, tmp_path: Path) -> None:
        """Skerry's own Kafka, Iggy and TANK ports given as --bootstrap are recognised
        from what they answer (a TANK greeting, an Iggy error header, a Kafka ApiVersions
        answer) and named, with the setting, at once; not taken for a TLS port."""
        config = {"kafka_port": 0, "iggy_port": 0, "tank_port": 0}
        with BrokerProcess(tmp_path, config) as multi:
            ports = dict(re.findall(r"(kafka|iggy|tank)=127\.0\.0\.1:(\d+)", multi.log_text()))
            for key, protocol in (("kafka", "Kafka"), ("iggy", "Iggy"), ("tank", "TANK")):
                for name, command in (("topics list", ["topics", "list"]),
                                      ("produce", ["produce", "t-any"])):
                    started = time.monotonic()
                    result = skerry(multi, *command, "--bootstrap",
                                    f"127.0.0.1:{ports[key]}", "--timeout", "30",
                                    stdin=b"k:v\n")
                    assert time.monotonic() - started < 10, command
                    assert result.returncode == 1
                    assert result.stderr.decode() == (
                        f"skerry {name}: 127.0.0.1:{ports[key]} answered in {protocol}'s "
                        f"protocol: this is a {protocol} port (the broker's `{key}_port`?), "
                        "not a Skerry V1 port; see --bootstrap (the V1 port is the broker's "
                        "`port`, 9092 by default)\n"), (key, result.stderr)

    def test_a_plain_client_against_a_tls_broker_is_told_to_add_tls(
            self, tmp_path: Path) -> None:
        """Without --tls against a TLS broker the message suggests --tls; with --tls
        against a plain broker it suggests dropping it."""
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        with BrokerProcess(tmp_path / "b", {"tls": {"cert": str(cert), "key": str(key)}}) \
                as secured:
            for name, command in (("topics list", ["topics", "list"]),
                                  ("consume", ["consume", "t-any"])):
                result = skerry(secured, *command)
                assert result.returncode == 1
                err = result.stderr.decode()
                assert err.startswith(f"skerry {name}: "), err
                assert "add --tls" in err, err
        with BrokerProcess(tmp_path / "p") as unsecured:
            plain = skerry(unsecured, "topics", "list", "--cafile", str(cert))
        assert plain.returncode == 1
        assert "(a plain port, not TLS? then drop --tls/--cafile)" in plain.stderr.decode()

