"""The V1 coordinator's side of sharing offsets and group ids with Kafka's classic
groups: ``committed_offset`` (None is not 0), ``record_offset`` with Kafka metadata, V1
writes clearing that metadata, the cross-protocol guard on JOIN and the admin commands,
``live_protocol``, and ``offsets.json`` version 2 (metadata) in groups/store.py."""

from __future__ import annotations

import pytest

from groups.coordinator import V1, GroupCoordinator
from groups.errors import InvalidGroupRequest
from groups.store import offset_metadata_from_json, offsets_from_json, offsets_to_json


def coordinator() -> GroupCoordinator:
    return GroupCoordinator(lambda topic: 3)


class SharedOffsetTests:
    def test_nothing_committed_is_none_not_zero(self) -> None:
        """V1 OFFSET says 0 for nothing committed; committed_offset tells None from 0."""
        c = coordinator()
        assert c.offset("g", "t", 0) == 0
        assert c.committed_offset("g", "t", 0) is None
        c.record_offset("g", "t", 0, 0)
        assert c.committed_offset("g", "t", 0) == (0, "")

    def test_kafka_metadata_is_kept_until_a_v1_write(self) -> None:
        """A Kafka commit's metadata stays with its offset; a V1 ADMIN_COMMIT or
        ADMIN_RESET_OFFSETS of the partition clears it (V1 has no metadata)."""
        c = coordinator()
        c.record_offset("g", "t", 0, 5, "md-0")
        c.record_offset("g", "t", 1, 6, "md-1")
        assert c.committed_metadata() == {("g", "t"): {0: "md-0", 1: "md-1"}}
        c.admin_commit("g", "t", 0, 7)
        assert c.committed_offset("g", "t", 0) == (7, "")
        c.reset_offsets("g", "t", 2, 1, earliest_for=lambda t, p: 0,
                        latest_for=lambda t, p: 10)
        assert c.committed_metadata() == {}

    def test_delete_group_and_topic_drop_metadata(self) -> None:
        """ADMIN_DELETE_GROUP and a deleted topic forget the metadata with the offsets."""
        c = coordinator()
        c.record_offset("g", "t", 0, 5, "md")
        c.record_offset("h", "u", 0, 5, "md")
        c.delete_group("g", "t")
        c.topic_deleted("u")
        assert c.committed_metadata() == {}
        assert c.committed_offset("h", "u", 0) is None

    def test_restore_keeps_metadata_of_committed_partitions_only(self) -> None:
        c = coordinator()
        c.restore([], {("g", "t"): {0: 1}}, {("g", "t"): {0: "a", 1: "b"}})
        assert c.committed_metadata() == {("g", "t"): {0: "a"}}


class GuardTests:
    def test_join_and_admin_refused_while_another_protocol_holds_the_group(self) -> None:
        """With the guard naming kafka for group g, V1 JOIN and the admin commands are
        refused with InvalidGroupRequest (BAD_REQUEST) naming it, and nothing changed;
        another group id is unaffected."""
        c = coordinator()
        c.protocol_of = lambda group: "kafka" if group == "g" else None
        with pytest.raises(InvalidGroupRequest, match="in use by kafka clients"):
            c.join("g", "t", "m1", 0)
        with pytest.raises(InvalidGroupRequest, match="live kafka members"):
            c.admin_commit("g", "t", 0, 1)
        with pytest.raises(InvalidGroupRequest, match="live kafka members"):
            c.reset_offsets("g", "t", "earliest", earliest_for=lambda t, p: 0,
                            latest_for=lambda t, p: 0)
        assert c.group("g", "t") is None and c.committed_offset("g", "t", 0) is None
        assert c.join("h", "t", "m1", 0).reply.generation == 1

    def test_live_protocol_names_v1_while_any_topic_has_members(self) -> None:
        c = coordinator()
        assert c.live_protocol("g") is None
        c.join("g", "t2", "m1", 0)
        assert c.live_protocol("g") == V1
        c.leave("g", "t2", "m1", 1)
        assert c.live_protocol("g") is None


class OffsetsDocumentTests:
    def test_version_1_without_metadata_and_2_with(self) -> None:
        """A document without Kafka metadata stays version 1 (older brokers read it); with
        metadata it is version 2 and both parts round-trip."""
        offsets = {("g", "t"): {0: 5, 2: 3}}
        plain = offsets_to_json(offsets)
        assert plain["version"] == 1
        assert "metadata" not in plain["offsets"][0]
        doc = offsets_to_json(offsets, {("g", "t"): {0: "md", 2: ""}})
        assert doc["version"] == 2
        assert doc["offsets"][0]["metadata"] == {"0": "md"}
        assert offsets_from_json(doc) == offsets
        assert offset_metadata_from_json(doc) == {("g", "t"): {0: "md"}}

    @pytest.mark.parametrize("metadata, message", [
        ({"1": "x"}, "not a committed partition"),
        ({"0": ""}, "non-empty string"),
        ({"0": 7}, "non-empty string"),
        (["x"], "expected an object"),
    ])
    def test_bad_metadata_is_refused(self, metadata: object, message: str) -> None:
        doc = {"version": 2, "offsets": [{"group": "g", "topic": "t", "committed": {"0": 5},
                                          "metadata": metadata}]}
        with pytest.raises(ValueError, match=message):
            offset_metadata_from_json(doc)

    def test_metadata_needs_version_2_and_version_3_is_refused(self) -> None:
        entry = {"group": "g", "topic": "t", "committed": {"0": 5}, "metadata": {"0": "x"}}
        with pytest.raises(ValueError, match="unknown field metadata"):
            offsets_from_json({"version": 1, "offsets": [entry]})
        with pytest.raises(ValueError, match="reads version 1 or 2"):
            offsets_from_json({"version": 3, "offsets": []})
