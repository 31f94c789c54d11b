"""Whole requests and responses: ``parse_request`` (a frame -> a request dataclass) and
``encode_response`` (a response dataclass -> a frame), over the tables of ``apis``.

Owns: ``parse_request``, ``encode_response``, ``encode_response_chunks``,
``api_versions_response`` and the header rule of KIP-482: a request in a flexible version
has request header v2 (v1 + tagged fields) and its response header v1 (the correlation id
+ tagged fields); ApiVersions' response header is always v0, so a client that does not
know the broker's versions can read it.

ApiVersions at a version above its table is parsed without reading its body and answered
with error 35 in the v0 layout (kafka-wire-notes §3.1, KIP-511), with the list: the client
retries with the highest version the list offers.

The two hot paths, a Produce request's reading and a Fetch response's writing, go through
``fast`` in their classic versions (the same results, held to it by tests).

Must not import: Twisted, sockets, files, the core, the store.
"""

from __future__ import annotations

from broker.kafka.codec import acls as _l
from broker.kafka.codec import admin as _a
from broker.kafka.codec import requests as _q
from broker.kafka.codec import txn as _t
from broker.kafka.codec.apis import SCHEMAS, SUPPORTED_VERSIONS, schema_for
from broker.kafka.codec.error_codes import ErrorCode
from broker.kafka.codec.fast import FETCH_FAST, PRODUCE_FAST, parse_produce, write_fetch
from broker.kafka.codec.framing import RequestHeader, parse_header
from broker.kafka.codec.primitives import INT32, Malformed, Reader, Writer
from broker.kafka.codec.requests import (
    ApiKey,
    ApiVersionsRequest,
    MalformedRequest,
    UnsupportedRequest,
)
from broker.kafka.codec.responses import LARGE_CHUNK, ApiVersionRange, ApiVersionsResponse, Response
from broker.kafka.codec.schema import read_struct, write_struct

__all__ = ["SUPPORTED_VERSIONS", "Request", "ParseResult", "parse_request",
           "encode_response", "encode_response_chunks", "api_versions_response",
           "LARGE_CHUNK", "is_flexible"]

Request = (
    _q.ProduceRequest | _q.FetchRequest | _q.ListOffsetsRequest | _q.MetadataRequest |
    _q.OffsetCommitRequest | _q.OffsetFetchRequest | _q.FindCoordinatorRequest |
    _q.JoinGroupRequest | _q.HeartbeatRequest | _q.LeaveGroupRequest | _q.SyncGroupRequest |
    _q.DescribeGroupsRequest | _q.ListGroupsRequest | _q.SaslHandshakeRequest |
    _q.ApiVersionsRequest | _q.InitProducerIdRequest | _q.SaslAuthenticateRequest |
    _a.CreateTopicsRequest | _a.DeleteTopicsRequest | _a.CreatePartitionsRequest |
    _a.DescribeConfigsRequest | _a.IncrementalAlterConfigsRequest |
    _a.DescribeClusterRequest | _a.DeleteGroupsRequest | _a.OffsetDeleteRequest |
    _a.DeleteRecordsRequest | _a.DescribeLogDirsRequest | _t.AddPartitionsToTxnRequest |
    _t.AddOffsetsToTxnRequest | _t.EndTxnRequest | _t.TxnOffsetCommitRequest |
    _l.DescribeAclsRequest | _l.CreateAclsRequest | _l.DeleteAclsRequest
)
ParseResult = Request | UnsupportedRequest | MalformedRequest


def is_flexible(api_key: int, version: int) -> bool:
    """Whether ``api_key`` at ``version`` uses the flexible encodings (and headers)."""
    schema = SCHEMAS.get(api_key)
    return schema is not None and schema.is_flexible(version)


def parse_request(frame: bytes) -> ParseResult:
    """One request frame (the bytes after its size prefix, as ``FrameSplitter`` yields
    them) -> a request dataclass, ``UnsupportedRequest`` or ``MalformedRequest``. Never
    raises on bad bytes. Bytes after a complete body are ignored, as Kafka's broker ignores
    them: librdkafka (2.x) sends three after a Metadata v12 request for all topics (the
    rest of the 4-byte slot it reserved for the topic count, written as a 1-byte varint)."""
    r = Reader(frame)
    try:
        header = parse_header(r)
    except Malformed as e:
        return MalformedRequest(None, f"request header: {e}")
    key, version = header.api_key, header.api_version
    schema = SCHEMAS.get(key)
    if schema is None:
        return UnsupportedRequest(header)
    low, high = schema.version_range
    if key == ApiKey.API_VERSIONS and version > high:
        return ApiVersionsRequest(header)
    if not low <= version <= high:
        return UnsupportedRequest(header)
    flexible = schema.is_flexible(version)
    try:
        if flexible:
            r.tagged_fields({}, "request header")
        if key == ApiKey.PRODUCE and version <= PRODUCE_FAST[1]:
            request = parse_produce(header, r)  # the table's walk, unrolled (``fast``)
        else:
            request = read_struct(schema.request, r, version, flexible, header=header)
    except Malformed as e:
        return MalformedRequest(header, f"{ApiKey(key).name} v{version}: {e}")
    if schema.finish is not None:
        request = schema.finish(request)
    return request  # type: ignore[no-any-return]


def api_versions_response(request: ApiVersionsRequest,
                          advertised: dict[int, tuple[int, int]] | None = None
                          ) -> ApiVersionsResponse:
    """§3.1: the ``advertised`` list (the codec's ``SUPPORTED_VERSIONS`` when not given);
    error 0 for a version the codec reads, 35 for a higher one (the client then retries
    with the highest version the list offers for ApiVersions)."""
    table = SUPPORTED_VERSIONS if advertised is None else advertised
    error = ErrorCode.NONE if request.supported else ErrorCode.UNSUPPORTED_VERSION
    return ApiVersionsResponse(int(error), tuple(
        ApiVersionRange(int(key), low, high) for key, (low, high) in table.items()))


def encode_response(header: RequestHeader, response: Response) -> bytes:
    """The whole response frame (size, response header, body) answering the request with
    ``header``, in the layout of its version."""
    return b"".join(_encode(header, response))


def encode_response_chunks(header: RequestHeader, response: Response) -> list[bytes]:
    """``encode_response``'s frame in chunks, ``b"".join`` of which is that frame: every
    byte string of at least ``LARGE_CHUNK`` (a fetch's record sets, megabytes each) as it
    is, the small fields between them joined. A connection sends the chunks with one
    ``sendmsg`` instead of first copying the records into one frame."""
    chunks: list[bytes] = []
    small: list[bytes] = []
    for part in _encode(header, response):
        if len(part) >= LARGE_CHUNK:
            if small:
                chunks.append(b"".join(small))
                small = []
            chunks.append(part)
        else:
            small.append(part)
    if small:
        chunks.append(b"".join(small))
    return chunks


_TAGS_NONE = b"\x00"


def _encode(header: RequestHeader, response: Response) -> list[bytes]:
    try:
        schema = schema_for(response)
    except KeyError:
        raise ValueError(f"{type(response).__name__} is not a response") from None
    key = schema.key
    if header.api_key != key:
        raise ValueError(f"{type(response).__name__} does not answer api key {header.api_key}")
    version = header.api_version
    low, high = schema.version_range
    if key == ApiKey.API_VERSIONS and version > high:
        version = 0  # a version above the table is answered in the v0 layout (§3.1)
    if not low <= version <= high:
        raise ValueError(f"{ApiKey(key).name} v{version} is not a supported version")
    flexible = schema.is_flexible(version)
    w = Writer()
    w.raw(b"")  # the frame head, once the body's size is known: no second copy
    if flexible and key != ApiKey.API_VERSIONS:
        w.raw(_TAGS_NONE)  # response header v1
    if key == ApiKey.FETCH and version <= FETCH_FAST[1]:
        write_fetch(w.parts, response, version)  # type: ignore[arg-type]
    else:
        write_struct(schema.response, w, response, version, flexible)
    parts = w.parts
    parts[0] = b""
    size = sum(map(len, parts)) + 4
    parts[0] = INT32.pack(size) + INT32.pack(header.correlation_id)
    return parts
