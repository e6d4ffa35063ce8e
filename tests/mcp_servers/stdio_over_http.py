"""A stdio MCP server reached over Streamable HTTP, for the official conformance suite.

    python tests/mcp_servers/stdio_over_http.py PORT -- COMMAND [ARG ...]

`@modelcontextprotocol/conformance` tests a server at a URL (its README, "Testing Servers"),
and our server speaks stdio only. This forwards the JSON-RPC lines untouched, so what the
suite judges is our server's own answers, not an SDK's: each `initialize` starts COMMAND as a
new process (one MCP session, as a stdio client would have it) and names it in the
`Mcp-Session-Id` header; a POST's requests go to that process's stdin and their responses
come back as one `application/json` body; a POST of notifications only gets 202; DELETE ends
the session; GET gets 405 (no stream from the server: the spec allows either). Requests are
taken only from 127.0.0.1 with a localhost Host header (the spec's DNS rebinding rule).
Spec: modelcontextprotocol.io/specification/2025-06-18/basic/transports#streamable-http.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from queue import Empty, Queue
from typing import Any
from urllib.parse import urlsplit

ANSWER_WAIT = 60.0  # seconds a request may wait for its answer before a 504
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


class StdioSession:
    """One server process, its answers matched to requests by id."""

    def __init__(self, command: list[str], cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.waiting: dict[Any, Queue[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self.read_answers, daemon=True).start()

    def read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            with self.lock:
                box = self.waiting.pop(message.get("id"), None) if "id" in message else None
            if box is not None and "method" not in message:
                box.put(message)
            # Anything else (server notifications, requests to the client) has no stream to
            # go to here; the scenarios that apply to our server need none.

    def exchange(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        boxes = []
        with self.lock:
            for message in messages:
                if "id" in message and "method" in message:
                    box: Queue[dict[str, Any]] = Queue()
                    self.waiting[message["id"]] = box
                    boxes.append(box)
        assert self.process.stdin is not None
        for message in messages:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        return [box.get(timeout=ANSWER_WAIT) for box in boxes]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Bridge(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, command: list[str], cwd: Path | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.command = command
        self.cwd = cwd
        self.sessions: dict[str, StdioSession] = {}

    def close_all(self) -> None:
        for session in self.sessions.values():
            session.close()


class Handler(BaseHTTPRequestHandler):
    server: Bridge

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass

    def reply(self, status: int, body: Any = None, session_id: str | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        if session_id:
            self.send_header("Mcp-Session-Id", session_id)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def local(self) -> bool:
        """Host (and Origin, when sent) name this machine: a rebound name is refused."""
        host = urlsplit("//" + (self.headers.get("Host") or "")).hostname
        origin = self.headers.get("Origin")
        return host in LOCAL_HOSTS and (origin is None or urlsplit(origin).hostname in LOCAL_HOSTS)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if not self.local():
            self.reply(403, error_body(-32000, "Forbidden: not a localhost Host or Origin"))
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError as error:
            self.reply(400, error_body(-32700, f"Parse error: {error}"))
            return
        messages = body if isinstance(body, list) else [body]
        if not all(isinstance(message, dict) for message in messages):
            self.reply(400, error_body(-32600, "Invalid Request: not a JSON-RPC message"))
            return
        session_id = self.headers.get("Mcp-Session-Id")
        if any(message.get("method") == "initialize" for message in messages):
            session_id = uuid.uuid4().hex
            self.server.sessions[session_id] = StdioSession(self.server.command, self.server.cwd)
        session = self.server.sessions.get(session_id or "")
        if session is None:
            self.reply(400 if not session_id else 404, error_body(-32000, "No such session"))
            return
        try:
            answers = session.exchange(messages)
        except Empty:
            self.reply(504, error_body(-32603, "The stdio server did not answer"))
            return
        if not answers:
            self.reply(202, session_id=session_id)
        else:
            self.reply(200, answers if isinstance(body, list) else answers[0], session_id)

    def do_GET(self) -> None:  # noqa: N802
        self.reply(405)

    def do_DELETE(self) -> None:  # noqa: N802
        session = self.server.sessions.pop(self.headers.get("Mcp-Session-Id") or "", None)
        if session is not None:
            session.close()
        self.reply(200 if session else 404)


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    bridge = Bridge(int(argv[0]), argv[2:])
    print(f"listening on http://127.0.0.1:{bridge.server_address[1]}/mcp", flush=True)
    try:
        bridge.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        bridge.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
