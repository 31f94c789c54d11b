"""The V1 line-protocol transport: framing, codec, handlers, wire errors, the Twisted connection."""
