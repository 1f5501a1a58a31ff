"""LeanSender on a real socket: credentials, a rotated token, a connection the server dropped, a refused one."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
from lightkube.config.client_adapter import BearerAuth, BearerTokenFileAuth

from toposched.kube.client import ServerError
from toposched.kube.lean_http import LeanSender


class TinyServer:
    """Answers each HTTP/1.1 request on loopback with 201 (or 401 without ``token``), keeping connections open
    unless ``drop_after_each`` (then it closes them after answering, without saying so)."""

    def __init__(self, *, token: str | None = None, drop_after_each: bool = False):
        self.token = token
        self.drop_after_each = drop_after_each
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                line = reader.readline()
                if not line:
                    return
                headers = {}
                while (header := reader.readline()) not in (b"\r\n", b""):
                    name, value = header.decode().split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                body = reader.read(int(headers.get("content-length", "0")))
                self.requests.append((line.decode().split()[1], headers, body))
                ok = self.token is None or headers.get("authorization") == f"Bearer {self.token}"
                answer = json.dumps({"kind": "Status", "code": 201 if ok else 401}).encode()
                conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (201 if ok else 401, len(answer), answer))
                if self.drop_after_each:
                    return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def server() -> Iterator[TinyServer]:
    srv = TinyServer(token="t1")
    yield srv
    srv.close()


def test_posts_json_with_the_credential_on_one_kept_alive_connection(server):
    sender = LeanSender(server.url, ssl_context=None, auth=BearerAuth("t1"), timeout=5, headers={"User-Agent": "x"})
    for i in range(3):
        assert sender.post(f"/api/v1/namespaces/ns/pods/p{i}/binding", {"kind": "Binding", "n": i})[0] == 201
    sender.close()
    assert server.connections == 1
    path, headers, body = server.requests[2]
    assert path == "/api/v1/namespaces/ns/pods/p2/binding" and json.loads(body) == {"kind": "Binding", "n": 2}
    assert headers["content-type"] == "application/json" and headers["user-agent"] == "x"


def test_a_401_reads_a_rotated_token_again_and_sends_once_more(server, tmp_path):
    token = tmp_path / "token"
    token.write_text("t0")
    sender = LeanSender(server.url, ssl_context=None, auth=BearerTokenFileAuth(str(token)), timeout=5)
    assert sender.post("/x", {})[0] == 401  # the file's token is refused, and reading it again changes nothing
    token.write_text("t1")  # the kubelet rotates the projected token
    assert sender.post("/x", {})[0] == 201
    assert [h["authorization"] for _, h, _ in server.requests[-2:]] == ["Bearer t0", "Bearer t1"]
    sender.close()


def test_a_fixed_credential_refused_is_a_401_sent_once(server):
    sender = LeanSender(server.url, ssl_context=None, auth=BearerAuth("wrong"), timeout=5)
    assert sender.post("/x", {})[0] == 401
    assert len(server.requests) == 1
    sender.close()


def test_a_kept_alive_connection_the_server_dropped_is_replaced_once():
    srv = TinyServer(drop_after_each=True)
    sender = LeanSender(srv.url, ssl_context=None, auth=None, timeout=5)
    assert [sender.post("/x", {"i": i})[0] for i in range(3)] == [201, 201, 201]
    assert srv.connections == 3 and len(srv.requests) == 3
    sender.close()
    srv.close()


def test_a_refused_connection_is_a_server_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sender = LeanSender(f"http://127.0.0.1:{port}", ssl_context=None, auth=None, timeout=2)
    with pytest.raises(ServerError) as err:
        sender.post("/x", {})
    assert err.value.code == 503
