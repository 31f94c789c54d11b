"""The Kafka ACL APIs' messages and tables: DescribeAcls (29), CreateAcls (30) and
DeleteAcls (31), v0-v3 (flexible from v2).

Owns: their dataclasses and ``ACL_SCHEMAS`` (merged into ``apis.SCHEMAS``), transcribing
Kafka's message definitions (field names as Kafka's JSON schemas name them).

Must not import: Twisted, sockets, files, the core, the store, ``apis``.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.kafka.codec.framing import RequestHeader
from broker.kafka.codec.requests import ApiKey
from broker.kafka.codec.schema import ApiSchema, Array, Field, Struct

__all__ = [
    "AclFilterSpec", "DescribeAclsRequest", "AclDescription", "DescribedResource",
    "DescribeAclsResponse", "AclCreation", "CreateAclsRequest", "AclCreationResult",
    "CreateAclsResponse", "DeleteAclsRequest", "DeletedAcl", "DeleteAclsFilterResult",
    "DeleteAclsResponse", "ACL_SCHEMAS",
]

F = Field
LITERAL = 3


@dataclass(frozen=True)
class AclFilterSpec:
    resource_type_filter: int
    resource_name_filter: str | None
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int
    pattern_type_filter: int = LITERAL


@dataclass(frozen=True)
class DescribeAclsRequest:
    header: RequestHeader
    resource_type_filter: int
    resource_name_filter: str | None
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int
    pattern_type_filter: int = LITERAL


@dataclass(frozen=True)
class AclDescription:
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class DescribedResource:
    resource_type: int
    resource_name: str
    acls: tuple[AclDescription, ...]
    pattern_type: int = LITERAL


@dataclass(frozen=True)
class DescribeAclsResponse:
    error_code: int
    error_message: str | None = None
    resources: tuple[DescribedResource, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class AclCreation:
    resource_type: int
    resource_name: str
    principal: str
    host: str
    operation: int
    permission_type: int
    resource_pattern_type: int = LITERAL


@dataclass(frozen=True)
class CreateAclsRequest:
    header: RequestHeader
    creations: tuple[AclCreation, ...]


@dataclass(frozen=True)
class AclCreationResult:
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True)
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True)
class DeleteAclsRequest:
    header: RequestHeader
    filters: tuple[AclFilterSpec, ...]


@dataclass(frozen=True)
class DeletedAcl:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    principal: str
    host: str
    operation: int
    permission_type: int
    pattern_type: int = LITERAL


@dataclass(frozen=True)
class DeleteAclsFilterResult:
    error_code: int
    error_message: str | None = None
    matching_acls: tuple[DeletedAcl, ...] = ()


@dataclass(frozen=True)
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...]
    throttle_time_ms: int = 0


def _filter_fields() -> tuple[Field, ...]:
    return (F("resource_type_filter", "int8"),
            F("resource_name_filter", "string", nullable="0+"),
            F("pattern_type_filter", "int8", "1+", default=LITERAL),
            F("principal_filter", "string", nullable="0+"),
            F("host_filter", "string", nullable="0+"),
            F("operation", "int8"),
            F("permission_type", "int8"))


DESCRIBE_ACLS = ApiSchema(
    ApiKey.DESCRIBE_ACLS, "DescribeAcls", "0-3", "2+",
    Struct(DescribeAclsRequest, *_filter_fields()),
    Struct(DescribeAclsResponse,
           F("throttle_time_ms", "int32"),
           F("error_code", "int16"),
           F("error_message", "string", nullable="0+", default=None),
           F("resources", Array(Struct(
               DescribedResource,
               F("resource_type", "int8"),
               F("resource_name", "string"),
               F("pattern_type", "int8", "1+", default=LITERAL),
               F("acls", Array(Struct(
                   AclDescription,
                   F("principal", "string"),
                   F("host", "string"),
                   F("operation", "int8"),
                   F("permission_type", "int8")))))))),
)

CREATE_ACLS = ApiSchema(
    ApiKey.CREATE_ACLS, "CreateAcls", "0-3", "2+",
    Struct(CreateAclsRequest,
           F("creations", Array(Struct(
               AclCreation,
               F("resource_type", "int8"),
               F("resource_name", "string"),
               F("resource_pattern_type", "int8", "1+", default=LITERAL),
               F("principal", "string"),
               F("host", "string"),
               F("operation", "int8"),
               F("permission_type", "int8"))))),
    Struct(CreateAclsResponse,
           F("throttle_time_ms", "int32"),
           F("results", Array(Struct(
               AclCreationResult,
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+", default=None))))),
)

DELETE_ACLS = ApiSchema(
    ApiKey.DELETE_ACLS, "DeleteAcls", "0-3", "2+",
    Struct(DeleteAclsRequest,
           F("filters", Array(Struct(AclFilterSpec, *_filter_fields())))),
    Struct(DeleteAclsResponse,
           F("throttle_time_ms", "int32"),
           F("filter_results", Array(Struct(
               DeleteAclsFilterResult,
               F("error_code", "int16"),
               F("error_message", "string", nullable="0+", default=None),
               F("matching_acls", Array(Struct(
                   DeletedAcl,
                   F("error_code", "int16"),
                   F("error_message", "string", nullable="0+", default=None),
                   F("resource_type", "int8"),
                   F("resource_name", "string"),
                   F("pattern_type", "int8", "1+", default=LITERAL),
                   F("principal", "string"),
                   F("host", "string"),
                   F("operation", "int8"),
                   F("permission_type", "int8")))))))),
)

ACL_SCHEMAS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
