"""``skerry cluster status``'s text, as a person reads it: the head line names the brokers
that are down in words, and the partition table keeps its columns aligned whatever the
leaders are (a number or ``none``)."""

from __future__ import annotations

from broker.cli.cluster import ClusterReport, PartitionRow, render
from tests.support import ROOT

BOOK = {0: "127.0.0.1:34409", 1: "127.0.0.1:44629", 2: "127.0.0.1:53321"}


def report(up: dict[int, bool], leaders: list[int]) -> ClusterReport:
    rows = []
    for p, leader in enumerate(leaders):
        replicas = [(p + i) % 3 for i in range(3)]  # 0,1,2 then 1,2,0 then 2,0,1
        # right after a crash only the leaderless partition has dropped the dead broker
        isr = replicas if leader >= 0 else [b for b in replicas if up.get(b)]
        rows.append(PartitionRow("demo", p, leader, 0, replicas, isr))
    return ClusterReport(dict(BOOK), up, None, "operator", rows)


def head(text: str) -> str:
    return text.splitlines()[0]


class ClusterRenderTests:
    def test_one_broker_down_is_named_as_a_broker(self) -> None:
        """``(2 up, down: broker 1)``: the id reads as a broker, not as a count."""
        text = render(report({0: True, 1: False, 2: True}, [0, 2, 2]))
        assert head(text).startswith("brokers: 3 (2 up, down: broker 1); ")

    def test_several_brokers_down_use_the_plural(self) -> None:
        """Two down: ``down: brokers 1, 2``."""
        text = render(report({0: True, 1: False, 2: False}, [0, 0, 0]))
        assert head(text).startswith("brokers: 3 (1 up, down: brokers 1, 2); ")

    def test_all_up_says_nothing_about_down(self) -> None:
        """Every broker up: just the count."""
        text = render(report({0: True, 1: True, 2: True}, [0, 1, 2]))
        assert head(text).startswith("brokers: 3 (3 up); ")

    def test_leader_column_aligns_the_same_with_and_without_none(self) -> None:
        """The LEADER column is right-aligned like the other numbers whether or not a
        leader is ``none``: its values end where its header ends."""
        for leaders in ([0, 1, 2], [0, -1, 2]):
            lines = render(report({0: True, 1: leaders[1] >= 0, 2: True}, leaders)
                           ).split("\n\n")[-1].splitlines()
            end = lines[0].index("LEADER") + len("LEADER")
            cells = [line[:end].rsplit(" ", 1)[-1] for line in lines[1:]]
            assert cells == [str(x) if x >= 0 else "none" for x in leaders], lines

    def test_docs_cluster_md_shows_what_render_prints(self) -> None:
        """docs/cluster.md's ``skerry cluster status`` example (broker 1 down, partition 1
        without a leader) is exactly what ``render`` prints for that cluster."""
        text = (ROOT / "docs" / "cluster.md").read_text()
        block = text.split("$ skerry cluster status\n", 1)[1].split("```", 1)[0]
        assert block == render(report({0: True, 1: False, 2: True}, [0, -1, 2]))
