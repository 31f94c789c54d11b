"""TLS for the broker's listeners and its own connections: loading the certificate and key
named in the config, turning every ``listenTCP`` of the shell into ``listenSSL``, and the
client side that replication and the etcd client use.

Owns: ``server_options`` (a Twisted ``CertificateOptions`` from PEM files: TLS 1.2 at least,
Twisted's default cipher list), ``TLSListener``, a stand-in for the reactor that the shell
hands to every listener (V1, Iggy, metrics) so that none of them needs to know about TLS,
``ClientTLS`` (a CA file, optionally a client certificate and key: the options a connection
to a given host uses, verifying the peer's certificate chains to that CA and names that
host, DNS name or IP address) and ``HttpsPolicy`` (the same for Twisted's HTTP ``Agent``).

Must not import: the store, groups, replication, the handlers. Needs ``pyOpenSSL`` (a
dependency in pyproject.toml) only when TLS is configured.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TLSConfigError", "server_options", "TLSListener", "ClientTLS", "HttpsPolicy"]


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


_PEM_CERT = b"-----BEGIN CERTIFICATE-----"


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise TLSConfigError(f"{what}: cannot read {path} ({exc.strerror})") from None


class ClientTLS:
    """How this broker connects over TLS: the peer's certificate must chain to one of the
    certificates of ``ca_path`` and name the host connected to (a certificate for
    ``10.0.0.2`` needs ``subjectAltName=IP:10.0.0.2``; for a DNS name, ``DNS:<name>``).
    With ``cert_path``/``key_path`` this side presents that certificate (etcd's client
    certificate authentication). Files are read once, here; ``TLSConfigError`` names the
    key whose file is wrong."""

    def __init__(self, ca_path: str, cert_path: str | None = None,
                 key_path: str | None = None, *, what: str = "cluster.tls.ca") -> None:
        from twisted.internet import ssl

        self._ssl = ssl
        text = _read(ca_path, what)
        try:
            blocks = [_PEM_CERT + part for part in text.split(_PEM_CERT)[1:]]
            if not blocks:
                raise ValueError("no certificate")
            cas = [ssl.Certificate.loadPEM(block) for block in blocks]
        except Exception as exc:  # noqa: BLE001 - OpenSSL's errors have no common base
            raise TLSConfigError(f"{what}: {ca_path} holds no usable PEM certificate "
                                 f"({type(exc).__name__})") from None
        self._trust = ssl.trustRootFromCertificates(cas)
        self._client = None
        if (cert_path is None) != (key_path is None):
            raise TLSConfigError(f"{what}: a client certificate needs both cert and key")
        if cert_path is not None and key_path is not None:
            cert_pem, key_pem = _read(cert_path, "cert"), _read(key_path, "key")
            try:
                first = _PEM_CERT + cert_pem.split(_PEM_CERT)[1]
                self._client = ssl.PrivateCertificate.loadPEM(key_pem + b"\n" + first)
            except Exception as exc:  # noqa: BLE001
                raise TLSConfigError(f"cannot use {cert_path} with {key_path}: "
                                     f"{type(exc).__name__}") from None

    def options_for(self, host: str) -> Any:
        """Client connection options for ``host`` (``IOpenSSLClientConnectionCreator``)."""
        return self._ssl.optionsForClientTLS(host, trustRoot=self._trust,
                                             clientCertificate=self._client)


class HttpsPolicy:
    """A Twisted ``IPolicyForHTTPS`` over ``ClientTLS``: ``Agent(reactor,
    contextFactory=HttpsPolicy(tls))`` verifies every ``https://`` server it reaches."""

    def __init__(self, tls: ClientTLS) -> None:
        from twisted.web.iweb import IPolicyForHTTPS
        from zope.interface import directlyProvides

        self._tls = tls
        directlyProvides(self, IPolicyForHTTPS)

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:  # noqa: N802 - Twisted API
        return self._tls.options_for(hostname.decode("ascii"))
