"""The Iggy binary codec: every request of the seed's code list and every reply, as bytes.

A package split by job. Owns: nothing of its own; it re-exports the public names of its
modules, so ``from broker.iggy import codec`` and ``codec.PollMessages`` keep working:

* ``status``: the status codes (``Status``) and the refusal carrying one (``IggyError``);
* ``framing``: the request and reply heads, ``frame_ok`` and ``frame_error``;
* ``primitives``: integers, names, ``Identifier``, ``Consumer``, the enums, the ``Reader``;
* ``permissions``: the ``Permissions`` blob;
* ``commands``: the request codes and one frozen dataclass per request;
* ``requests``: ``decode_request`` (bytes -> command) and ``encode_request``;
* ``messages``: the SendMessages message area (``check_messages``, ``split_messages``);
* ``replies``: one record and one encoder per reply shape.

Framing, little-endian throughout::

    request: u32 length (= 4 + N), u32 code, N bytes of payload
    reply:   u32 status, u32 length (= N), N bytes of payload  (status != 0: N = 0)

A malformed payload raises ``IggyError`` with the status that answers it; nothing in the
codec raises anything else on bad input.

Must not import (nor may any module of the package): Twisted, sockets, files, the core,
anything with state, ``broker.errors`` (which Skerry error answers as which status is
``broker.iggy.errors``').
"""

from __future__ import annotations

from broker.iggy.codec.commands import *  # noqa: F403
from broker.iggy.codec.commands import __all__ as _commands
from broker.iggy.codec.framing import *  # noqa: F403
from broker.iggy.codec.framing import __all__ as _framing
from broker.iggy.codec.messages import *  # noqa: F403
from broker.iggy.codec.messages import __all__ as _messages
from broker.iggy.codec.permissions import *  # noqa: F403
from broker.iggy.codec.permissions import __all__ as _permissions
from broker.iggy.codec.primitives import *  # noqa: F403
from broker.iggy.codec.primitives import __all__ as _primitives
from broker.iggy.codec.replies import *  # noqa: F403
from broker.iggy.codec.replies import __all__ as _replies
from broker.iggy.codec.requests import *  # noqa: F403
from broker.iggy.codec.requests import __all__ as _requests
from broker.iggy.codec.status import *  # noqa: F403
from broker.iggy.codec.status import __all__ as _status

__all__ = [*_status, *_framing, *_primitives, *_permissions, *_commands, *_requests,
           *_messages, *_replies]
