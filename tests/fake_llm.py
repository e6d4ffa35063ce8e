"""A scripted stand-in for LM Studio's OpenAI-compatible server, for end-to-end tests.

The agent under test runs as a subprocess and talks real HTTP, so this is a real HTTP server
(stdlib only, so it starts fast) that answers /v1/chat/completions from a script of replies:

    script = [text("filesystem"), reply(tool_calls=[tool_call("read_file", {"path": "a"})])]
    with FakeLLM(script) as llm:
        run_agent("--base-url", llm.base_url)
        assert llm.remaining == 0

It can also run as its own process (so a test can kill it to simulate LM Studio going down):

    python tests/fake_llm.py --script steps.json [--port 0] [--auto-route NAME] [--log FILE]

which prints `ready http://127.0.0.1:PORT/v1` once listening and serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

Reply = dict[str, Any]
Step = Reply | Callable[[dict[str, Any]], Reply]
Script = Sequence[Step] | Callable[[dict[str, Any]], Reply]

# Real servers stream text and tool arguments in many small deltas; a few pieces are enough to
# exercise the client's reassembly without making every test slow.
_PIECES = 3

_call_ids = itertools.count(1)
_completion_ids = itertools.count(1)


def tool_call(name: str, args: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    """One tool call; a str `args` is sent verbatim so tests can send malformed JSON."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": id or f"call_{next(_call_ids)}", "name": name, "arguments": arguments}


def reply(
    content: str = "",
    tool_calls: Sequence[dict[str, Any]] = (),
    *,
    delay: float = 0.0,
    drop_after: int | None = None,
    status: int | None = None,
    error: str | None = None,
) -> Reply:
    """One scripted answer. The dict is JSON-able, which is also the --script file format.

    delay: seconds slept between stream chunks (or before a non-streamed body).
    drop_after: send this many stream chunks, then close the connection without [DONE].
    status/error: answer with this HTTP status and an OpenAI-style error body instead.
    """
    return {
        "content": content,
        "tool_calls": [dict(call) for call in tool_calls],
        "delay": delay,
        "drop_after": drop_after,
        "status": status,
        "error": error,
    }


def text(content: str) -> Reply:
    return reply(content=content)


def _normalise(step: Reply) -> Reply:
    """Fill defaults so hand-written JSON scripts may omit keys or give arguments as objects."""
    calls = []
    for call in step.get("tool_calls") or ():
        args = call.get("arguments", call.get("args", {}))
        calls.append(tool_call(call["name"], args, call.get("id")))
    status = step.get("status")
    if status is None and step.get("error") is not None:
        status = 500
    return {
        "content": step.get("content") or "",
        "tool_calls": calls,
        "delay": float(step.get("delay") or 0.0),
        "drop_after": step.get("drop_after"),
        "status": status,
        "error": step.get("error"),
    }


def _split(value: str, pieces: int = _PIECES) -> list[str]:
    if not value:
        return []
    size = max(1, -(-len(value) // pieces))
    return [value[i : i + size] for i in range(0, len(value), size)]


def _error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _usage(request: dict[str, Any], step: Reply) -> dict[str, int]:
    # Rough token counts (~4 characters a token); tests only need plausible numbers.
    prompt = len(json.dumps(request.get("messages", []))) // 4
    produced = step["content"] + "".join(call["arguments"] for call in step["tool_calls"])
    completion = len(produced) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _completion(request: dict[str, Any], step: Reply, model: str) -> dict[str, Any]:
    """A non-streamed chat.completion object."""
    message: dict[str, Any] = {"role": "assistant", "content": step["content"]}
    if step["tool_calls"]:
        # OpenAI sends null content alongside tool calls when the model said nothing.
        message["content"] = step["content"] or None
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in step["tool_calls"]
        ]
    return {
        "id": f"chatcmpl-fake-{next(_completion_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if step["tool_calls"] else "stop",
            }
        ],
        "usage": _usage(request, step),
    }


def _chunks(request: dict[str, Any], step: Reply, model: str) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed answer, in OpenAI's order."""
    base = {
        "id": f"chatcmpl-fake-{next(_completion_ids)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _split(step["content"]):
        yield chunk({"content": piece})
    for index, call in enumerate(step["tool_calls"]):
        # The first delta of a call carries id, type and name; later ones only argument text.
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        for piece in _split(call["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if step["tool_calls"] else "stop")
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _usage(request, step)}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Don't join handler threads on close: one may be sleeping in a `delay` for a client that
    # has long gone, and `with FakeLLM(...)` must not wait for it.
    block_on_close = False
    # socketserver's default backlog of 5 makes bursts of parallel clients (benchmarks, the
    # thread-safety test) wait for SYN retries or fail outright.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeLLM) -> None:
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (Ctrl-C, killed agent, closed keep-alive) are routine here; a
        # traceback for each would bury real failures in the test output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the client can keep connections alive and streams can use chunked encoding,
    # which is what lets a dropped stream look truncated rather than merely finished.
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate small writes; with Nagle's algorithm the body
        # waits for the client's delayed ACK, 40 ms a reply, which is not LM Studio's time.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean; `llm.requests` is the log that matters

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            data = [
                {"id": m, "object": "model", "owned_by": "fake"} for m in self.server.fake.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(
                404, _error_body(f"fake_llm: no route GET {self.path}", "invalid_request_error")
            )

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(
                404, _error_body(f"fake_llm: no route POST {self.path}", "invalid_request_error")
            )
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send_json(400, _error_body("fake_llm: body is not JSON", "invalid_request_error"))
            return
        step = self.server.fake._next_step(request)
        model = str(request.get("model") or self.server.fake.models[0])
        try:
            self._answer(request, step, model)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up (e.g. Ctrl-C); nothing to do

    def _answer(self, request: dict[str, Any], step: Reply, model: str) -> None:
        if step["status"] is not None:
            message = step["error"] or f"fake_llm: scripted HTTP {step['status']}"
            time.sleep(step["delay"])
            self._send_json(step["status"], _error_body(message))
        elif request.get("stream"):
            self._stream(request, step, model)
        else:
            time.sleep(step["delay"])
            body = json.dumps(_completion(request, step, model)).encode()
            if step["drop_after"] is None:
                self._send_json(200, body)
            else:
                # Promise the whole body, deliver half: the client sees a truncated response.
                self._send_head(200, "application/json", len(body))
                self.wfile.write(body[: len(body) // 2])
                self._drop()

    def _stream(self, request: dict[str, Any], step: Reply, model: str) -> None:
        self._send_head(200, "text/event-stream", None)
        for sent, chunk in enumerate(_chunks(request, step, model)):
            if sent == step["drop_after"]:
                self._drop()
                return
            if sent and step["delay"]:
                time.sleep(step["delay"])
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        if step["drop_after"] is not None:
            self._drop()  # asked to drop after more chunks than there were: drop before [DONE]
            return
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the zero-length chunk ends the chunked body

    def _send_head(self, status: int, content_type: str, length: int | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_json(self, status: int, body: dict[str, Any] | bytes) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self._send_head(status, "application/json", len(data))
        self.wfile.write(data)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the socket mid-response, the way a crashed or unloaded LM Studio does."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):  # already gone is just as good
            self.connection.shutdown(socket.SHUT_RDWR)


class FakeLLM:
    """A scripted OpenAI chat-completions server on 127.0.0.1, run in a background thread.

    `script` is a list of steps (reply dicts or `(request) -> reply` callables) consumed one per
    chat request, or a single callable answering every request. With `auto_route` set, requests
    without `tools` (the agent's router) get that text without consuming a step.
    """

    def __init__(
        self,
        script: Script,
        models: Sequence[str] = ("fake-model",),
        auto_route: str | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
    ) -> None:
        self._script = script if callable(script) else list(script)
        self.models = list(models) or ["fake-model"]
        self.auto_route = auto_route
        self.exhausted = 0
        self._port = port
        self._log_path = Path(log_path) if log_path else None
        self._index = 0
        self._requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def bind(self) -> _Server:
        """Listen without serving yet; `port` is known from here on."""
        if self._server is None:
            self._server = _Server(("127.0.0.1", self._port), self)
        return self._server

    def start(self) -> Self:
        server = self.bind()
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests look at ----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeLLM is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat-completions body received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_with_tools(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("tools")]

    @property
    def remaining(self) -> int:
        """Scripted steps not yet used; always 0 for a callable script, which never runs out."""
        with self._lock:
            return 0 if callable(self._script) else len(self._script) - self._index

    # -- the script ------------------------------------------------------------------------

    def _next_step(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self._requests.append(request)
            number = len(self._requests)
            if self._log_path is not None:
                with self._log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps(request) + "\n")
            if self.auto_route is not None and not request.get("tools"):
                return _normalise(text(self.auto_route))
            if callable(self._script):
                step: Step = self._script
            elif self._index < len(self._script):
                step = self._script[self._index]
                self._index += 1
            else:
                self.exhausted += 1
                return _normalise(
                    reply(status=500, error=f"fake_llm: script exhausted at request {number}")
                )
        # Call dynamic steps outside the lock: they may be slow or read `requests` themselves.
        return _normalise(step(request) if callable(step) else step)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted fake of LM Studio's OpenAI API.")
    parser.add_argument("--script", required=True, help="JSON file: a list of reply dicts")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--auto-route", default=None)
    parser.add_argument("--log", default=None, help="append each request body as a JSON line")
    parser.add_argument("--model", action="append", dest="models", default=None)
    args = parser.parse_args(argv)

    script = json.loads(Path(args.script).read_text(encoding="utf-8"))
    fake = FakeLLM(
        script,
        models=args.models or ["fake-model"],
        auto_route=args.auto_route,
        port=args.port,
        log_path=args.log,
    )
    server = fake.bind()
    print(f"ready {fake.base_url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
