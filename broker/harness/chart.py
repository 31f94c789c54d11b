"""``skerry harness --chart``: a PNG timeline of a harness run.

Owns: drawing three panels over the run's time axis: the group's generation and the number
of live members; each member's state (live, paused, killed) with the chaos events; and each
partition's owner as DESCRIBE_GROUP reported it (red where the owner was not live).

matplotlib is optional (``pip install 'skerry[harness]'``): it is imported only when this
module is, which ``broker.harness.runner`` does only after checking that it is installed.

Must not import: sockets, asyncio, Twisted or the broker's own code; it draws what the
checker and the harness recorded.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display needed: write a file

import matplotlib.pyplot as plt  # noqa: E402

from broker.harness.check import Checker  # noqa: E402

__all__ = ["write_chart"]

_STATE_COLOURS = {"live": "#2ca02c", "paused": "#ff7f0e", "killed": "#d62728"}
_CHAOS_MARKERS = {"kill": ("x", "#d62728"), "pause": ("|", "#ff7f0e"),
                  "restart": ("^", "#1f77b4"), "add": ("+", "#1f77b4")}


def write_chart(path: str, checker: Checker, timeline: Any, *, start: float,
                partitions: int, title: str) -> None:
    """Draw the run recorded by ``checker`` (DESCRIBE_GROUP observations) and ``timeline``
    (``states``: member -> [(t, state)], ``chaos``: [(t, action, member)]) into ``path``."""
    observations = checker.observations
    end = max([start + 1.0] + [o.answered for o in observations]
              + [t for changes in timeline.states.values() for t, _ in changes])
    members = sorted(timeline.states)
    row = {m: i for i, m in enumerate(members)}
    cmap = plt.get_cmap("tab20")
    colour = {m: cmap(i % 20) for i, m in enumerate(members)}

    fig, (ax_gen, ax_members, ax_parts) = plt.subplots(
        3, 1, figsize=(14, 4 + 0.18 * (len(members) + partitions)), sharex=True,
        gridspec_kw={"height_ratios": [1.2, max(1.0, len(members) / 8),
                                       max(1.0, partitions / 8)]})
    fig.suptitle(title)

    times = [o.answered - start for o in observations]
    ax_gen.step(times, [o.generation for o in observations], where="post", color="black",
                label="generation")
    ax_gen.set_ylabel("generation")
    ax_live = ax_gen.twinx()
    ax_live.step(times, [len(o.live) for o in observations], where="post", color="#2ca02c",
                 alpha=0.6, label="live members")
    ax_live.set_ylabel("live members", color="#2ca02c")

    for member, changes in timeline.states.items():
        for i, (t, state) in enumerate(changes):
            until = changes[i + 1][0] if i + 1 < len(changes) else end
            if state in _STATE_COLOURS:
                ax_members.broken_barh([(t - start, until - t)], (row[member] - 0.4, 0.8),
                                       color=_STATE_COLOURS[state])
    for t, action, member in timeline.chaos:
        if member in row and action in _CHAOS_MARKERS:
            marker, col = _CHAOS_MARKERS[action]
            ax_members.plot([t - start], [row[member]], marker=marker, color=col,
                            markersize=8, linestyle="none")
    ax_members.set_yticks(range(len(members)), members, fontsize=7)
    ax_members.set_ylabel("members (green live, orange paused, red killed)")

    for p in range(partitions):
        segment_start, owner, live = None, None, True
        for obs, t in zip(observations, times, strict=True):
            now_owner = next((m for m, parts in obs.members.items() if p in parts), None)
            now_live = now_owner in obs.live
            if (now_owner, now_live) != (owner, live):
                _owner_bar(ax_parts, p, segment_start, t, owner, live, colour)
                segment_start, owner, live = t, now_owner, now_live
        _owner_bar(ax_parts, p, segment_start, end - start, owner, live, colour)
    ax_parts.set_yticks(range(partitions), [f"p{p}" for p in range(partitions)], fontsize=7)
    ax_parts.set_ylabel("owner (black: not live)")
    ax_parts.set_xlabel("seconds since the consumers started")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _owner_bar(ax: Any, partition: int, start: float | None, end: float, owner: str | None,
               live: bool, colour: dict[str, Any]) -> None:
    if start is None or owner is None or end <= start:
        return
    ax.broken_barh([(start, end - start)], (partition - 0.4, 0.8),
                   color=colour.get(owner, "grey") if live else "black")
