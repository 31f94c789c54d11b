"""The Kafka dispatcher: one request frame -> the handler of its API -> the response frame.

Owns: ``KafkaHandlers``: the explicit table ``{codec.ProduceRequest: data.produce, ...}``
from each request class to its handler (the data APIs of ``handlers.data``, ApiVersions
here, and ``handlers.groups.GROUP_HANDLERS``, which the group half of the transport
fills), the fallback for a request class without a handler (``no_coordinator``: the group
and offset APIs answer COORDINATOR_NOT_AVAILABLE in their own layout), and the handler
boundary: a refusal (``broker.kafka.errors.REFUSALS``) becomes the request's error layout
with its code, anything else is logged with its traceback and answered with -1
(UNKNOWN_SERVER_ERROR); nothing raises out of ``dispatch``.

``dispatch(frame)`` returns the whole response frame, ``None`` when the request gets no
response (Produce with acks = 0), ``CLOSE`` when the connection must be closed without a
reply (an api key the codec has no table for, or a version above its table: there is no
layout to answer in, and that is what Kafka does, kafka-wire-notes §2.2; a malformed
frame), or a ``Deferred`` firing with the frame or ``None`` (a produce
waiting for its acks, a long-poll fetch).

A request the codec reads at a version no handler module serves (``VERSIONS`` tables,
merged by ``advertised_versions``: what ApiVersions advertises) is answered with
UNSUPPORTED_VERSION (35) in its own layout, the connection kept.

A handler is ``handler(ctx, request) -> response | None`` (or a ``Deferred`` of one).

Must not import: Twisted's reactor, sockets, files, the store, the protocol; only
``Deferred`` for waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from broker.errors import Unavailable
from broker.kafka import access
from broker.kafka import codec as c
from broker.kafka.errors import REFUSALS, ErrorCode, code_for
from broker.kafka.handlers import acls, data, metadata, producers
from broker.kafka.handlers.admin import ADMIN_HANDLERS, ADMIN_VERSIONS
from broker.kafka.handlers.context import Context
from broker.kafka.handlers.groups import GROUP_HANDLERS, GROUP_VERSIONS
from broker.transport.boundary import Boundary

__all__ = ["KafkaHandlers", "Handler", "CLOSE", "error_response", "no_coordinator",
           "VERSIONS", "advertised_versions", "CLASSIC_ERA", "modern_data_path"]

log = logging.getLogger("skerry.kafka")

Handler = Callable[[Context, Any], "c.Response | None | Deferred[c.Response | None]"]
"""``handler(ctx, request) -> response`` (``None``: no response), or a Deferred of one; it
refuses the whole request by raising one of ``REFUSALS``."""


class _Close:
    def __repr__(self) -> str:
        return "CLOSE"


CLOSE: Final = _Close()
"""``dispatch``'s answer when the connection must be closed without a reply."""

Reply = bytes | list[bytes] | None | _Close
"""A response frame (a list: a fetch's frame in chunks, ``encode_response_chunks``), none,
or ``CLOSE``."""


def encode(header: c.RequestHeader, response: c.Response) -> bytes | list[bytes]:
    """The frame of ``response``: a fetch's as chunks (its record sets are sent as they
    are, not copied into one frame first), any other's as bytes."""
    if isinstance(response, c.FetchResponse):
        return c.encode_response_chunks(header, response)
    return c.encode_response(header, response)


VERSIONS: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.API_VERSIONS: (0, 3),
    c.ApiKey.SASL_HANDSHAKE: (0, 1),
    c.ApiKey.SASL_AUTHENTICATE: (0, 2),
}
"""The versions the handlers of this module serve."""


CLASSIC_ERA: dict[c.ApiKey, tuple[int, int]] = {
    c.ApiKey.PRODUCE: (0, 7),
    c.ApiKey.FETCH: (0, 6),
    c.ApiKey.LIST_OFFSETS: (0, 4),
    c.ApiKey.METADATA: (0, 3),
    c.ApiKey.JOIN_GROUP: (0, 8),
}
"""The one cap on what is advertised while the idempotent producer is not served (no
InitProducerId, or no record batches v2: ``modern_data_path``). Clients read the
advertised table as a whole and turn idempotence on by default for a broker they take to
be new enough, which needs InitProducerId: kafka-python takes Metadata v4 for a broker of
0.11, JoinGroup v9 for one of 3.2, and Fetch v7 / Produce v8 / ListOffsets v5 for one of
1.1; the Java client does so since 3.0. Below these versions record batches v2 and headers
are still served (Produce v3-7, Fetch v4-6); librdkafka leaves idempotence off and uses
them either way. Every other API is advertised up to what its handler serves."""


def modern_data_path(table: dict[c.ApiKey, tuple[int, int]]) -> bool:
    """Whether ``table`` serves record batches v2 and the idempotent producer: Produce v3+,
    Fetch v4+ and InitProducerId (what clients of Kafka 0.11 and later infer from the
    newer versions of every other API)."""
    return (table.get(c.ApiKey.PRODUCE, (0, 0))[1] >= 3
            and table.get(c.ApiKey.FETCH, (0, 0))[1] >= 4
            and c.ApiKey.INIT_PRODUCER_ID in table)


def advertised_versions(*parts: dict[c.ApiKey, tuple[int, int]]
                        ) -> dict[c.ApiKey, tuple[int, int]]:
    """What ApiVersions advertises and the dispatcher serves: the union of the handler
    modules' ``VERSIONS`` tables (``parts``; by default this package's), each at most the
    codec's range, and capped to ``CLASSIC_ERA`` until ``modern_data_path``."""
    table: dict[c.ApiKey, tuple[int, int]] = {}
    for part in parts or (VERSIONS, metadata.VERSIONS, data.VERSIONS, GROUP_VERSIONS,
                          ADMIN_VERSIONS, producers.VERSIONS, acls.VERSIONS):
        table.update(part)
    if not modern_data_path(table):
        for key, (_low, high) in CLASSIC_ERA.items():
            if key in table:
                table[key] = (table[key][0], min(table[key][1], high))
    for key, (low, high) in table.items():
        codec_low, codec_high = c.SUPPORTED_VERSIONS[key]
        if low < codec_low or high > codec_high:
            raise ValueError(f"{key.name} v{low}-{high} is advertised but the codec reads "
                             f"v{codec_low}-{codec_high}")
    return dict(sorted(table.items()))


def api_versions(ctx: Context, request: c.ApiVersionsRequest) -> c.ApiVersionsResponse:
    """ApiVersions v0-v3: the advertised table in the request's layout; a higher version:
    error 35 with the same table in the v0 layout, so the client retries with the highest
    version the table offers (kafka-wire-notes §1.2, §3.1)."""
    return c.api_versions_response(request, ctx.advertised)


def sasl_handshake(ctx: Context, request: c.SaslHandshakeRequest) -> c.SaslHandshakeResponse:
    """On a listener without ``auth.tokens_file`` nobody logs in: 34 ILLEGAL_SASL_STATE.
    (With it, the connection answers the handshake itself: ``broker.kafka.sasl``.)"""
    return c.SaslHandshakeResponse(int(ErrorCode.ILLEGAL_SASL_STATE), ())


def sasl_authenticate(ctx: Context, request: c.SaslAuthenticateRequest
                      ) -> c.SaslAuthenticateResponse:
    """Outside a SASL exchange (no ``auth.tokens_file``, or already logged in): 34
    ILLEGAL_SASL_STATE, as Kafka answers a SaslAuthenticate out of turn."""
    return c.SaslAuthenticateResponse(int(ErrorCode.ILLEGAL_SASL_STATE),
                                      "no SASL exchange in progress")


class KafkaHandlers:
    """The Kafka handler table over one ``Context``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.boundary: Boundary[Reply] = Boundary(
            "kafka", log, closing=lambda: ctx.core.closing, refusals=REFUSALS,
            refused=self._refused, internal=self._internal)
        """Every exception -> the request's error layout (``broker.transport.boundary``);
        counts the requests per API for ``/metrics``."""
        self.table: dict[type, Handler] = {
            c.ApiVersionsRequest: api_versions,
            c.MetadataRequest: metadata.metadata,
            c.ProduceRequest: data.produce,
            c.FetchRequest: data.fetch,
            c.ListOffsetsRequest: data.list_offsets,
            c.SaslHandshakeRequest: sasl_handshake,
            c.SaslAuthenticateRequest: sasl_authenticate,
            c.InitProducerIdRequest: producers.init_producer_id,
        }
        self.table.update(GROUP_HANDLERS)
        self.table.update(ADMIN_HANDLERS)
        self.table.update(acls.ACL_HANDLERS)
        self.versions = advertised_versions()
        """Api key -> the (min, max) versions served; ApiVersions advertises exactly this."""
        ctx.advertised = self.versions

    def dispatch(self, frame: bytes, client_host: str = "", requester: Any = None
                 ) -> Reply | Deferred[bytes | list[bytes] | None]:
        """The response frame for one request frame (see the module doc); ``client_host``
        is the peer's address, which JoinGroup records for DescribeGroups (as Kafka's
        ``/<ip>``); ``requester`` is the connection (its ``principal``: the SASL user),
        whose ACLs ``broker.kafka.access`` checks."""
        self.ctx.client_host = client_host
        self.ctx.requester = requester
        request = c.parse_request(frame)
        boundary = self.boundary
        if isinstance(request, (c.UnsupportedRequest, c.MalformedRequest)):
            boundary.count("INVALID")
        if isinstance(request, c.UnsupportedRequest):
            h = request.header
            log.info("kafka: client %r sent api key %d version %d, which is not supported; "
                     "closing the connection", h.client_id, h.api_key, h.api_version)
            return CLOSE
        if isinstance(request, c.MalformedRequest):
            log.info("kafka: malformed request (%s); closing the connection", request.reason)
            return CLOSE
        header = request.header
        name = type(request).__name__.removesuffix("Request")
        boundary.count(name)
        served = self.versions.get(c.ApiKey(header.api_key))
        if not isinstance(request, c.ApiVersionsRequest) and (
                served is None or not served[0] <= header.api_version <= served[1]):
            log.info("kafka: client %r sent %s v%d, which is not served; answering "
                     "UNSUPPORTED_VERSION", header.client_id, type(request).__name__,
                     header.api_version)
            return self._encode(request, error_response(request, ErrorCode.UNSUPPORTED_VERSION))
        if boundary.shutting_down() and not isinstance(request, c.ApiVersionsRequest):
            return self._refused(request, Unavailable("broker is shutting down"))
        try:
            response = self.respond(request, requester)
        except REFUSALS as error:
            log.debug("kafka: %s refused: %s", name, error)
            return boundary.refusal(request, error)
        except Exception as error:
            return boundary.fault(name, request, error)
        if isinstance(response, Deferred):
            return response.addCallbacks(
                lambda r: None if r is None else encode(header, r),
                self._failed, errbackArgs=(request,))
        if response is None:
            return None
        return encode(header, response)

    def respond(self, request: Any, requester: Any = None) -> Any:
        """The response to one parsed request (or a Deferred of it): its handler's, on the
        part of the request ``requester`` may touch (``broker.kafka.access.screen``), with
        the refused part's error entries added. Raises what the handler raises."""
        handler = self.table.get(type(request))
        if handler is None:
            handler = no_coordinator
        self.ctx.requester = requester
        run, refused = access.screen(self.ctx, requester, request, error_response)
        response = refused if run is None else handler(self.ctx, run)
        if run is not None and self.ctx.core.access.enabled:
            response = self._finish(requester, request, response, refused)
        return response

    def _finish(self, requester: Any, request: Any, response: Any, refused: Any) -> Any:
        """The handler's answer with the screened-out entries added, or filtered."""
        def done(r: Any) -> Any:
            return access.finish(self.ctx, requester, request, access.merge(r, refused))
        if isinstance(response, Deferred):
            return response.addCallback(done)
        return done(response)

    def _encode(self, request: Any, response: c.Response | None) -> Reply:
        if response is None:
            return None
        return c.encode_response(request.header, response)

    def _failed(self, failure: Failure, request: Any) -> bytes | None:
        return self.boundary.failed(  # type: ignore[return-value]
            type(request).__name__.removesuffix("Request"), request, failure.value,
            failure.getTraceback())

    def _refused(self, request: Any, error: BaseException) -> Reply:
        """A refusal in the request's error layout (``code_for``)."""
        return self._encode(request, error_response(request, code_for(error)))

    def _internal(self, request: Any, error: BaseException) -> Reply:
        """A bug: -1 (UNKNOWN_SERVER_ERROR) in the request's error layout."""
        return self._encode(request, error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR))


def no_coordinator(ctx: Context, request: Any) -> c.Response | None:
    """A request without a handler (the group and offset APIs until the group service is
    wired in): COORDINATOR_NOT_AVAILABLE (15) in its own layout."""
    return error_response(request, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def error_response(request: Any, code: int) -> c.Response | None:
    """``request`` answered with ``code`` everywhere its layout has an error code (every
    partition of a partitioned request). ``None`` for a Produce with acks = 0."""
    code = int(code)
    if isinstance(request, c.ProduceRequest):
        if request.acks == 0:
            return None
        return c.ProduceResponse(tuple(
            c.ProduceTopicResponse(t.name, tuple(
                c.ProducePartitionResponse(p.index, code, -1) for p in t.partitions))
            for t in request.topics))
    if isinstance(request, c.FetchRequest):
        return c.FetchResponse(tuple(
            c.FetchTopicResponse(t.topic, tuple(
                c.FetchPartitionResponse(p.partition, code, -1) for p in t.partitions))
            for t in request.topics))
    if isinstance(request, c.ListOffsetsRequest):
        return c.ListOffsetsResponse(tuple(
            c.ListOffsetsTopicResponse(t.name, tuple(
                c.ListOffsetsPartitionResponse(p.partition_index, code) for p in t.partitions))
            for t in request.topics))
    if isinstance(request, c.MetadataRequest):
        return c.MetadataResponse((), tuple(
            c.MetadataTopic(code, name, ()) for name in request.topics or ()))
    if isinstance(request, c.OffsetCommitRequest):
        return c.OffsetCommitResponse(tuple(
            c.OffsetCommitTopicResponse(t.name, tuple(
                c.OffsetCommitPartitionResponse(p.partition_index, code) for p in t.partitions))
            for t in request.topics))
    if isinstance(request, c.OffsetFetchRequest):
        return c.OffsetFetchResponse(tuple(
            c.OffsetFetchTopicResponse(t.name, tuple(
                c.OffsetFetchPartitionResponse(p, -1, "", code) for p in t.partition_indexes))
            for t in request.topics or ()), error_code=code, groups=tuple(
            c.OffsetFetchGroupResponse(g.group_id, (), code) for g in request.groups))
    if isinstance(request, c.FindCoordinatorRequest):
        return c.FindCoordinatorResponse(code, -1, "", -1, coordinators=tuple(
            c.Coordinator(key, -1, "", -1, code) for key in request.coordinator_keys))
    if isinstance(request, c.JoinGroupRequest):
        return c.JoinGroupResponse(code, -1, "", "", "")
    if isinstance(request, c.SyncGroupRequest):
        return c.SyncGroupResponse(code)
    if isinstance(request, c.HeartbeatRequest):
        return c.HeartbeatResponse(code)
    if isinstance(request, c.LeaveGroupRequest):
        return c.LeaveGroupResponse(code)
    if isinstance(request, c.DescribeGroupsRequest):
        return c.DescribeGroupsResponse(tuple(
            c.DescribedGroup(code, g, "", "", "") for g in request.groups))
    if isinstance(request, c.ListGroupsRequest):
        return c.ListGroupsResponse(code)
    if isinstance(request, c.ApiVersionsRequest):
        return c.ApiVersionsResponse(code, ())
    if isinstance(request, c.InitProducerIdRequest):
        return c.InitProducerIdResponse(code)
    if isinstance(request, c.SaslHandshakeRequest):
        return c.SaslHandshakeResponse(code, ())
    if isinstance(request, c.SaslAuthenticateRequest):
        return c.SaslAuthenticateResponse(code)
    return _admin_error(request, code)


def _admin_error(request: Any, code: int) -> c.Response:
    """The admin APIs' error layouts: ``code`` on every topic, resource or group named."""
    if isinstance(request, c.CreateTopicsRequest):
        return c.CreateTopicsResponse(tuple(c.CreatedTopic(t.name, code)
                                            for t in request.topics))
    if isinstance(request, c.DeleteTopicsRequest):
        names = [t.name for t in request.topics] or list(request.topic_names)
        return c.DeleteTopicsResponse(tuple(c.DeletedTopic(n or "", code) for n in names))
    if isinstance(request, c.CreatePartitionsRequest):
        return c.CreatePartitionsResponse(tuple(c.PartitionsResult(t.name, code)
                                                for t in request.topics))
    if isinstance(request, c.DescribeConfigsRequest):
        return c.DescribeConfigsResponse(tuple(
            c.ConfigResult(code, None, r.resource_type, r.resource_name)
            for r in request.resources))
    if isinstance(request, c.IncrementalAlterConfigsRequest):
        return c.IncrementalAlterConfigsResponse(tuple(
            c.AlterResult(code, None, r.resource_type, r.resource_name)
            for r in request.resources))
    if isinstance(request, c.DescribeClusterRequest):
        return c.DescribeClusterResponse(code, "", -1, ())
    if isinstance(request, c.DeleteGroupsRequest):
        return c.DeleteGroupsResponse(tuple(c.DeletedGroup(g, code)
                                            for g in request.groups_names))
    if isinstance(request, c.OffsetDeleteRequest):
        return c.OffsetDeleteResponse(code)
    if isinstance(request, c.DeleteRecordsRequest):
        return c.DeleteRecordsResponse(tuple(
            c.DeleteRecordsTopicResult(t.name, tuple(
                c.DeleteRecordsPartitionResult(p.partition_index, -1, code)
                for p in t.partitions)) for t in request.topics))
    if isinstance(request, c.DescribeLogDirsRequest):
        return c.DescribeLogDirsResponse((), code)
    if isinstance(request, c.AddPartitionsToTxnRequest):
        return c.AddPartitionsToTxnResponse(tuple(
            c.TxnTopicResult(t.name, tuple(c.TxnPartitionResult(p, code) for p in t.partitions))
            for t in request.topics))
    if isinstance(request, c.AddOffsetsToTxnRequest):
        return c.AddOffsetsToTxnResponse(code)
    if isinstance(request, c.EndTxnRequest):
        return c.EndTxnResponse(code)
    if isinstance(request, c.TxnOffsetCommitRequest):
        return c.TxnOffsetCommitResponse(tuple(
            c.TxnOffsetCommitTopicResult(t.name, tuple(
                c.TxnOffsetCommitPartitionResult(p.partition_index, code)
                for p in t.partitions)) for t in request.topics))
    if isinstance(request, c.DescribeAclsRequest):
        return c.DescribeAclsResponse(code)
    if isinstance(request, c.CreateAclsRequest):
        return c.CreateAclsResponse(tuple(c.AclCreationResult(code) for _ in request.creations))
    if isinstance(request, c.DeleteAclsRequest):
        return c.DeleteAclsResponse(tuple(c.DeleteAclsFilterResult(code)
                                          for _ in request.filters))
    raise TypeError(f"no error layout for {type(request).__name__}")
