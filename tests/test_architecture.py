"""The layering rules of the layout that a reader cannot see from one file.

- The domain packages (``groups/``, ``replication/``, ``data/``) never import ``broker``:
  they raise their own exceptions and the transports map them. Only ``data/spark/`` and
  ``data/pipelines/`` are exempt (clients of the broker that live under ``data/``); the
  fetch loop ``replication/follower/`` is not: it codes against a port the broker fills.
- The V1 wire table (``broker.v1.errors``) answers every exception a handler can see with
  a code of ``docs/protocol.md``'s error table, and every code of that table has a class.
- The Iggy table (``broker.iggy.errors``) maps the same classes, and so does the TANK
  table (``broker.tank.errors``), to codes the reference TANK client knows.
- The Kafka table (``broker.kafka.errors``) maps the same classes, and the Kafka group
  coordinator's (``groups.kafka_errors``) with a code each.
- The reply slot (``broker.transport.slots``) is indexed by its positions' names, never by
  a bare number.
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
CLIENT_FOLDERS = (Path("data/spark"), Path("data/pipelines"))  # clients of the broker

ERROR_MODULES = ("broker.errors", "groups.errors", "replication.errors", "data.errors",
                 "access.errors")


def domain_modules(root: Path = ROOT) -> list[Path]:
    """Every module of the domain packages the import rule applies to (relative paths)."""
    out = []
    for package in DOMAIN_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
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

    def test_the_rule_fails_on_a_planted_import(self, tmp_path: Path) -> None:
        """A fetch-loop module importing the broker's errors is found (the follower is no
        exception any more); the broker's clients under data/spark and data/pipelines are
        the only exempt modules."""
        files = {
            "replication/follower/fetcher.py": "from broker.errors import NotLeader\n",
            "replication/epochs.py": "from replication.errors import NotLeader\n",
            "groups/x.py": "def f():\n    import broker.client.codec\n",
            "data/spark/source.py": "from broker.client.sync import Client\n",
            "data/pipelines/run.py": "from broker.client import sync\n",
        }
        for rel, text in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        found = {str(rel): broker_imports((tmp_path / rel).read_text(encoding="utf-8"))
                 for rel in domain_modules(tmp_path)}
        assert found == {
            "groups/x.py": ["2: broker.client.codec"],
            "replication/epochs.py": [],
            "replication/follower/fetcher.py": ["1: broker.errors"],
        }

    def test_the_follower_is_under_the_rule(self) -> None:
        """The fetch loop's modules are scanned like the rest of the domain."""
        names = {str(path) for path in domain_modules()}
        assert {"replication/follower/fetcher.py", "replication/follower/probe.py",
                "replication/follower/manager.py", "replication/follower/links.py"} <= names

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


# ---------------------------------------------------------------------------- layering rules
# Each checker reads a tree (the repository, or a synthetic one in a test) and returns the
# violations as "path:line: what" strings, so that a planted violation shows it can fail.

TRANSPORTS = ("v1", "iggy", "kafka", "tank")
"""The transport packages under ``broker/``; the shared kit (``broker/transport/``) is none."""


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """Every module ``source`` (the module ``module``, dotted) imports, as (line, dotted
    name): plain, from-, relative (resolved against ``module``) and function-level imports;
    for ``from p import name`` both ``p`` and ``p.name`` (``name`` may be a module)."""
    package = module.rsplit(".", 1)[0] if "." in module else ""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def python_modules(root: Path, folder: str) -> list[tuple[Path, str]]:
    """(relative path, dotted module name) of every module under ``root/folder``."""
    out = []
    for path in sorted((root / folder).rglob("*.py")):
        rel = path.relative_to(root)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((rel, ".".join(parts)))
    return out


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def transport_cross_imports(root: Path) -> list[str]:
    """Imports of one transport (``broker/<t>/``) by another."""
    found = []
    for transport in TRANSPORTS:
        for rel, module in python_modules(root, f"broker/{transport}"):
            source = (root / rel).read_text(encoding="utf-8")
            for line, name in imported_modules(source, module):
                for other in TRANSPORTS:
                    if other != transport and _under(name, f"broker.{other}"):
                        found.append(f"{rel}:{line}: imports {name}")
    return sorted(set(found))


def service_codec_imports(root: Path) -> list[str]:
    """Imports of a transport's codec (``broker/<t>/codec``) by a service
    (``broker/services/``): services keep meaning, codecs keep bytes."""
    found = []
    for rel, module in python_modules(root, "broker/services"):
        source = (root / rel).read_text(encoding="utf-8")
        for line, name in imported_modules(source, module):
            if any(_under(name, f"broker.{t}.codec") for t in TRANSPORTS):
                found.append(f"{rel}:{line}: imports {name}")
    return sorted(set(found))


def string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of the string constants of code (docstrings skipped), f-string parts
    included."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


RESERVED_PREFIX_OWNER = Path("data/names.py")
"""The one module that spells the reserved name prefixes."""


def reserved_prefixes(root: Path) -> dict[str, str]:
    """The reserved name prefixes as their owner defines them: NAME -> value of every
    module-level ``*_PREFIX = "..."`` of ``data/names.py``."""
    tree = ast.parse((root / RESERVED_PREFIX_OWNER).read_text(encoding="utf-8"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.endswith("_PREFIX"):
                    out[target.id] = node.value.value
    return out


def prefix_spellings(root: Path, packages: tuple[str, ...]) -> list[str]:
    """String constants outside ``data/names.py`` that begin with a reserved prefix: a
    name built from the prefix by hand, or the prefix spelled again. Prose that mentions
    one mid-sentence (a help text, a message) is not a spelling."""
    prefixes = reserved_prefixes(root)
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == RESERVED_PREFIX_OWNER:
                continue
            for line, text in string_constants(ast.parse(path.read_text(encoding="utf-8"))):
                for name, prefix in prefixes.items():
                    if text.startswith(prefix):
                        found.append(f"{rel}:{line}: {text!r} spells {name}")
    return sorted(found)


MAX_MODULE_LINES = 800
MAX_CLASS_METHODS = 35
SIZE_SCOPE = ("broker", "groups", "replication", "data", "access", "bench")
"""The product packages and the benches; ``tests/`` mirrors them and is not measured."""
# Generated tables: none is over the limits today; list one here with its generator.
SIZE_ALLOWED: set[Path] = set()


def class_method_counts(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line, class name, methods defined in its body) of every class of ``tree``."""
    return [(node.lineno, node.name,
             sum(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for item in node.body))
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def size_offenders(root: Path, packages: tuple[str, ...], allowed: set[Path]) -> list[str]:
    """Modules over ``MAX_MODULE_LINES`` lines and classes over ``MAX_CLASS_METHODS``
    methods (counted in the class body: a part split into its own class counts there)."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel in allowed:
                continue
            source = path.read_text(encoding="utf-8")
            lines = len(source.splitlines())
            if lines > MAX_MODULE_LINES:
                found.append(f"{rel}: {lines} lines")
            for line, name, methods in class_method_counts(ast.parse(source)):
                if methods > MAX_CLASS_METHODS:
                    found.append(f"{rel}:{line}: class {name} has {methods} methods")
    return found


DOMAIN_ERROR_MODULES = ("groups.errors", "groups.kafka_errors", "groups.consumer_errors",
                        "replication.errors", "replication.control.errors", "data.errors",
                        "access.errors")


OTHER_ROOTS = {
    "data.errors.DataDirError": "the data directory cannot be used at startup: the process "
                                "stops with it, no request is ever answered with it",
}
"""Domain exception roots that are not refusals, each with the reason."""


def non_refusal_errors(modules: list[str], roots: tuple[type[BaseException], ...]) -> list[str]:
    """Exception classes defined in ``modules`` that derive from none of ``roots``."""
    found = []
    for name in modules:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException) \
                    and not issubclass(cls, roots):
                found.append(f"{name}.{cls.__qualname__}")
    return found


def error_roots() -> tuple[type[BaseException], ...]:
    """``SkerryError`` and the listed other roots."""
    from data.refusal import SkerryError

    others = []
    for dotted in OTHER_ROOTS:
        module, _, name = dotted.rpartition(".")
        others.append(getattr(importlib.import_module(module), name))
    return (SkerryError, *others)


SLOT_NAMES = {"slot", "entry", "token", "last_slot"}
"""What the modules of the reply slot call one (``broker.transport.slots``)."""


def bare_slot_indexes(root: Path) -> list[str]:
    """In every ``broker/`` module that imports ``broker.transport.slots``: a slot indexed
    by a bare number (``slot[0]``, ``pending[0][0]``) instead of a position's name."""
    found = []
    for rel, _module in python_modules(root, "broker"):
        source = (root / rel).read_text(encoding="utf-8")
        if "broker.transport.slots" not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, int)):
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in SLOT_NAMES \
                    or isinstance(value, ast.Subscript):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


class LayeringRuleTests:
    def test_transports_never_import_each_other(self) -> None:
        """No module of broker/v1, iggy, kafka or tank imports another of them."""
        assert transport_cross_imports(ROOT) == []

    def test_the_transport_rule_fails_on_a_planted_import(self, tmp_path: Path) -> None:
        """A Kafka module importing V1's errors (absolute, relative or inside a function) is
        found; its own package and the shared kit are not."""
        root = _write(tmp_path, {
            "broker/kafka/handlers/x.py": "from broker.kafka.errors import A\n"
                                          "from broker.transport import kit\n"
                                          "def f():\n    import broker.v1.errors\n",
            "broker/kafka/y.py": "from ..v1 import codec\n",
            "broker/v1/z.py": "from broker.v1 import replies\n",
            "broker/iggy/__init__.py": "", "broker/tank/__init__.py": "",
        })
        assert transport_cross_imports(root) == [
            "broker/kafka/handlers/x.py:4: imports broker.v1.errors",
            "broker/kafka/y.py:1: imports broker.v1",
            "broker/kafka/y.py:1: imports broker.v1.codec",
        ]

    def test_services_never_import_codecs(self) -> None:
        """No module of broker/services imports a transport's codec."""
        assert service_codec_imports(ROOT) == []

    def test_the_codec_rule_fails_on_a_planted_import(self, tmp_path: Path) -> None:
        """A service importing a codec module, or a name from a codec package, is found."""
        root = _write(tmp_path, {
            "broker/services/users.py": "from broker.iggy.codec.permissions import P\n"
                                        "from broker.iggy import codec\n"
                                        "from broker.iggy.errors import IggyError\n",
            "broker/services/ok.py": "from access.iggy_permissions import Permissions\n",
        })
        assert service_codec_imports(root) == [
            "broker/services/users.py:1: imports broker.iggy.codec.permissions",
            "broker/services/users.py:1: imports broker.iggy.codec.permissions.P",
            "broker/services/users.py:2: imports broker.iggy.codec",
        ]

    def test_domain_errors_derive_from_the_refusal_root(self) -> None:
        """Every exception class of the domain's error modules is a ``SkerryError`` (or
        derives from a listed root that is no refusal), so one ``except`` at a handler
        boundary tells a refusal from a bug."""
        assert non_refusal_errors(list(DOMAIN_ERROR_MODULES), error_roots()) == []

    def test_the_error_rule_fails_on_a_planted_class(self, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """A domain error module with a plain ``Exception`` subclass is reported; classes
        it imports from elsewhere are not its own."""
        from data.refusal import SkerryError

        _write(tmp_path, {"planted_domain/__init__.py": "",
                          "planted_domain/errors.py":
                              "from data.refusal import SkerryError\n"
                              "from json import JSONDecodeError\n"
                              "class Good(SkerryError): pass\n"
                              "class Bad(Exception): pass\n"})
        monkeypatch.syspath_prepend(str(tmp_path))
        assert non_refusal_errors(["planted_domain.errors"], (SkerryError,)) == [
            "planted_domain.errors.Bad"]

    def test_each_reserved_prefix_is_spelled_once(self) -> None:
        """The reserved prefixes (``__skerry_``, ``__iggy.``, ``iggy.consumer.``) appear as
        the start of a string only in data/names.py; everyone else imports them."""
        assert set(reserved_prefixes(ROOT).values()) >= {"__skerry_", "__iggy.",
                                                         "iggy.consumer."}
        assert prefix_spellings(ROOT, PRODUCT_PACKAGES + ("access",)) == []

    def test_the_prefix_rule_fails_on_a_planted_spelling(self, tmp_path: Path) -> None:
        """A prefix spelled again, or a reserved name written out, is found (f-strings
        too); prose mentioning it mid-sentence and docstrings are not."""
        root = _write(tmp_path, {
            "data/names.py": 'IGGY_STORE_PREFIX = "__iggy."\nINTERNAL_PREFIX = "__skerry_"\n',
            "broker/a.py": '"""Topics named __iggy.<n>."""\nP = ("__iggy.",)\n'
                           'T = f"__skerry_groups{1}"\nHELP = "shows __iggy.* topics"\n',
        })
        assert prefix_spellings(root, ("broker", "data")) == [
            "broker/a.py:2: '__iggy.' spells IGGY_STORE_PREFIX",
            "broker/a.py:3: '__skerry_groups' spells INTERNAL_PREFIX",
        ]


class SizeRuleTests:
    def test_no_module_or_class_is_over_the_limits(self) -> None:
        """No module over 800 lines and no class over 35 methods in the product packages
        and benches, but the short allow-list (generated tables, and modules being
        rewritten right now by another branch)."""
        assert size_offenders(ROOT, SIZE_SCOPE, SIZE_ALLOWED) == []

    def test_the_allow_list_is_not_stale(self) -> None:
        """Every allowed module exists (a moved or deleted one leaves the list)."""
        assert [str(path) for path in sorted(SIZE_ALLOWED) if not (ROOT / path).exists()] == []

    def test_the_size_rule_fails_on_planted_offenders(self, tmp_path: Path) -> None:
        """An 801-line module and a 36-method class are found (nested functions and
        methods of inner classes count for their own class); 800 lines, 35 methods and an
        allowed module pass."""
        methods = "".join(f"    def m{i}(self):\n        pass\n" for i in range(36))
        root = _write(tmp_path, {
            "pkg/long.py": "x = 1\n" * 801,
            "pkg/edge.py": "x = 1\n" * 800,
            "pkg/big.py": "class Big:\n" + methods,
            "pkg/ok.py": "class Ok:\n" + "".join(f"    def m{i}(self):\n        def inner(): pass\n"
                                                 for i in range(35)),
            "pkg/allowed.py": "x = 1\n" * 900,
        })
        assert size_offenders(root, ("pkg",), {Path("pkg/allowed.py")}) == [
            "pkg/big.py:1: class Big has 36 methods",
            "pkg/long.py: 801 lines",
        ]


class SlotRuleTests:
    def test_no_slot_is_indexed_by_a_bare_number(self) -> None:
        """Every place of a reply slot is read and written by its name (REPLY, CID, T0,
        WEIGHT, CMD), in every module that uses the record."""
        assert bare_slot_indexes(ROOT) == []

    def test_the_slot_rule_fails_on_planted_indexes(self, tmp_path: Path) -> None:
        """``slot[0]`` and ``pending[0][0]`` are found in a module of the slot; named
        positions, other names and modules that do not use the slot pass."""
        root = _write(tmp_path, {
            "broker/v1/p.py": "from broker.transport.slots import REPLY\n"
                              "slot[0] = b''\nx = pending[0][0]\n"
                              "slot[REPLY] = b''\ny = pending[0][REPLY]\nz = tokens[1]\n",
            "broker/v1/other.py": "slot[0] = b''\n",
        })
        assert bare_slot_indexes(root) == ["broker/v1/p.py:2: slot[0]",
                                           "broker/v1/p.py:3: pending[0][0]"]
