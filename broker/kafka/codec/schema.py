"""The declarative message tables of the Kafka codec and the generic walker over them.

Owns: ``Field``, ``Array``, ``Struct`` and ``ApiSchema`` (the words of a table), and
``read_struct`` / ``write_struct``, which walk a ``Struct`` at one version. A table says,
once per API, what Kafka's message JSON files say (KIP-482): each field with the versions
that carry it, the versions where it may be null, whether it is a tagged field, and the
default a version without it reads as; the API says from which version it is flexible.
From that one table the walker reads and writes every version:

* classic versions: int16-length strings, int32-length bytes and arrays;
* flexible versions: compact strings, bytes and arrays (uvarint length + 1), and a tagged
  fields section at the end of every struct (unknown tags skipped on read; on write a
  tagged field is written only when it differs from its default).

Field types are the names ``int8 int16 int32 int64 bool string bytes uuid records``, an
``Array`` of one of them or of a ``Struct``, or a ``Struct``. ``records`` is Kafka's
``records`` type: nullable bytes, read as ``b""`` when null; written from bytes as they
are (a fetch's record sets stay their own chunk, never copied).

A ``Struct`` builds one dataclass: the walker passes every field the dataclass takes by
name (a field a version lacks gets its default), so a handler reads one shape whatever the
version. On write it reads the dataclass's attribute of the same name, or the field's
``get(obj, version)`` where the wire value is derived.

Compiled per (struct, version) into a list of closures, cached: no per-field version test
on the hot path.

Must not import: Twisted, sockets, files, the core, the store, the other codec modules
except ``primitives``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from broker.kafka.codec.primitives import INT8, INT16, INT32, INT64, Reader, Writer

__all__ = ["Field", "Array", "Struct", "ApiSchema", "versions", "read_struct",
           "write_struct", "MAX_VERSION"]

MAX_VERSION = 0x7FFF
_MISSING: Any = object()


def versions(spec: str) -> tuple[int, int]:
    """Kafka's version range words: ``"0+"``, ``"3-5"``, ``"2"``, ``"none"`` -> (low, high);
    ``none`` is the empty range (1, 0)."""
    spec = spec.strip()
    if spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        low, high = spec.split("-")
        return (int(low), int(high))
    return (int(spec), int(spec))


@dataclass(frozen=True)
class Array:
    """An array of ``item`` (a type name or a ``Struct``)."""

    item: str | Struct


@dataclass(frozen=True)
class Field:
    """One field of a message: ``name`` is the dataclass attribute it fills."""

    name: str
    type: str | Array | Struct
    versions: str = "0+"
    nullable: str = "none"
    """The versions where the wire value may be null (read as None)."""
    tag: int | None = None
    """Its tag in the flexible versions' tagged fields (None: a positional field)."""
    default: Any = _MISSING
    """The value a version without the field reads as (and, for a tagged field, the value
    not written); by default Kafka's: 0, False, "", (), None for a nullable field."""
    get: Callable[[Any, int], Any] | None = None
    """Write side: the wire value from the object and the version (None: the attribute)."""

    def carried_by(self, version: int) -> bool:
        low, high = versions(self.versions)
        return low <= version <= high

    def nullable_in(self, version: int) -> bool:
        low, high = versions(self.nullable)
        return low <= version <= high

    def default_value(self) -> Any:
        if self.default is not _MISSING:
            return self.default
        if self.nullable != "none":
            return None
        t = self.type
        if isinstance(t, Array):
            return ()
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t in ("bytes", "records"):
            return b""
        if t == "uuid":
            return bytes(16)
        if isinstance(t, Struct):
            return None
        return 0


class Struct:
    """A message or a nested struct: the dataclass it builds and its fields, in wire order."""

    def __init__(self, cls: type, *fields: Field) -> None:
        self.cls = cls
        self.fields = fields
        self._readers: dict[tuple[int, bool], Callable[..., Any]] = {}
        self._writers: dict[tuple[int, bool], Callable[[Writer, Any], None]] = {}

    def __repr__(self) -> str:
        return f"Struct({self.cls.__name__})"


@dataclass(frozen=True)
class ApiSchema:
    """One API's table: the versions the codec speaks, from which one it is flexible,
    and its request and response structs (the request struct's dataclass also takes the
    ``header``)."""

    key: int
    name: str
    versions: str
    flexible: str
    request: Struct
    response: Struct
    finish: Callable[[Any], Any] | None = None
    """A request's last step after the walk, where a version's absent field takes a value
    that depends on another field (JoinGroup v0's rebalance timeout is its session
    timeout)."""

    @property
    def version_range(self) -> tuple[int, int]:
        return versions(self.versions)

    def is_flexible(self, version: int) -> bool:
        low, high = versions(self.flexible)
        return low <= version <= high


# ---------------------------------------------------------------- readers

def _read_records(r: Reader, what: str) -> bytes:
    return r.nullable_bytes(what) or b""


def _read_compact_records(r: Reader, what: str) -> bytes:
    return r.compact_nullable_bytes(what) or b""


def _prim_reader(t: str, flexible: bool, nullable: bool, what: str
                 ) -> Callable[[Reader], Any]:
    if t == "int8":
        return lambda r: r.int8(what)
    if t == "int16":
        return lambda r: r.int16(what)
    if t == "int32":
        return lambda r: r.int32(what)
    if t == "int64":
        return lambda r: r.int64(what)
    if t == "bool":
        return lambda r: r.boolean(what)
    if t == "uuid":
        return lambda r: r.uuid(what)
    if t == "records":
        if flexible:
            return lambda r: _read_compact_records(r, what)
        return lambda r: _read_records(r, what)
    if t == "string":
        if flexible:
            return ((lambda r: r.compact_nullable_string(what)) if nullable
                    else (lambda r: r.compact_string(what)))
        return (lambda r: r.nullable_string(what)) if nullable else (lambda r: r.string(what))
    if t == "bytes":
        if flexible:
            return ((lambda r: r.compact_nullable_bytes(what)) if nullable
                    else (lambda r: r.compact_bytes(what)))
        return (lambda r: r.nullable_bytes(what)) if nullable else (lambda r: r.bytes_(what))
    raise ValueError(f"unknown field type {t!r}")


def _reader(t: str | Array | Struct, version: int, flexible: bool, nullable: bool,
            what: str) -> Callable[[Reader], Any]:
    if isinstance(t, str):
        return _prim_reader(t, flexible, nullable, what)
    if isinstance(t, Struct):
        inner = _struct_reader(t, version, flexible)
        if not nullable:
            return inner

        def nullable_struct(r: Reader) -> Any:  # Kafka: int8 -1 null, 1 present
            return None if r.int8(f"{what} presence") < 0 else inner(r)
        return nullable_struct
    item = _reader(t.item, version, flexible, False, f"{what} item")
    if flexible:
        if nullable:
            return lambda r: r.compact_nullable_array(item, what)
        return lambda r: r.compact_array(item, what)
    if nullable:
        return lambda r: r.nullable_array(item, what)
    return lambda r: r.array(item, what)


def _struct_reader(s: Struct, version: int, flexible: bool) -> Callable[[Reader], Any]:
    key = (version, flexible)
    found = s._readers.get(key)
    if found is not None:
        return found
    plain: list[tuple[str, Callable[[Reader], Any]]] = []
    tagged: dict[int, Callable[[Reader], Any]] = {}
    tag_names: dict[int, str] = {}
    defaults: dict[str, Any] = {}
    carried: set[str] = set()
    for f in s.fields:
        if f.carried_by(version) and (f.tag is None or flexible):
            carried.add(f.name)
            fn = _reader(f.type, version, flexible, f.nullable_in(version), f.name)
            if f.tag is None:
                plain.append((f.name, fn))
            else:
                tagged[f.tag] = fn
                tag_names[f.tag] = f.name
                defaults[f.name] = f.default_value()
    for f in s.fields:
        if f.name not in carried:
            defaults.setdefault(f.name, f.default_value())
    cls = s.cls
    what = cls.__name__

    if flexible:
        def read(r: Reader, extra: dict[str, Any] | None = None) -> Any:
            values = dict(defaults)
            if extra:
                values.update(extra)
            for name, fn in plain:
                values[name] = fn(r)
            for tag, value in r.tagged_fields(tagged, what).items():
                values[tag_names[tag]] = value
            return cls(**values)
    else:
        def read(r: Reader, extra: dict[str, Any] | None = None) -> Any:
            values = dict(defaults)
            if extra:
                values.update(extra)
            for name, fn in plain:
                values[name] = fn(r)
            return cls(**values)
    s._readers[key] = read
    return read


def read_struct(s: Struct, r: Reader, version: int, flexible: bool, **extra: Any) -> Any:
    """``s``'s dataclass read at ``r``'s cursor in ``version`` (raises ``Malformed``);
    ``extra`` are dataclass arguments the wire does not carry (a request's header)."""
    return _struct_reader(s, version, flexible)(r, extra)


# ---------------------------------------------------------------- writers

_NULL16 = INT16.pack(-1)
_NULL32 = INT32.pack(-1)
_ZERO = b"\x00"


def _prim_writer(t: str, flexible: bool, nullable: bool, what: str
                 ) -> Callable[[Writer, Any], None]:
    if t == "int8":
        return lambda w, v: w.parts.append(INT8.pack(v))
    if t == "bool":
        return lambda w, v: w.parts.append(b"\x01" if v else b"\x00")
    if t == "int16":
        return lambda w, v: w.parts.append(INT16.pack(v))
    if t == "int32":
        return lambda w, v: w.parts.append(INT32.pack(v))
    if t == "int64":
        return lambda w, v: w.parts.append(INT64.pack(v))
    if t == "uuid":
        def uuid(w: Writer, v: bytes) -> None:
            if len(v) != 16:
                raise ValueError(f"{what}: a uuid is 16 bytes, not {len(v)}")
            w.parts.append(v)
        return uuid
    if t in ("string", "bytes", "records"):
        is_string = t == "string"
        nullable = nullable or t == "records"

        def write(w: Writer, v: Any) -> None:
            parts = w.parts
            if v is None:
                if not nullable:
                    raise ValueError(f"{what} is null in a version where it may not be")
                parts.append(_ZERO if flexible else (_NULL16 if is_string else _NULL32))
                return
            raw = v.encode("utf-8") if is_string else v
            if flexible:
                w.uvarint(len(raw) + 1)
            else:
                parts.append(INT16.pack(len(raw)) if is_string else INT32.pack(len(raw)))
            parts.append(raw)
        return write
    raise ValueError(f"unknown field type {t!r}")


def _writer(t: str | Array | Struct, version: int, flexible: bool, nullable: bool,
            what: str) -> Callable[[Writer, Any], None]:
    if isinstance(t, str):
        return _prim_writer(t, flexible, nullable, what)
    if isinstance(t, Struct):
        inner = _struct_writer(t, version, flexible)
        if not nullable:
            return inner

        def nullable_struct(w: Writer, v: Any) -> None:
            if v is None:
                w.parts.append(INT8.pack(-1))
            else:
                w.parts.append(INT8.pack(1))
                inner(w, v)
        return nullable_struct
    item = _writer(t.item, version, flexible, False, f"{what} item")

    def array(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise ValueError(f"{what} is null in a version where it may not be")
            w.parts.append(_ZERO if flexible else _NULL32)
            return
        if flexible:
            w.uvarint(len(v) + 1)
        else:
            w.parts.append(INT32.pack(len(v)))
        for x in v:
            item(w, x)
    return array


def _struct_writer(s: Struct, version: int, flexible: bool) -> Callable[[Writer, Any], None]:
    key = (version, flexible)
    found = s._writers.get(key)
    if found is not None:
        return found
    ops: list[tuple[Callable[[Any], Any], Callable[[Writer, Any], None]]] = []
    tagged: list[tuple[int, Callable[[Any], Any], Callable[[Writer, Any], None], Any]] = []
    for f in s.fields:
        if not f.carried_by(version) or (f.tag is not None and not flexible):
            continue
        fn = _writer(f.type, version, flexible, f.nullable_in(version), f.name)
        if f.get is not None:
            derive = f.get
            get: Callable[[Any], Any] = (lambda d: lambda obj: d(obj, version))(derive)
        else:
            get = attrgetter(f.name)
        if f.tag is None:
            ops.append((get, fn))
        else:
            tagged.append((f.tag, get, fn, f.default_value()))
    tagged.sort(key=lambda t: t[0])

    if not flexible:
        def write(w: Writer, obj: Any) -> None:
            for get, fn in ops:
                fn(w, get(obj))
    elif not tagged:
        def write(w: Writer, obj: Any) -> None:
            for get, fn in ops:
                fn(w, get(obj))
            w.parts.append(_ZERO)
    else:
        def write(w: Writer, obj: Any) -> None:
            for get, fn in ops:
                fn(w, get(obj))
            present = []
            for tag, get, fn, default in tagged:
                value = get(obj)
                if value != default:
                    present.append((tag, fn, value))
            w.uvarint(len(present))
            for tag, fn, value in present:
                sub = Writer()
                fn(sub, value)
                body = sub.getvalue()
                w.uvarint(tag)
                w.uvarint(len(body))
                w.parts.append(body)
    s._writers[key] = write
    return write


def write_struct(s: Struct, w: Writer, obj: Any, version: int, flexible: bool) -> None:
    """Append ``obj`` (``s``'s dataclass) to ``w`` in ``version``'s layout; ``ValueError``
    for a value the version cannot carry (a null where it may not be)."""
    _struct_writer(s, version, flexible)(w, obj)

