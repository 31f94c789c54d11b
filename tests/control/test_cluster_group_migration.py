"""Old group files on a cluster, on real processes (one etcd member, three brokers with
``cluster.etcd``): a broker's ``offsets.json`` and ``groups.json`` from before
``__skerry_groups`` are imported into the topic once, by the broker itself for the groups
it coordinates and through their coordinators for the others, then renamed
``*.migrated``; every broker then answers the old offsets (docs/groups.md, "Migration")."""

from __future__ import annotations

import json
from pathlib import Path

from bench.group_coordinator import GroupCluster, wait

GROUPS = [f"old{i}" for i in range(8)]  # spread over the topic's 4 partitions


def _old_files(data_dir: Path, groups: list[str], offset: int) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "offsets.json").write_text(json.dumps({"version": 2, "offsets": [
        {"group": g, "topic": "gt", "committed": {"0": offset}} for g in groups]}))
    (data_dir / "groups.json").write_text(json.dumps({"version": 1, "groups": [
        {"group": groups[0], "topic": "gt", "generation": 3, "assignor": "range",
         "partitions": 3, "members": []}]}))


def test_old_group_files_are_imported_once(tmp_path: Path) -> None:
    """Broker 0's and broker 1's old offsets are served by every broker after the start
    (whoever coordinates each group: broker 0, started last, sends its offsets to the
    coordinators), the files are renamed ``*.migrated``, and a restart changes nothing
    (nothing is imported twice)."""
    c = GroupCluster(tmp_path)
    try:
        # Brokers 1 and 2 first: they lead the coordinator partitions, so broker 0's old
        # offsets go through their coordinators, broker 1's are imported as it leads.
        _old_files(c.procs[1].data_dir, ["other"], 1)
        c.start(1, 2)
        for b in (1, 2):
            wait(lambda b=b: "|OK|" in c.ask(b, "V1|w|LIST_GROUPS|"), "groups served", 60)
        _old_files(c.procs[0].data_dir, GROUPS, 1)
        c.start(0)
        c.ready()
        c.create_topic("gt", 3)  # broker 0 sends its offsets once the topic exists
        for g in [*GROUPS, "other"]:
            for x in c.procs:
                wait(lambda g=g, x=x: c.ask(x, f"V1|1|OFFSET|{g} gt 0") == "V1|1|OK|offset=1",
                     f"{g}'s old offset through broker {x}", 30)
        for b in (0, 1):
            wait(lambda b=b: sorted(p.name for p in c.procs[b].data_dir.glob("*.json*")
                                    if "offsets" in p.name or "groups" in p.name)
                 == ["groups.json.migrated", "offsets.json.migrated"], f"broker {b}'s files "
                 "renamed", 30)
        log0 = c.procs[0].log_text()
        here = log0.count("imported this broker's old group files' state")
        sent = log0.count("sent this broker's old group files' offsets")
        print(f"broker 0: {here} partition(s) imported as coordinator, {sent} sent to "
              f"another coordinator")
        assert sent >= 1 and here + sent == len(set(_partitions(GROUPS)))
        assert c.ask(2, "V1|2|ADMIN_COMMIT|old0 gt 0 0") == "V1|2|OK|committed=true"
        for proc in c.procs.values():
            proc.stop()
        c.start()
        c.ready()
        for x in c.procs:  # the moved-back offset stays: the old files are not read again
            wait(lambda x=x: c.ask(x, "V1|3|OFFSET|old0 gt 0") == "V1|3|OK|offset=0",
                 "offsets after the restart", 30)
            assert c.ask(x, "V1|4|OFFSET|old1 gt 0") == "V1|4|OK|offset=1"
    finally:
        c.close()


def _partitions(groups: list[str]) -> list[int]:
    from groups.records import partition_for_group

    return [partition_for_group(g, 4) for g in groups]
