"""The cluster scenario: real etcd members and three real brokers on loopback running
themselves (``cluster.etcd``): RF=3, min ISR 2, a pipelined ``acks=all`` load of random
binary values, and the spec's failure targets ("Cluster control plane on etcd", Failure
targets) with figures.

Run it (from the repository root)::

    .venv/bin/python -m bench.cluster_scenario                        # every target
    .venv/bin/python -m bench.cluster_scenario --target 1 --runs 20 --messages 100000
    .venv/bin/python -m bench.cluster_scenario --target 7 --unclean --ttl-ms 6000

Targets (each on a fresh cluster; ``--etcd 3`` members by default):

1. ``kill -9`` of the partition leader, ``--runs`` times (the killed broker restarts as a
   follower between runs): failover time = from the kill to the first acknowledgement by
   the new leader (an upper bound of "last ack of the old leader -> first ack of the new
   one"), min/median/max;
2. the leader ``SIGSTOP``ped for 2 x TTL then ``SIGCONT``: replaced; once resumed it
   follows within a second and acknowledges no write;
3. a broker cut off from etcd only (its TCP proxies in front of etcd closed): replaced
   within TTL + 1 s; it acknowledges no ``acks=all`` write meanwhile;
4. etcd's own members: the 2 of 3 that do not lead etcd stopped (SIGSTOP) for 2 x TTL,
   then etcd's leader killed: 0 leadership changes, 0 produce errors;
5. ``SIGTERM`` of the leader: failover time, 0 ``REPLICATION_TIMEOUT``;
6. the controller's broker killed (one that leads nothing when possible): the controller
   and its partitions move within TTL + 1 s;
7. every ISR member dead (a third broker, stopped long enough to leave the ISR, alive):
   the partition goes offline (``leader=-1`` in etcd, no broker takes writes) and the
   last ISR member leads again when it comes back. With ``--unclean``
   (``unclean_leader_election: true``): the leader is left alone in the ISR with the two
   followers stopped one after the other (the second holds more), then killed and the
   followers resumed: the controller takes the partition offline, reads the replicas'
   log ends from etcd and elects the longer log, which is the replica *later* in list
   order here, so nothing acknowledged is lost (list order would have lost the
   messages acknowledged while the first follower was stopped).

Every target ends with the same checks: every acknowledged message is on the final leader
exactly once, in order, at its offset, and all three logs are byte-identical.

Must not import: Twisted or the broker's runtime; ``data.store`` only on stopped brokers'
directories; etcd is read with ``etcdctl``-free HTTP calls to its JSON gateway.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.replication_scenario import Producer, _check_acked, fields, free_ports
from bench.tcp_proxy import TcpProxy
from data.store import StorageConfig, Store
from tests.control.real_etcd import EtcdCluster
from tests.support import BrokerProcess

__all__ = ["EtcdBrokers", "TargetResult", "run_target", "main"]

TOPIC = "repl"
CLUSTER_ID = "bench"


class EtcdBrokers:
    """``etcd_members`` etcd processes and three brokers with ``cluster.etcd``; with
    ``proxies`` each broker reaches etcd through its own ``TcpProxy`` per member."""

    def __init__(self, workdir: Path, *, etcd_members: int = 3, ttl_ms: int = 2000,
                 fence: bool = False, unclean: bool = False, proxies: bool = False,
                 partitions: int = 1) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.ttl = ttl_ms / 1000.0
        self.etcd = EtcdCluster(workdir, etcd_members)
        self.proxies: dict[int, list[TcpProxy]] = {}
        ports = free_ports(3)
        brokers = {i: f"127.0.0.1:{p}" for i, p in enumerate(ports)}
        self.procs: dict[int, BrokerProcess] = {}
        for i, port in enumerate(ports):
            endpoints = self.etcd.endpoints
            if proxies:
                self.proxies[i] = [TcpProxy(_host_port(e)) for e in endpoints]
                endpoints = [p.url for p in self.proxies[i]]
            config = {
                "log_level": "info",
                "auto_create_topics": False,
                "storage": {"fsync": "always"},
                "replication": {"replica_lag_timeout_ms": 1000, "ack_timeout_ms": 3000,
                                "fetch_wait_ms": 200, "retry_backoff_ms": 100,
                                "request_timeout_ms": 1000},
                "topics": {TOPIC: {"partitions": partitions, "replication_factor": 3,
                                   "min_insync_replicas": 2}},
                "cluster": {"broker_id": i, "brokers": brokers, "id": CLUSTER_ID,
                            "unclean_leader_election": unclean,
                            "etcd": {"endpoints": endpoints, "lease_ttl_ms": ttl_ms,
                                     "fence_writes_on_session_loss": fence}},
            }
            self.procs[i] = BrokerProcess(workdir / f"broker{i}", config, port=port)

    # ------------------------------------------------------------------ processes

    def start(self, broker_id: int | None = None) -> None:
        ids = [broker_id] if broker_id is not None else list(self.procs)
        with ThreadPoolExecutor(len(ids)) as pool:
            for future in [pool.submit(self.procs[i].start) for i in ids]:
                future.result()

    def signal(self, broker_id: int, sig: int) -> None:
        proc = self.procs[broker_id].proc
        assert proc is not None
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            proc.wait(timeout=30)

    def alive(self, broker_id: int) -> bool:
        proc = self.procs[broker_id].proc
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.proc is not None and proc.proc.poll() is None:
                proc.proc.send_signal(signal.SIGCONT)
            proc.__exit__(None, None, None)
        for p in self.etcd.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
        self.etcd.stop()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.proc is not None and proc.proc.poll() is None:
                proc.stop()

    # ------------------------------------------------------------------ etcd

    def etcd_get(self, key: str) -> dict[str, Any] | None:
        body = json.dumps({"key": base64.b64encode(
            f"/skerry/{CLUSTER_ID}/{key}".encode()).decode()}).encode()
        for endpoint in self.etcd.endpoints:
            try:
                request = urllib.request.Request(endpoint + "/v3/kv/range", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=1) as answer:
                    kvs = json.loads(answer.read()).get("kvs", [])
                return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None
            except OSError:
                continue
        raise OSError("no etcd member answered")

    def partition(self) -> dict[str, Any]:
        state = self.etcd_get(f"partitions/{TOPIC}/0")
        assert state is not None
        return state

    def etcd_prefix(self, prefix: str) -> dict[str, Any]:
        """Every key under ``/skerry/<id>/<prefix>`` (the name after the prefix -> value)."""
        from replication.control.keys import prefix_range_end

        full = f"/skerry/{CLUSTER_ID}/{prefix}".encode()
        body = json.dumps({"key": base64.b64encode(full).decode(), "range_end":
                           base64.b64encode(prefix_range_end(full)).decode()}).encode()
        for endpoint in self.etcd.endpoints:
            try:
                request = urllib.request.Request(endpoint + "/v3/kv/range", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=1) as answer:
                    kvs = json.loads(answer.read()).get("kvs", [])
                return {base64.b64decode(kv["key"])[len(full):].decode():
                        json.loads(base64.b64decode(kv["value"])) for kv in kvs}
            except OSError:
                continue
        raise OSError("no etcd member answered")

    def controller(self) -> int | None:
        doc = self.etcd_get("controller")
        return None if doc is None else int(doc["broker"])

    # ------------------------------------------------------------------ brokers

    def request(self, broker_id: int, line: str, timeout: float = 5.0) -> str:
        client = self.procs[broker_id].client(timeout=timeout)
        try:
            return client.request(f"V1|1|{line}")
        finally:
            client.close()

    def status(self, broker_id: int, timeout: float = 5.0) -> dict[str, str]:
        reply = self.request(broker_id, f"REPLICA_STATUS|{TOPIC} 0", timeout)
        if "|OK|" not in reply:
            raise RuntimeError(f"broker {broker_id}: {reply}")
        return fields(reply.split("|OK|", 1)[1])

    def leader(self) -> int | None:
        """The broker accepting writes (leader, confirmed), None when none does."""
        for i in self.procs:
            if not self.alive(i):
                continue
            try:
                # A short timeout: a SIGSTOPped broker accepts the connection and never
                # answers, and must not delay finding the one that does.
                info = self.status(i, timeout=0.3)
            except (OSError, RuntimeError):
                continue
            if info["role"] == "leader" and info["confirmed"] == "true":
                return i
        return None

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 60.0,
             step: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = condition()
            except (OSError, RuntimeError, KeyError, AssertionError):
                value = None
            if value:
                return value
            time.sleep(step)
        raise TimeoutError(f"timed out waiting for {what}")

    def wait_whole_isr(self, timeout: float = 60.0) -> int:
        """Until etcd's committed ISR names all three brokers and one leads; the leader."""
        def whole() -> int | None:
            state = self.partition()
            if len(state["isr"]) != 3 or state["leader"] < 0:
                return None
            leader = state["leader"]
            return leader + 1 if self.leader() == leader else None

        return self.wait(whole, "a leader with the whole ISR", timeout) - 1

    def wait_caught_up(self, leader: int, timeout: float = 120.0) -> int:
        def done() -> int | None:
            lead = self.status(leader)
            leo = int(lead["leo"])
            if int(lead["hw"]) != leo - 1:
                return None
            for i in self.procs:
                info = self.status(i)
                if int(info["leo"]) != leo or int(info["hw"]) != leo - 1:
                    return None
            return leo + 1

        return self.wait(done, "every replica caught up", timeout) - 1

    def read_log(self, broker_id: int) -> tuple[bytes, list[bytes]]:
        store = Store(str(self.procs[broker_id].data_dir), StorageConfig(fsync="never"))
        try:
            plog = store.partition(TOPIC, 0)
            raws: list[bytes] = []
            payloads: list[bytes] = []
            at = plog.first_offset
            while at < plog.next_offset:
                result = plog.read(at, 100_000, 1 << 24)
                if not result.records:
                    break
                raws.append(result.raw)
                payloads.extend(r.payload for r in result.records)
                at = result.next_offset
            return b"".join(raws), payloads
        finally:
            store.close()


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


@dataclass
class TargetResult:
    target: str
    messages: int
    acked: int
    timeouts: int
    not_leader: int
    unanswered: int
    failovers: list[float] = field(default_factory=list)
    log_end: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        fo = ""
        if self.failovers:
            fo = (f" failover min/median/max {min(self.failovers):.2f}/"
                  f"{statistics.median(self.failovers):.2f}/{max(self.failovers):.2f} s "
                  f"over {len(self.failovers)} run(s)")
        return (f"target {self.target}: sent={self.messages} acked={self.acked} "
                f"read back={self.log_end} timeouts={self.timeouts} "
                f"not_leader={self.not_leader} unanswered={self.unanswered}{fo}; "
                + "; ".join(self.notes))


class _Load:
    """The producer, always aimed at the current leader (found through REPLICA_STATUS)."""

    def __init__(self, cluster: EtcdBrokers, window: int) -> None:
        self.cluster = cluster
        self.target = cluster.wait_whole_isr()
        self.producer = Producer(lambda: self.target, _ClusterShim(cluster), window=window)

    def windows(self, count: int, before_replies: Callable[[], None] | None = None) -> int:
        """Send ``count`` requests to the current leader; returns how many were acked."""
        before = len(self.producer.acked)
        self.producer.send_window(count, before_replies)
        return len(self.producer.acked) - before

    def retarget(self, timeout: float, old: int | None = None) -> int:
        """Aim at the leader etcd names (not ``old``) once it accepts writes, as a client
        routing by the cluster's metadata does."""
        self.producer.close()

        def named() -> int | None:
            leader = int(self.cluster.partition()["leader"])
            if leader < 0 or leader == old:
                return None
            info = self.cluster.status(leader, timeout=0.3)
            confirmed = info["role"] == "leader" and info["confirmed"] == "true"
            return leader + 1 if confirmed else None

        self.target = self.cluster.wait(named, "a new leader", timeout, step=0.01) - 1
        return self.target

    def first_ack_after(self, start: float, timeout: float, old: int | None = None) -> float:
        """Produce single requests to the leader etcd names (not ``old``) until one is
        acknowledged; seconds since ``start``."""
        deadline = start + timeout
        while time.monotonic() < deadline:
            try:
                self.retarget(max(0.1, deadline - time.monotonic()), old)
            except TimeoutError:
                break
            if self.windows(1):
                return time.monotonic() - start
            time.sleep(0.01)
        raise AssertionError(f"no acknowledgement within {timeout} s of the failure")


class _ClusterShim:
    """What ``Producer`` needs of a cluster: ``procs``."""

    def __init__(self, cluster: EtcdBrokers) -> None:
        self.procs = cluster.procs


def _finish(cluster: EtcdBrokers, load: _Load, result: TargetResult) -> TargetResult:
    """Every broker up and caught up, then stopped: logs byte-identical, acks read back."""
    for i in cluster.procs:
        if not cluster.alive(i):
            cluster.start(i)
    leader = cluster.wait_whole_isr(timeout=90)
    load.producer.close()
    result.log_end = cluster.wait_caught_up(leader)
    cluster.stop()
    lead_raw, payloads = cluster.read_log(leader)
    for i in cluster.procs:
        if i != leader:
            raw, _ = cluster.read_log(i)
            if raw != lead_raw:
                raise AssertionError(f"broker {i}'s log differs from the leader's")
    result.notes.append(f"3 logs byte-identical ({len(lead_raw)} bytes)")
    _check_acked(load.producer, payloads)
    result.notes.append(f"all {len(load.producer.acked)} acked read back in order")
    p = load.producer
    result.messages = p.sent
    result.acked, result.timeouts = len(p.acked), p.timeouts
    result.not_leader, result.unanswered = p.not_leader, p.unanswered
    return result


def _steady(load: _Load, count: int, window: int) -> None:
    while count > 0:
        n = min(window, count)
        load.windows(n)
        count -= n


def run_target(target: str, workdir: Path, *, messages: int = 10_000, runs: int = 1,
               window: int = 500, etcd_members: int = 3, ttl_ms: int = 2000,
               unclean: bool = False) -> TargetResult:
    """Run one failure target on a fresh cluster (module docstring)."""
    cluster = EtcdBrokers(workdir, etcd_members=etcd_members, ttl_ms=ttl_ms,
                          fence=target == "2", unclean=unclean and target == "7",
                          proxies=target == "3")
    try:
        cluster.start()
        load = _Load(cluster, window)
        result = TargetResult(target, messages, 0, 0, 0, 0)
        per = max(window, messages // (runs + 1))
        ttl = cluster.ttl
        if target in ("1", "5"):
            sig = signal.SIGKILL if target == "1" else signal.SIGTERM
            for _ in range(runs):
                _steady(load, per, window)
                victim = load.target
                killed: list[float] = []

                def kill(v: int = victim, killed: list[float] = killed) -> None:
                    killed.append(time.monotonic())
                    cluster.signal(v, sig)

                load.windows(window, kill)
                result.failovers.append(load.first_ack_after(killed[0], ttl + 10, victim))
                cluster.start(victim)
                load.target = cluster.wait_whole_isr()
            bound = ttl + 1 if target == "1" else 1.0
            slow = [f for f in result.failovers if f > bound]
            result.notes.append(f"{len(result.failovers) - len(slow)} of "
                                f"{len(result.failovers)} within {bound:.1f} s")
        elif target == "2":
            _steady(load, per, window)
            victim = load.target
            cluster.signal(victim, signal.SIGSTOP)
            stopped = time.monotonic()
            result.failovers.append(load.first_ack_after(stopped, ttl + 10, victim))
            time.sleep(max(0.0, 2 * ttl - (time.monotonic() - stopped)))
            cluster.signal(victim, signal.SIGCONT)
            resumed = time.monotonic()
            cluster.wait(lambda: cluster.status(victim)["role"] == "follower",
                         "the old leader to follow", 5, step=0.01)
            result.notes.append(f"old leader follows {time.monotonic() - resumed:.2f} s after "
                                "SIGCONT")
            reply = cluster.request(victim, f"PRODUCE|{TOPIC} k:late acks=all")
            if "|OK|" in reply:
                raise AssertionError(f"the resumed old leader acknowledged a write: {reply}")
            result.notes.append("resumed old leader refused the write")
            _steady(load, per, window)
        elif target == "3":
            _steady(load, per, window)
            victim = load.target
            for proxy in cluster.proxies[victim]:
                proxy.cut()
            cut = time.monotonic()
            result.failovers.append(load.first_ack_after(cut, ttl + 10, victim))
            late = cluster.request(victim, f"PRODUCE|{TOPIC} k:late acks=all", 10)
            if "|OK|" in late:
                raise AssertionError(f"the cut-off old leader acknowledged a write: {late}")
            result.notes.append("cut-off old leader acknowledged no acks=all write "
                                f"({late.split('|')[3] if late.count('|') > 3 else late})")
            _steady(load, per, window)
            for proxy in cluster.proxies[victim]:
                proxy.restore()
            cluster.wait(lambda: cluster.status(victim)["role"] == "follower",
                         "the old leader to follow", ttl + 10)
            bound = ttl + 1
            result.notes.append(f"replaced in {result.failovers[0]:.2f} s "
                                f"({'within' if result.failovers[0] <= bound else 'OVER'} "
                                f"{bound:.1f} s)")
        elif target == "4":
            if etcd_members < 3:
                raise ValueError("target 4 needs 3 etcd members")
            _steady(load, per // 2, window)
            epoch = cluster.partition()["leader_epoch"]
            # The two members that do not lead etcd: a stopped etcd *leader* would revoke,
            # on SIGCONT, every lease that expired by its clock while it was stopped.
            etcd_leader = _etcd_leader(cluster)
            others = [m for m in range(3) if m != etcd_leader]
            for m in others:
                cluster.etcd.procs[m].send_signal(signal.SIGSTOP)
            started = time.monotonic()
            while time.monotonic() - started < 2 * ttl:
                load.windows(min(window, 100))
            for m in others:
                cluster.etcd.procs[m].send_signal(signal.SIGCONT)
            cluster.etcd.wait_healthy([0, 1, 2], 20)
            cluster.etcd.kill(_etcd_leader(cluster))
            _steady(load, per // 2, window)
            time.sleep(ttl)
            changes = cluster.partition()["leader_epoch"] - epoch
            result.notes.append(f"{changes} leadership change(s)")
            if changes:
                raise AssertionError(f"{changes} leadership changes while etcd degraded")
        elif target == "6":
            _steady(load, per, window)
            controller = cluster.wait(
                lambda: (lambda c: None if c is None else c + 1)(cluster.controller()),
                "a controller", 10) - 1
            killed_at = time.monotonic()
            cluster.signal(controller, signal.SIGKILL)
            new = cluster.wait(lambda: (lambda c: None if c in (None, controller) else c + 1)(
                cluster.controller()), "a new controller", ttl + 10, step=0.01) - 1
            moved = time.monotonic() - killed_at
            result.notes.append(f"controller {controller} -> {new} in {moved:.2f} s")
            if load.target == controller:
                result.failovers.append(load.first_ack_after(killed_at, ttl + 10,
                                                             controller))
            _steady(load, per, window)
        elif target == "7" and unclean:
            _unclean_by_log_end(cluster, load, result, per, window)
        elif target == "7":
            _steady(load, per, window)
            leader = load.target
            outsider = [i for i in cluster.procs if i != leader][-1]
            cluster.signal(outsider, signal.SIGSTOP)     # it leaves the ISR (lag timeout)
            cluster.wait(lambda: outsider not in cluster.partition()["isr"],
                         "the ISR to shrink", 30)
            _steady(load, 2 * window, window)            # written without the outsider
            isr = list(cluster.partition()["isr"])
            for i in isr:
                cluster.signal(i, signal.SIGKILL)
            cluster.signal(outsider, signal.SIGCONT)
            cluster.wait(lambda: cluster.partition()["leader"] == -1, "offline",
                         ttl + 10, step=0.05)
            state = cluster.partition()
            if cluster.leader() is not None:
                raise AssertionError("a broker outside the ISR took writes")
            result.notes.append(f"ISR {isr} dead, broker {outsider} alive outside it: "
                                f"offline (leader=-1 epoch={state['leader_epoch']} "
                                f"isr={state['isr']} kept), no broker takes writes")
            cluster.start(isr[-1])
            cluster.wait(lambda: cluster.partition()["leader"] == isr[-1],
                         "the last ISR member to lead again", ttl + 10)
            result.notes.append(f"broker {isr[-1]} back: leads again")
        else:
            raise ValueError(f"unknown target {target}")
        return _finish(cluster, load, result)
    finally:
        cluster.close()


def _unclean_by_log_end(cluster: EtcdBrokers, load: _Load, result: TargetResult, per: int,
                        window: int) -> None:
    """Target 7 with unclean election on (module docstring)."""
    ttl = cluster.ttl
    _steady(load, per, window)
    leader = load.target
    replicas = cluster.etcd_get(f"topics/{TOPIC}")["replicas"][0]   # type: ignore[index]
    first, second = [r for r in replicas if r != leader]      # list order
    cluster.signal(first, signal.SIGSTOP)
    cluster.wait(lambda: first not in cluster.partition()["isr"], "the ISR to shrink", 30)
    _steady(load, 2 * window, window)            # acknowledged by the leader and `second`
    cluster.signal(second, signal.SIGSTOP)
    cluster.wait(lambda: cluster.partition()["isr"] == [leader], "the ISR to be the leader",
                 30)
    cluster.signal(leader, signal.SIGKILL)
    killed = time.monotonic()
    cluster.signal(first, signal.SIGCONT)
    cluster.signal(second, signal.SIGCONT)
    seen: dict[str, Any] = {}

    def elected() -> int | None:
        seen.update(cluster.etcd_prefix(f"logends/{TOPIC}/0/"))
        now = cluster.partition()["leader"]
        return None if now in (-1, leader) else now + 1

    new = cluster.wait(elected, "an unclean election", 3 * ttl + 10, step=0.02) - 1
    took = time.monotonic() - killed
    ends = ", ".join(f"broker {b}: {r['log_end']} (last epoch {r['last_epoch']})"
                     for b, r in sorted(seen.items()))
    result.notes.append(f"ISR [{leader}] killed, brokers {first} and {second} (list order) "
                        f"resumed outside it; reported log ends {ends or 'none seen'}; "
                        f"broker {new} elected {took:.2f} s after the kill")
    if new != second:
        raise AssertionError(f"broker {new} elected, not {second} with the longer log")
    if str(first) in seen and str(second) in seen:
        result.notes.append(f"list order would have elected broker {first}, missing the "
                            f"{seen[str(second)]['log_end'] - seen[str(first)]['log_end']} "
                            "messages acknowledged while it was stopped")
    else:
        result.notes.append(f"the bench's poll did not see both log-end keys (broker {first}'s "
                            "lease may have expired while it was stopped, or the election "
                            "followed both reports within one poll and the keys were gone; "
                            "a TTL of 6000 ms makes the first unlikely)")
    load.retarget(ttl + 10, leader)
    _steady(load, window, window)


def _etcd_leader(cluster: EtcdBrokers) -> int:
    for i, endpoint in enumerate(cluster.etcd.endpoints):
        try:
            request = urllib.request.Request(endpoint + "/v3/maintenance/status", data=b"{}",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=1) as answer:
                doc = json.loads(answer.read())
            if doc.get("leader") == doc.get("header", {}).get("member_id"):
                return i
        except OSError:
            continue
    return 0


TARGETS = ["1", "2", "3", "4", "5", "6", "7"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=500)
    parser.add_argument("--runs", type=int, default=20, help="kill -9 runs of target 1")
    parser.add_argument("--etcd", type=int, default=3, help="etcd members")
    parser.add_argument("--ttl-ms", type=int, default=2000)
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--unclean", action="store_true",
                        help="target 7 with unclean leader election on")
    args = parser.parse_args(argv)
    names = TARGETS if args.target == "all" else [args.target]
    root = Path(tempfile.mkdtemp(prefix="skerry-cluster-"))
    print(f"{args.etcd} etcd + 3 brokers on 127.0.0.1, RF=3, min ISR 2, lease TTL "
          f"{args.ttl_ms} ms, {args.messages} pipelined acks=all per target "
          f"({args.window} in flight); data in {root}")
    failed = False
    for name in names:
        started = time.monotonic()
        try:
            result = run_target(name, root / f"t{name}", messages=args.messages,
                                runs=args.runs if name == "1" else 1, window=args.window,
                                etcd_members=args.etcd, ttl_ms=args.ttl_ms,
                                unclean=args.unclean)
        except Exception as exc:  # noqa: BLE001 - report every target, then fail
            failed = True
            print(f"target {name}: FAILED: {type(exc).__name__}: {exc}")
        else:
            print(result.line() + f" ({time.monotonic() - started:.0f} s)")
        sys.stdout.flush()
    if not failed:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
