"""Tests for ``skerry harness``: the invariant checker on made-up observations (so each
invariant is shown to catch what it is meant to catch), the seeded chaos schedule, the
command line, and a real run against a real broker process."""

from __future__ import annotations

import asyncio
import doctest
import json
import socket
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import pytest

import broker.harness.check
from broker.cli import build_parser, main
from broker.client.aio import Address
from broker.harness.check import Checker, Observation, chaos_schedule, format_report, percentile
from broker.harness.consumer import MemberConnection
from broker.harness.runner import _chart_unavailable
from tests.support import ROOT, BrokerProcess

SESSION_MS = 500


def _obs(sent: float, members: dict[str, tuple[int, ...]], *, generation: int = 1,
         partitions: int = 4, live: set[str] | None = None,
         answered: float | None = None) -> Observation:
    return Observation(sent=sent, answered=sent + 0.002 if answered is None else answered,
                       generation=generation, state="stable" if members else "empty",
                       members=members, partitions=partitions,
                       live=frozenset(members if live is None else live))


class CheckerTests:
    def test_two_owners_of_a_partition_in_one_generation_is_a_violation(self) -> None:
        """Exclusivity: SYNC answers giving partition 1 to both a and b in generation 3
        are one violation; the same partition in different generations is fine."""
        checker = Checker(SESSION_MS)
        checker.record_assignment("a", 3, [0, 1], source="SYNC", floor=0, answered=1.0)
        checker.record_assignment("b", 4, [1, 2], source="SYNC", floor=0, answered=1.1)
        assert checker.violation_count == 0
        checker.record_assignment("b", 3, [1, 2], source="JOIN", floor=0, answered=1.2)
        assert checker.violations["exclusivity"] == 1
        assert "partition 1 assigned to both a and b in generation 3" in checker.messages[0]

    def test_a_member_whose_assignment_changes_within_a_generation_is_a_violation(
            self) -> None:
        """Exclusivity: one generation has one assignment; a DESCRIBE_GROUP that shows
        a member with other partitions than its SYNC said is a violation."""
        checker = Checker(SESSION_MS)
        checker.record_assignment("a", 2, [0, 2], source="SYNC", floor=0, answered=1.0)
        checker.record_describe(_obs(1.0, {"a": (0, 1, 2), "b": (3,)}, generation=2),
                                floor=0, refreshed={})
        assert checker.violations["exclusivity"] == 1

    def test_an_unassigned_partition_with_members_is_a_coverage_violation(self) -> None:
        """Coverage: members present but partition 3 owned by nobody is a violation; an
        empty group owes no coverage."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(1.0, {}), floor=0, refreshed={})
        checker.record_describe(_obs(1.1, {"a": (0, 1, 2, 3)}), floor=0, refreshed={})
        assert checker.violation_count == 0
        checker.record_describe(_obs(1.2, {"a": (0, 2), "b": (1,)}, generation=2), floor=0,
                                refreshed={})
        assert checker.violations["coverage"] == 1
        assert "[3]" in checker.messages[0]

    def test_a_fencing_probe_must_be_refused_with_generation_mismatch(self) -> None:
        """Fencing: a refused probe passes; an accepted one, or one refused with another
        code, is a violation."""
        checker = Checker(SESSION_MS)
        checker.record_probe("stale_generation", False, "GENERATION_MISMATCH", 1.0, "a gen 1")
        assert checker.violation_count == 0
        checker.record_probe("stale_generation", True, None, 1.1, "a gen 1")
        checker.record_probe("not_owner", False, "BAD_REQUEST", 1.2, "b p2")
        assert checker.violations["fencing"] == 2
        assert checker.probes == {"stale_generation": 2, "not_owner": 1}

    def test_a_dead_member_still_listed_after_the_bound_is_a_liveness_violation(self) -> None:
        """Liveness: a DESCRIBE_GROUP sent more than session timeout + 100 ms after the
        member's last heartbeat that still lists it is a violation (reported once)."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(9.9, {"a": (0, 2), "b": (1, 3)}), floor=0, refreshed={})
        checker.record_death("a", "kill", anchor=10.0)
        checker.record_describe(_obs(10.59, {"a": (0, 2), "b": (1, 3)}, live={"b"}), floor=0,
                                refreshed={})
        assert checker.violation_count == 0
        for sent in (10.61, 10.7):
            checker.record_describe(_obs(sent, {"a": (0, 2), "b": (1, 3)}, live={"b"}),
                                    floor=0, refreshed={})
        assert checker.violations["liveness"] == 1

    def test_eviction_and_reassignment_times_are_measured_from_the_last_heartbeat(
            self) -> None:
        """Death -> eviction is the answer time of the first DESCRIBE_GROUP without the
        member; death -> reassignment waits until its partitions belong to live members
        (here c, the new owner of partition 0, is itself dead at first)."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(9.9, {"a": (0, 2), "b": (1, 3), "c": ()}), floor=0,
                                refreshed={})
        death = checker.record_death("a", "pause", anchor=10.0)
        assert death.partitions == (0, 2)
        checker.record_describe(_obs(10.52, {"b": (1, 3), "c": (0, 2)}, generation=2,
                                     live={"b"}, answered=10.53), floor=0, refreshed={})
        assert death.evicted == 10.53 and death.reassigned is None
        checker.record_describe(_obs(10.7, {"b": (0, 1, 2, 3)}, generation=3, live={"b"},
                                     answered=10.71), floor=0, refreshed={})
        assert death.reassigned == 10.71
        assert checker.resolved_death("a")
        summary = checker.summary()
        assert summary["death_to_eviction_s"]["max"] == pytest.approx(0.53)
        assert summary["death_to_reassignment_s"]["max"] == pytest.approx(0.71)
        assert checker.violation_count == 0

    def test_a_death_registered_late_is_judged_on_earlier_observations(self) -> None:
        """A pause is registered once its last answers arrived; DESCRIBE_GROUP answers
        already received after its anchor still count (here: late eviction)."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(9.9, {"a": (0, 1, 2, 3), "b": ()}), floor=0, refreshed={})
        checker.record_describe(_obs(10.8, {"a": (0, 1, 2, 3), "b": ()}, live={"b"}),
                                floor=0, refreshed={})
        checker.record_death("a", "pause", anchor=10.0)
        assert checker.violations["liveness"] == 1

    def test_a_live_member_evicted_before_its_session_ran_out_is_a_violation(self) -> None:
        """Liveness, the other side: a member whose refresh was acknowledged at 10.0 must be
        listed by every answer that came back before 10.5."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(10.6, {"b": (0, 1, 2, 3)}), floor=0,
                                refreshed={"a": 10.0, "b": 10.2})
        assert checker.violation_count == 0
        checker.record_describe(_obs(10.3, {"b": (0, 1, 2, 3)}), floor=0,
                                refreshed={"a": 10.0, "b": 10.2})
        assert checker.violations["liveness"] == 1

    def test_generations_going_backwards_is_a_durability_violation(self) -> None:
        """Durability: an answer showing a generation below one answered before its
        request was sent is a violation."""
        checker = Checker(SESSION_MS)
        checker.record_assignment("a", 5, [0], source="JOIN", floor=0, answered=1.0)
        floor = checker.generation_floor()
        assert floor == 5
        checker.record_assignment("b", 5, [1], source="SYNC", floor=floor, answered=1.1)
        assert checker.violation_count == 0
        checker.record_describe(_obs(1.2, {"a": (0, 1, 2, 3)}, generation=4), floor=floor,
                                refreshed={})
        assert checker.violations["durability"] == 1

    def test_offset_below_an_acknowledged_commit_is_a_durability_violation(self) -> None:
        """Durability: OFFSET answering less than a commit acknowledged before it was sent
        is a violation; a commit acknowledged after the OFFSET was sent is not owed."""
        checker = Checker(SESSION_MS)
        checker.record_commit_ack(2, 10)
        floor = checker.acked_floor(2)
        checker.record_commit_ack(2, 12)
        checker.record_offset(2, 10, floor, 1.0)
        assert checker.violation_count == 0
        checker.record_offset(2, 11, checker.acked_floor(2), 1.1)
        assert checker.violations["durability"] == 1

    def test_redeliveries_after_a_rebalance_are_counted_but_not_violations(self) -> None:
        """Duplicates: a message consumed again by a new reader that started from the
        committed offset is a re-delivery; the same reader reading it twice, or a reader
        re-reading below a commit acknowledged before it started, is a violation."""
        checker = Checker(SESSION_MS)
        first, second, third = checker.new_epoch(), checker.new_epoch(), checker.new_epoch()
        checker.record_delivery(first, 0, 5, b"v5", 0, 1.0)
        checker.record_delivery(second, 0, 5, b"v5", 5, 1.1)  # uncommitted: legitimate
        assert (checker.redeliveries, checker.violation_count) == (1, 0)
        checker.record_delivery(second, 0, 5, b"v5", 5, 1.2)
        checker.record_delivery(third, 0, 5, b"v5", 6, 1.3)
        assert checker.violations["duplicates"] == 2
        assert checker.summary()["messages_unique"] == 1

    def test_a_consumed_value_that_was_not_produced_is_an_integrity_violation(self) -> None:
        """Integrity: at the end, each consumed value is compared with the produced one."""
        checker = Checker(SESSION_MS)
        checker.record_produced(1, 0, b"m0")
        checker.record_produced(1, 1, b"m1")
        epoch = checker.new_epoch()
        checker.record_delivery(epoch, 1, 0, b"m0", 0, 1.0)
        checker.record_delivery(epoch, 1, 1, b"other", 0, 1.0)
        checker.record_delivery(epoch, 1, 2, b"unknown to us", 0, 1.0)
        checker.finish(2.0)
        assert checker.violations["integrity"] == 1

    def test_report_shows_every_invariant_and_the_latency_percentiles(self) -> None:
        """The text report names every invariant, the p50/p99/max lines and the verdict."""
        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(9.9, {"a": (0, 1), "b": (2, 3)}), floor=0, refreshed={})
        checker.record_death("a", "kill", anchor=10.0)
        checker.record_describe(_obs(10.51, {"b": (0, 1, 2, 3)}, generation=2), floor=0,
                                refreshed={})
        report = checker.summary()
        report["setup"] = {"consumers": 2, "duration_s": 5.0, "session_timeout_ms": SESSION_MS,
                           "assignor": "range", "seed": 9, "bootstrap": "127.0.0.1:9092",
                           "topic": "t", "partitions": 4, "group": "g", "elapsed_s": 7.5}
        report["chaos"] = {"kill": 1}
        text = format_report(report)
        for name in broker.harness.check.INVARIANTS:
            assert f"{name} 0" in text
        assert "death -> reassignment:  n=1 p50=0.512 s p99=0.512 s max=0.512 s" in text
        assert text.endswith("result: PASS")

    def test_percentile_is_nearest_rank(self) -> None:
        """p50 and p99 over 1..100 are 50 and 99; the module's doctests hold."""
        values = [float(v) for v in range(100, 0, -1)]
        assert (percentile(values, 50), percentile(values, 99)) == (50.0, 99.0)
        assert doctest.testmod(broker.harness.check).failed == 0


class DeathAnchorTests:
    def test_a_stopped_member_is_judged_from_its_last_heartbeat_answer(self) -> None:
        """The death anchor is the latest moment the broker may have refreshed the
        session: a HEARTBEAT sent at 1.0 and answered at 1.25 anchors at 1.25, not 1.0 (a
        broker that answered late also refreshed late); while a heartbeat is unanswered the
        anchor is the moment the member stops. The "evicted early" side keeps the send."""

        async def scenario() -> tuple[float, float, float, float]:
            now = [0.0]
            answer = asyncio.Event()

            async def serve(reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
                while line := await reader.readline():
                    cid = line.split(b"|")[1]
                    await answer.wait()
                    answer.clear()
                    writer.write(b"V1|" + cid + b"|OK|\n")
                    await writer.drain()

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            conn = MemberConnection(reader, writer, Address("127.0.0.1", port), 5.0,
                                    clock=lambda: now[0])
            now[0] = 1.0
            beat = asyncio.ensure_future(conn.request("HEARTBEAT", "g t a 1"))
            await asyncio.sleep(0.05)
            waiting = conn.refresh_anchor(1.1)
            now[0] = 1.25
            answer.set()
            await beat
            answered = conn.refresh_anchor(2.0)
            conn.abort()
            server.close()
            await server.wait_closed()
            return waiting, answered, conn.last_refresh_ok, conn.last_refresh_answered

        waiting, answered, sent, last_answer = asyncio.run(scenario())
        assert waiting == 1.1
        assert answered == 1.25 and last_answer == 1.25
        assert sent == 1.0


class ChaosScheduleTests:
    def test_the_schedule_is_reproducible_from_its_seed(self) -> None:
        """The same seed gives the same plan; another seed gives another plan."""
        assert chaos_schedule(11, 60, 1000) == chaos_schedule(11, 60, 1000)
        assert chaos_schedule(11, 60, 1000) != chaos_schedule(12, 60, 1000)

    @pytest.mark.parametrize("seed", range(20))
    def test_deaths_come_one_at_a_time_inside_the_window(self, seed: int) -> None:
        """Kills and pauses are at least 1.3 session timeouts apart, every event lies
        inside the window minus its last session timeout, pauses outlast the session
        timeout, and every kind of event occurs in a minute of chaos."""
        session = 0.8
        plan = chaos_schedule(seed, 60, int(session * 1000))
        assert all(0 <= e.at < 60 - session and 0 <= e.pick < 1 for e in plan)
        deaths = [e for e in plan if e.action in ("kill", "pause")]
        assert all(b.at - a.at >= 1.3 * session - 0.002 for a, b in pairwise(deaths))
        assert all(1.5 * session - 0.001 <= e.pause_s <= 2.5 * session + 0.001
                   for e in deaths if e.action == "pause")
        assert {e.action for e in plan} == {"kill", "pause", "restart", "add"}
        assert [e.at for e in plan] == sorted(e.at for e in plan)


class CommandLineTests:
    def test_chart_without_matplotlib_says_how_to_get_it(
            self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            tmp_path: Path) -> None:
        """Without matplotlib, --chart stops at once (exit 2) with a message naming the
        harness extra, before connecting anywhere."""
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        code = main(["harness", "--chart", str(tmp_path / "run.png"),
                     "--bootstrap", "127.0.0.1:1"])
        assert code == 2
        err = capsys.readouterr().err
        assert "--chart needs matplotlib" in err and "skerry[harness]" in err
        assert not (tmp_path / "run.png").exists()

    def test_no_broker_at_the_bootstrap_address_exits_2(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        """A bootstrap address where nothing listens gives exit 2 and one clear line: the
        shared client's, as every skerry command says it."""
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        assert main(["harness", "--bootstrap", f"127.0.0.1:{port}", "--duration", "1"]) == 2
        assert (f"cannot connect to the broker at 127.0.0.1:{port}: Connection refused "
                "(is `skerry serve` running there? see --bootstrap)") in capsys.readouterr().err

    def test_bootstrap_defaults_to_skerry_bootstrap_like_every_command(
            self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --bootstrap the harness, like produce, consume, topics, groups and
        pipeline, goes to $SKERRY_BOOTSTRAP (here an address where nothing listens: exit 2
        naming it), not to a fixed 127.0.0.1:9092."""
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        monkeypatch.setenv("SKERRY_BOOTSTRAP", f"127.0.0.1:{port}")
        parser = build_parser()
        for command in (["harness"], ["produce", "t"], ["consume", "t"], ["topics", "list"],
                        ["groups", "list"], ["pipeline", "seed"]):
            assert parser.parse_args(command).bootstrap == f"127.0.0.1:{port}", command
        assert main(["harness", "--duration", "1"]) == 2
        assert (f"cannot connect to the broker at 127.0.0.1:{port}: Connection refused "
                "(is `skerry serve` running there? see --bootstrap)") in capsys.readouterr().err

    @pytest.mark.parametrize("args, message", [
        (["--bootstrap", "nohost"], "--bootstrap must be host:port"),
        (["--consumers", "0"], "--consumers must be at least 1"),
        (["--session-timeout-ms", "50"], "--session-timeout-ms must be between"),
        (["--duration", "0"], "--duration must be positive"),
    ])
    def test_bad_options_exit_2_naming_the_option(
            self, args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """Each invalid option value is refused with exit 2 and names the option."""
        assert main(["harness", *args]) == 2
        assert message in capsys.readouterr().err

    def test_chart_is_drawn_when_matplotlib_is_installed(self, tmp_path: Path) -> None:
        """With matplotlib the chart is a PNG file; without it the reason is explained
        (CI installs only the test extra, so either may be the case here)."""
        why = _chart_unavailable()
        if why is not None:
            assert "pip install 'skerry[harness]'" in why
            return
        from broker.harness.chart import write_chart

        checker = Checker(SESSION_MS)
        checker.record_describe(_obs(0.1, {"a": (0, 2), "b": (1, 3)}), floor=0, refreshed={})
        checker.record_death("a", "kill", anchor=0.2)
        checker.record_describe(_obs(0.75, {"b": (0, 1, 2, 3)}, generation=2, live={"b"}),
                                floor=0, refreshed={})
        timeline = SimpleNamespace(states={"a": [(0.0, "live"), (0.2, "killed")],
                                           "b": [(0.0, "live")]},
                                   chaos=[(0.2, "kill", "a"), (0.5, "skip add", "why")])
        path = tmp_path / "run.png"
        write_chart(str(path), checker, timeline, start=0.0, partitions=4, title="test")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class IncrementalCheckerTests:
    """The checker of ``--protocol consumer`` runs (KIP-848 members)."""

    def test_a_partition_given_while_its_holder_has_not_released_it_is_owned_twice(
            self) -> None:
        """b is given partition 2 while a, heard from 0.1 s before, has not sent the
        heartbeat releasing it: exclusivity is violated. Once a has released it, giving it
        to c is fine."""
        checker = Checker(SESSION_MS, incremental=True)
        checker.record_held("a", [0, 1, 2], 1.0, anchors={})
        checker.record_held("b", [2], 1.2, anchors={"a": 1.1})
        assert checker.violations["exclusivity"] == 1
        assert "partition 2 given to b while a still held it" in checker.messages[0]
        checker.record_released("a", [1])
        checker.record_held("c", [1], 1.3, anchors={"a": 1.25})
        assert checker.violations["exclusivity"] == 1

    def test_a_holder_silent_for_a_session_timeout_may_have_been_fenced(self) -> None:
        """A holder whose last accepted heartbeat is a session timeout before the answer
        may have been fenced by the broker: its partition going elsewhere is no
        violation."""
        checker = Checker(SESSION_MS, incremental=True)
        checker.record_held("a", [0], 1.0, anchors={})
        checker.record_held("b", [0], 1.6, anchors={"a": 1.05})
        assert checker.violation_count == 0

    def test_hand_over_within_one_epoch_is_not_a_generation_violation(self) -> None:
        """Ownership moving between DESCRIBE_GROUP answers of one group epoch, and a
        partition without an owner for a moment, are how KIP-848 hands partitions over; one
        answer listing a partition under two members is a violation."""
        checker = Checker(SESSION_MS, incremental=True)
        checker.record_describe(_obs(0.1, {"a": (0, 1, 2, 3), "b": ()}, generation=2),
                                floor=0, refreshed={})
        checker.record_describe(_obs(0.2, {"a": (0, 1), "b": ()}, generation=2),
                                floor=2, refreshed={})
        checker.record_describe(_obs(0.3, {"a": (0, 1), "b": (2, 3)}, generation=2),
                                floor=2, refreshed={})
        assert checker.violation_count == 0
        checker.record_describe(_obs(0.4, {"a": (0, 1, 2), "b": (2, 3)}, generation=2),
                                floor=2, refreshed={})
        assert checker.violations["exclusivity"] == 1

    def test_a_produced_message_never_consumed_is_a_processing_violation(self) -> None:
        """At the end every message the producer got acknowledged must have been consumed
        (KIP-848 runs); classic runs do not judge it."""
        for incremental, expected in ((True, 1), (False, 0)):
            checker = Checker(SESSION_MS, incremental=incremental)
            checker.record_produced(0, 0, b"m0")
            checker.record_produced(0, 1, b"m1")
            checker.record_delivery(checker.new_epoch(), 0, 0, b"m0", 0, 1.0)
            checker.finish(2.0)
            assert checker.violations["processing"] == expected


class HarnessRunTests:
    def test_a_group_with_live_members_is_refused(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The harness will not mix its members into a group that already has live ones:
        exit 2 naming the group, and the group is left as it was."""
        with BrokerProcess(tmp_path) as proc:
            c = proc.client()
            assert c.request("V1|1|JOIN|busy orders someone").startswith("V1|1|OK|generation=1")
            code = main(["harness", "--bootstrap", f"127.0.0.1:{proc.port}", "--group", "busy",
                         "--topic", "orders", "--duration", "1"])
            assert code == 2
            assert "group busy on topic orders already has members" in capsys.readouterr().err
            assert c.request("V1|2|DESCRIBE_GROUP|busy orders").startswith(
                "V1|2|OK|state=stable generation=1 assignor=round_robin members=[someone:0,1,2]")

    def test_a_chaos_run_against_a_real_broker_finds_no_violation(self, tmp_path: Path) -> None:
        """`python -m broker harness` with 5 consumers, a 500 ms session timeout and a few
        seconds of kills, pauses, restarts and adds exits 0; its JSON report shows no
        violation or error, members dying and being reassigned within the session timeout
        + 100 ms, fencing probes refused, and messages really consumed."""
        with BrokerProcess(tmp_path) as proc:
            result = subprocess.run(
                [sys.executable, "-m", "broker", "harness", "--bootstrap",
                 f"127.0.0.1:{proc.port}", "-n", "5", "--duration", "5",
                 "--session-timeout-ms", str(SESSION_MS), "--seed", "3", "--json"],
                cwd=ROOT, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
        report = json.loads(result.stdout)
        assert report["violations"] == 0 and report["errors"] == 0, report
        assert report["passed"] is True
        assert report["chaos"]["kill"] + report["chaos"]["pause"] >= 2
        assert report["deaths"] >= 2 and report["deaths_unresolved"] == 0
        # An upper bound (answer time of the first DESCRIBE_GROUP showing it) with slack for
        # a busy machine; the exact bound is the liveness invariant, counted above.
        assert report["death_to_reassignment_s"]["max"] <= SESSION_MS / 1000 + 0.25
        assert report["rebalances"] >= 5 + report["deaths"]  # joins, evictions, ...
        assert sum(report["fencing_probes"].values()) >= 10
        assert report["messages_produced"] > 0
        assert report["messages_consumed"] >= report["messages_unique"] > 0
        assert report["commits_acknowledged"] > 0 and report["offset_checks"] > 0

    def test_a_consumer_protocol_chaos_run_finds_no_violation(self, tmp_path: Path) -> None:
        """`python -m broker harness --protocol consumer`: KIP-848 members driven by
        GROUP_HEARTBEAT under a few seconds of kills, pauses, restarts and adds exit 0: no
        partition held by two members at once, every produced message consumed, fencing
        probes refused, dead members' partitions reassigned."""
        config = {"groups": {"consumer_session_timeout_ms": SESSION_MS,
                             "consumer_heartbeat_interval_ms": 150}}
        with BrokerProcess(tmp_path, config) as proc:
            result = subprocess.run(
                [sys.executable, "-m", "broker", "harness", "--bootstrap",
                 f"127.0.0.1:{proc.port}", "--protocol", "consumer", "-n", "5",
                 "--duration", "5", "--session-timeout-ms", str(SESSION_MS), "--seed", "3",
                 "--json"], cwd=ROOT, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
        report = json.loads(result.stdout)
        assert report["passed"] is True and report["setup"]["protocol"] == "consumer"
        assert report["violations"] == 0 and report["errors"] == 0, report
        assert report["chaos"]["kill"] + report["chaos"]["pause"] >= 2
        assert report["deaths"] >= 2 and report["deaths_unresolved"] == 0
        assert report["fencing_probes"]["unknown_member"] >= 5
        assert report["fencing_probes"]["epoch_ahead"] >= 5
        assert report["messages_unique"] == report["messages_produced"] > 0
        assert report["rebalances"] >= 5 + report["deaths"]  # group epochs: joins, fencings

