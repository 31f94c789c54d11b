"""docs/security.md tells the truth: its table of what every command needs is the one the
code generates, every V1 command has a row, and the `skerry acls` session and the V1
lines it shows give exactly the answers printed there on a real broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from broker.access_table import BEGIN, END, markdown, rows
from broker.auth import hash_token
from broker.kafka import access as kafka_access
from broker.kafka.handlers.dispatch import advertised_versions
from broker.v1 import access as v1_access
from broker.v1.codec.commands import ALL_COMMANDS, SECURITY_COMMANDS
from tests.support import ROOT, BrokerProcess

DOC = ROOT / "docs" / "security.md"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n### ", start + len(heading))
    return text[start:following if following != -1 else len(text)]


class TableTests:
    def test_the_table_is_the_generated_one(self) -> None:
        """The block between the markers is exactly `python -m broker.access_table`."""
        text = DOC.read_text()
        block = text[text.index(BEGIN):text.index(END) + len(END)] + "\n"
        assert block == markdown()

    def test_every_v1_command_has_a_row(self) -> None:
        """A V1 command added without saying what it needs fails here."""
        covered = {*v1_access.NEEDS, *v1_access.NONE, *v1_access.FILTERED}
        assert covered == {*ALL_COMMANDS.values(), *SECURITY_COMMANDS.values()}
        listed = {command for transport, command, _, _ in rows() if transport == "V1"}
        assert listed == {*ALL_COMMANDS, *SECURITY_COMMANDS}

    def test_every_served_kafka_api_has_an_enforced_row(self) -> None:
        """A Kafka API served without saying what it needs fails here."""
        served = {key.name for key in advertised_versions()}
        enforced = {command for transport, command, _, done in rows()
                    if transport == "Kafka" and done == "yes"}
        assert served <= set(kafka_access.NEEDS)
        assert enforced == served


def test_the_documented_sessions_replay(tmp_path: Path) -> None:
    """The `skerry acls` console session prints what the page shows, then the V1 lines of
    the page answer as shown (as the super user admin)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"admin:{hash_token('tok-admin-1')}\n")
    config = {"auth": {"tokens_file": str(tokens), "super_users": "admin"},
              "topics": {"orders": {"partitions": 1}}, "storage": {"fsync": "never"}}
    text = DOC.read_text()
    managing = _section(text, "### Managing ACLs")
    console = managing.split("```console\n", 1)[1].split("```", 1)[0]
    wire = managing.split("\n```\nV1|", 1)[1].split("```", 1)[0]
    with BrokerProcess(tmp_path, config) as broker:
        env = {**os.environ, "SKERRY_BOOTSTRAP": f"127.0.0.1:{broker.port}",
               "SKERRY_USER": "admin", "SKERRY_TOKEN": "tok-admin-1"}
        commands = re.split(r"^\$ ", console, flags=re.M)[1:]
        assert len(commands) == 6
        for block in commands:
            line, _, expected = block.partition("\n")
            args = line.split()[1:]
            done = subprocess.run([sys.executable, "-m", "broker", *args], env=env,
                                  capture_output=True, cwd=ROOT, timeout=60)
            assert done.returncode == 0, done.stderr
            assert done.stdout.decode() == expected, line
        admin = broker.client()
        assert admin.request("V1|0|AUTH|admin tok-admin-1") == "V1|0|OK"
        admin.request("V1|0|ADMIN_ACL_REMOVE|principal=User:alice")
        admin.request("V1|0|ADMIN_ACL_REMOVE|principal=User:bob")
        for raw in ("V1|" + wire).strip().splitlines():
            request, _, reply = raw.partition("->")
            assert admin.request(request.strip()) == reply.strip(), raw
