"""The TANK server codec: bytes in, frozen dataclasses out, and back (spec/tank-notes.md).

A sans-I/O package split by job; it re-exports its modules' public names:

* ``primitives``: ``CodecError``, the little-endian ``Reader``, varints, ``str8``;
* ``framing``: ``MsgId``, ``Frame``, ``FrameSplitter`` (any chunk size, bounded frames ->
  ``FrameTooLarge``), ``encode_frame``, ``PING_FRAME``;
* ``requests``: one dataclass per request and ``parse_request``;
* ``replies``: the wire codes, one dataclass per reply and ``encode_reply``;
* ``bundles``: ``decode_bundle``/``encode_bundle`` (varint counts, sparse, snappy);
* ``stored``: bundles <-> stored records in bulk (``bundle_to_records``,
  ``records_to_bundles``, ``chunk_within``): the transport's hot paths.

Malformed input gives ``CodecError`` (``BundleError`` for bundles) and nothing else.

Must not import (nor may any module of the package): Twisted, sockets, files,
``broker.core``, the store, ``broker.errors``, ``broker.tank.client`` (the independent
client codec the tests check this one against).
"""

from __future__ import annotations

from broker.tank.codec.bundles import *  # noqa: F403
from broker.tank.codec.bundles import __all__ as _bundles
from broker.tank.codec.framing import *  # noqa: F403
from broker.tank.codec.framing import __all__ as _framing
from broker.tank.codec.primitives import *  # noqa: F403
from broker.tank.codec.primitives import __all__ as _primitives
from broker.tank.codec.replies import *  # noqa: F403
from broker.tank.codec.replies import __all__ as _replies
from broker.tank.codec.requests import *  # noqa: F403
from broker.tank.codec.requests import __all__ as _requests
from broker.tank.codec.stored import *  # noqa: F403
from broker.tank.codec.stored import __all__ as _stored

__all__ = [*_primitives, *_framing, *_bundles, *_requests, *_replies, *_stored]
