"""docs/kafka.md's table of APIs and versions is the code's: regenerating it changes
nothing, and its "advertised now" column is what a broker's ApiVersions answers."""

from __future__ import annotations

from broker.kafka import api_table
from broker.kafka import codec as c
from tests.kafka.harness import Harness


def test_the_page_table_is_generated_from_the_code():
    """Run ``python -m broker.kafka.api_table --write`` when this fails."""
    text = api_table.DOC.read_text()
    assert api_table.rewrite(text) == text


def test_advertised_now_is_what_api_versions_answers(tmp_path):
    harness = Harness(tmp_path)
    try:
        response = c.api_versions_response(c.ApiVersionsRequest(c.RequestHeader(18, 0, 1, None)),
                                           harness.service.ctx.advertised)
        listed = {a.api_key: f"{a.min_version}-{a.max_version}".replace("0-0", "0")
                  for a in response.api_keys}
        rows = [line.split(" | ") for line in api_table.markdown_table().splitlines()[2:]]
        table = {int(r[0].strip("| ")): r[2] for r in rows if r[2] != "-"}
        assert table == listed
    finally:
        harness.close()
