"""The C reference client (``bench/refclient.c``) counts whole replies and refuses errors.

It runs against the C canned-reply responder and against a tiny in-test server on a
loopback port, for well under a second each (both bound themselves in time).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.loadgen import make_value, resp_xadd_request, v1_produce_request
from bench.servers import ServerError, run_refclient, start_responder


@pytest.fixture
def error_server() -> Iterator[int]:
    """Answers every request line with a V1 error reply."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            while data := conn.recv(65536):
                conn.sendall(b"V1|1|ERR|BAD_REQUEST|no\n" * data.count(b"\n"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    listener.close()
    thread.join(5)


@pytest.mark.parametrize("protocol", ["v1", "resp"])
def test_counts_request_response_rounds_against_the_responder(tmp_path: Path,
                                                               protocol: str) -> None:
    """Against the canned-reply responder the client completes many rounds in half a second
    and reports a rate equal to rounds / window (RESP replies are two lines each)."""
    server = start_responder(tmp_path, protocol, "produce", batch=1000, value_size=100)
    value = make_value(100)
    request = (v1_produce_request("1", "bench", "k", value) if protocol == "v1"
               else resp_xadd_request("bench", value))
    try:
        got = run_refclient(tmp_path, server.port, protocol, request, connections=4,
                            warmup_s=0.1, duration_s=0.5)
    finally:
        server.stop()
    assert got["requests"] > 100
    assert 0.45 < got["window_s"] < 1.5
    assert got["messages_per_s"] == pytest.approx(got["requests"] / got["window_s"], rel=1e-3)


def test_an_error_reply_fails_the_run(tmp_path: Path, error_server: int) -> None:
    """An error reply ends the run with an error instead of being counted as a success."""
    with pytest.raises(ServerError, match="error reply"):
        run_refclient(tmp_path, error_server, "v1", b"V1|1|PING|\n", connections=1,
                      warmup_s=0.0, duration_s=0.5)
