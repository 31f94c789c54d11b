"""TLS for the broker's listeners: loading the certificate and key named in the config and
turning every ``listenTCP`` of the shell into ``listenSSL``.

Owns: ``server_options`` (a Twisted ``CertificateOptions`` from PEM files: TLS 1.2 at least,
Twisted's default cipher list) and ``TLSListener``, a stand-in for the reactor that the shell
hands to every listener (V1, Iggy, metrics) so that none of them needs to know about TLS.

Must not import: the store, groups, replication, the handlers. Needs ``pyOpenSSL`` (a
dependency in pyproject.toml) only when TLS is configured.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TLSConfigError", "server_options", "TLSListener"]


class TLSConfigError(ValueError):
    """The certificate or key cannot be used; the message names the file."""


def server_options(cert_path: str, key_path: str) -> Any:
    """``twisted.internet.ssl.CertificateOptions`` for a server with this certificate
    (PEM, optionally followed by its chain) and private key (PEM)."""
    try:
        from twisted.internet import ssl
    except ImportError as exc:  # pragma: no cover - pyOpenSSL is a dependency
        raise TLSConfigError(f"TLS needs pyOpenSSL: {exc}") from None
    texts: list[bytes] = []
    for what, path in (("tls.cert", cert_path), ("tls.key", key_path)):
        try:
            with open(path, "rb") as handle:
                texts.append(handle.read())
        except OSError as exc:
            raise TLSConfigError(f"{what}: cannot read {path} ({exc.strerror})") from None
    cert_pem, key_pem = texts
    try:
        blocks = [b"-----BEGIN CERTIFICATE-----" + part
                  for part in cert_pem.split(b"-----BEGIN CERTIFICATE-----")[1:]]
        if not blocks:
            raise ValueError("no certificate")
        private = ssl.PrivateCertificate.loadPEM(key_pem + b"\n" + blocks[0])
        chain = [ssl.Certificate.loadPEM(block).original for block in blocks[1:]]
        options = ssl.CertificateOptions(
            privateKey=private.privateKey.original, certificate=private.original,
            extraCertChain=chain or None, raiseMinimumTo=ssl.TLSVersion.TLSv1_2)
        options.getContext()  # checks now that the key matches the certificate
    except Exception as exc:  # noqa: BLE001 - OpenSSL's errors have no common base
        raise TLSConfigError(f"tls.cert/tls.key: cannot use {cert_path} with {key_path}: "
                             f"{type(exc).__name__}") from None
    return options


class TLSListener:
    """Looks like the reactor to a listener, but ``listenTCP`` listens with TLS."""

    def __init__(self, reactor: Any, options: Any) -> None:
        self._reactor = reactor
        self._options = options

    def listenTCP(self, port: int, factory: Any, backlog: int = 50,  # noqa: N802 - Twisted API
                  interface: str = "") -> Any:
        return self._reactor.listenSSL(port, factory, self._options, backlog=backlog,
                                       interface=interface)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reactor, name)
