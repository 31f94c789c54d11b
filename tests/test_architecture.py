"""The layering rules of the layout that a reader cannot see from one file.

- The domain packages (``groups/``, ``replication/``, ``data/``) never import ``broker``:
  they raise their own exceptions and the transports map them. Two kinds of module are
  exempt: ``replication/follower/`` (the Twisted fetch shell, a client of the broker's
  wire) and ``data/spark/`` and ``data/pipelines/`` (clients of the broker).
- The V1 wire table (``broker.v1.errors``) answers every exception a handler can see with
  a code of ``docs/protocol.md``'s error table, and every code of that table has a class.
- The Iggy table (``broker.iggy.errors``) maps the same classes, and so does the TANK
  table (``broker.tank.errors``), to codes the reference TANK client knows.
- The Kafka table (``broker.kafka.errors``) maps the same classes, and the Kafka group
  coordinator's (``groups.kafka_errors``) with a code each.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from tests.support import ROOT

DOMAIN_PACKAGES = ("groups", "replication", "data", "access")
ALLOWED: set[Path] = set()
CLIENT_FOLDERS = (Path("data/spark"), Path("data/pipelines"),  # clients of the broker
                  Path("replication/follower"))  # the Twisted fetch shell

ERROR_MODULES = ("broker.errors", "groups.errors", "replication.errors", "data.errors",
                 "access.errors")


def domain_modules() -> list[Path]:
    """Every module of the domain packages the import rule applies to (relative paths)."""
    out = []
    for package in DOMAIN_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED or any(folder in rel.parents for folder in CLIENT_FOLDERS):
                continue
            out.append(rel)
    return out


def broker_imports(source: str) -> list[str]:
    """``import broker...`` and ``from broker... import`` statements anywhere in ``source``
    (module level, inside functions, under ``if TYPE_CHECKING``), as ``line: text``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name == "broker" or name.startswith("broker."):
                found.append(f"{node.lineno}: {name}")
    return found


class ImportRuleTests:
    def test_the_scan_sees_every_import_form(self) -> None:
        """The checker catches plain, dotted, from- and function-level imports of broker,
        and leaves look-alike names alone."""
        source = (
            "import broker\n"
            "import broker.errors as e\n"
            "from broker.v1 import codec\n"
            "def f():\n"
            "    from broker.errors import NotLeader\n"
            "import brokerage\n"
            "from . import broker\n"
            "from data.broker import x\n"
        )
        assert broker_imports(source) == ["1: broker", "2: broker.errors", "3: broker.v1",
                                          "5: broker.errors"]

    def test_the_rule_covers_the_domain(self) -> None:
        """The scan reads the modules that matter (a moved tree would pass an empty scan)."""
        names = {str(path) for path in domain_modules()}
        for expected in ("groups/coordinator.py", "replication/partition.py",
                         "replication/wire.py", "data/store.py", "data/log.py"):
            assert expected in names

    @pytest.mark.parametrize("path", domain_modules(), ids=str)
    def test_domain_modules_never_import_broker(self, path: Path) -> None:
        """A module of groups/, replication/ or data/ imports nothing of broker."""
        assert broker_imports((ROOT / path).read_text(encoding="utf-8")) == []


def documented_codes() -> dict[str, str]:
    """``docs/protocol.md``'s error table: code -> meaning."""
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = text.split("## Error codes", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([A-Z_]+)` \| (.+?) \|", section, re.M))


def refusal_classes() -> list[type[BaseException]]:
    """Every exception class a handler can see: the classes of the error modules."""
    from broker.errors import SkerryError

    seen: dict[str, type[BaseException]] = {}
    for name in ERROR_MODULES:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, SkerryError):
                seen[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [seen[key] for key in sorted(seen)]


class WireTableTests:
    def test_error_modules_are_found(self) -> None:
        """The class scan finds the domain classes (so the next tests check something)."""
        names = {cls.__name__ for cls in refusal_classes()}
        assert {"NotLeader", "StaleGeneration", "StorageError", "BadRequest"} <= names

    def test_every_class_has_a_documented_v1_code(self) -> None:
        """Each class a handler can see has a row (its own or a parent's) in the V1 table,
        and that row's code is one of docs/protocol.md's."""
        from broker.v1.errors import CODE_BY_ERROR, code_for

        documented = documented_codes()
        for cls in refusal_classes():
            rows = [base for base in cls.__mro__ if base in CODE_BY_ERROR]
            assert rows, f"{cls.__module__}.{cls.__name__} has no row in the V1 table"
            assert code_for(cls("x")) in documented, cls

    def test_v1_codes_are_exactly_the_documented_ones(self) -> None:
        """The table's codes are docs/protocol.md's error table, no more and no fewer, and
        each code maps back (``for_code``) to a class that answers with that code."""
        from broker.v1.errors import CODE_BY_ERROR, code_for, for_code

        documented = documented_codes()
        assert set(CODE_BY_ERROR.values()) == set(documented)
        for code in documented:
            assert code_for(for_code(code)("x")) == code

    def test_unknown_exceptions_are_internal(self) -> None:
        """An exception the table does not know (a bug) answers INTERNAL."""
        from broker.errors import InternalError
        from broker.v1.errors import code_for, for_code

        assert code_for(KeyError("x")) == "INTERNAL"
        assert for_code("NO_SUCH_CODE") is InternalError

    def test_iggy_maps_the_same_classes(self) -> None:
        """Each class the V1 table maps has a row (its own or a parent's) in the Iggy table."""
        from broker.iggy.errors import STATUS_BY_ERROR

        for cls in refusal_classes():
            rows = [base for base in cls.__mro__ if base in STATUS_BY_ERROR]
            assert rows, f"{cls.__module__}.{cls.__name__} has no row in the Iggy table"

    def test_kafka_maps_the_same_classes(self) -> None:
        """Each class the V1 table maps, and each refusal of the Kafka group coordinator,
        has a row (its own or a parent's) in the Kafka table."""
        import groups.kafka_errors as kafka_errors
        from broker.kafka.errors import CODE_BY_ERROR

        group_classes = [cls for _, cls in inspect.getmembers(kafka_errors, inspect.isclass)
                         if issubclass(cls, kafka_errors.KafkaGroupError)]
        assert len(group_classes) > 3
        for cls in [*refusal_classes(), *group_classes]:
            rows = [base for base in cls.__mro__ if base in CODE_BY_ERROR]
            assert rows, f"{cls.__module__}.{cls.__name__} has no row in the Kafka table"

    def test_tank_maps_the_same_classes_to_codes_libtank_knows(self) -> None:
        """Each class has a row (its own or a parent's) in the TANK table, and every code
        there is one the reference client maps (another produce code makes it abort)."""
        from broker.tank.codec import ConsumeFlag, CreateTopicError, ProduceError
        from broker.tank.errors import CODES_BY_ERROR, codes_for

        for cls in refusal_classes():
            rows = [base for base in cls.__mro__ if base in CODES_BY_ERROR]
            assert rows, f"{cls.__module__}.{cls.__name__} has no row in the TANK table"
            codes = codes_for(cls("x"))
            assert codes.produce in ProduceError and codes.produce not in (
                ProduceError.OK, ProduceError.READ_ONLY, ProduceError.UNKNOWN_TOPIC), cls
            assert codes.consume in ConsumeFlag and codes.consume in (
                ConsumeFlag.SYSTEM_ERROR, ConsumeFlag.NO_LEADER), cls
            assert codes.create_topic in CreateTopicError and codes.create_topic, cls


PRODUCT_PACKAGES = ("broker", "groups", "replication", "data")

ONE_PLACE = {
    # a rule spelled as code -> the one module that may spell it
    "[A-Za-z0-9._-]{1,": Path("data/names.py"),
    "0x811c9dc5": Path("data/keys.py"),
    "0x01000193": Path("data/keys.py"),
    "[\\s,|:]": Path("data/plaintext.py"),
    "[\\s,|]": Path("data/plaintext.py"),
}


class OnePlaceTests:
    @pytest.mark.parametrize("spelling", sorted(ONE_PLACE))
    def test_a_rule_is_spelled_in_one_module(self, spelling: str) -> None:
        """The name rule's regex and the key hash's constants appear in code (not prose:
        docstrings and comments are skipped) only in the module that owns them."""
        owner = ONE_PLACE[spelling]
        found = []
        for package in PRODUCT_PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                rel = path.relative_to(ROOT)
                tree = ast.parse(path.read_text(encoding="utf-8"))
                docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                              if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                              and node.body and isinstance(node.body[0], ast.Expr)}
                for node in ast.walk(tree):
                    if id(node) in docstrings:
                        continue
                    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                        text = node.value if isinstance(node.value, str) else node.value.decode(
                            "latin-1")
                        hit = spelling.lower() in text.lower()
                    elif isinstance(node, ast.Constant) and isinstance(node.value, int):
                        hit = spelling.startswith("0x") and node.value == int(spelling, 16)
                    else:
                        continue
                    if hit and rel != owner:
                        found.append(f"{rel}:{node.lineno}")
        assert found == []
