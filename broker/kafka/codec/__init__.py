"""The Kafka codec: frames, requests, responses and MessageSets, as pure bytes <-> frozen
dataclasses. Every API's versions come from one declarative table (``apis``, walked by
``schema``), flexible versions (KIP-482) included.

A package split by job; it re-exports the public names of its modules:

* ``framing``: ``FrameSplitter`` (+ ``FrameTooLarge``), ``RequestHeader``, ``frame_response``;
* ``requests``: ``ApiKey``, one dataclass per request, ``UnsupportedRequest``,
  ``MalformedRequest``;
* ``responses``: one dataclass per response;
* ``apis``: the tables, one ``ApiSchema`` per API, and ``SUPPORTED_VERSIONS`` (what the
  codec reads and writes); ``schema``: the words of the tables and their walker;
* ``admin``: the admin APIs' messages and tables (CreateTopics, DeleteTopics, ...);
* ``consumer``: the KIP-848 consumer-group APIs' messages and tables;
* ``txn``: the transaction APIs' tables (not served: their layout answers 35);
* ``wire``: ``parse_request`` -> request | ``UnsupportedRequest`` | ``MalformedRequest``,
  ``encode_response`` (and ``encode_response_chunks``, the same frame unjoined),
  ``api_versions_response``;
* ``messages``: ``Record``, ``decode_message_set`` (CRCs, compressed wrappers),
  ``encode_message_set``, ``CorruptMessageSet``;
* ``columns``: ``decode_message_columns`` (a produced set as numpy columns: the
  produce path's batch-first decoder, same rules as ``decode_message_set``);
* ``batches``: record batches v2 (magic 2): ``decode_batches``, ``encode_batch``,
  ``RecordBatch``/``BatchRecord``, the header-list encoding, CRC-32C;
* ``compression``: ``Codec``, ``decompress`` and ``compress`` (cramjam's gzip, snappy, LZ4,
  zstd);
* ``error_codes``: ``ErrorCode``, the wire error codes;
* ``primitives``: the ``Reader``/``Writer`` of Kafka's primitive types, compact and
  varint ones included (internal).

Nothing here raises on bad peer bytes except ``decode_message_set`` (``CorruptMessageSet``,
answered per partition); ``ValueError`` from an encoder is a caller bug.

Must not import (nor may any module of the package): Twisted, sockets, files, the core
(``broker.core``), the store (``data``), groups, anything with state.
"""

from __future__ import annotations

from broker.kafka.codec.acls import *  # noqa: F403
from broker.kafka.codec.acls import __all__ as _acls
from broker.kafka.codec.admin import *  # noqa: F403
from broker.kafka.codec.admin import __all__ as _admin
from broker.kafka.codec.batches import *  # noqa: F403
from broker.kafka.codec.batches import __all__ as _batches
from broker.kafka.codec.columns import *  # noqa: F403
from broker.kafka.codec.columns import __all__ as _columns
from broker.kafka.codec.compression import *  # noqa: F403
from broker.kafka.codec.compression import __all__ as _compression
from broker.kafka.codec.consumer import *  # noqa: F403
from broker.kafka.codec.consumer import __all__ as _consumer
from broker.kafka.codec.error_codes import *  # noqa: F403
from broker.kafka.codec.error_codes import __all__ as _error_codes
from broker.kafka.codec.framing import *  # noqa: F403
from broker.kafka.codec.framing import __all__ as _framing
from broker.kafka.codec.messages import *  # noqa: F403
from broker.kafka.codec.messages import __all__ as _messages
from broker.kafka.codec.requests import *  # noqa: F403
from broker.kafka.codec.requests import __all__ as _requests
from broker.kafka.codec.responses import *  # noqa: F403
from broker.kafka.codec.responses import __all__ as _responses
from broker.kafka.codec.txn import *  # noqa: F403
from broker.kafka.codec.txn import __all__ as _txn
from broker.kafka.codec.wire import *  # noqa: F403
from broker.kafka.codec.wire import __all__ as _wire

__all__ = [*_error_codes, *_framing, *_requests, *_responses, *_admin, *_acls, *_consumer,
           *_txn, *_wire, *_messages, *_compression, *_columns, *_batches]
