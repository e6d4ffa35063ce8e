"""The HTTP API a reviewer's client relies on (issue 23), against a real `fsagent serve`
process on a real port: a pending question is never dropped by a new message, JSON that two
readers could read two ways is refused, the race loser is told who decided and when, the
seed's admin contract, an approved call that failed says so, the schema, bad thread names,
SSE ids and keep-alives, slow clients, a client gone mid-run, wildcard binds and blank tokens.

One server per test, with a stand-in model that answers by the request (`by_request`), so the
scenarios of a test do not depend on each other's order."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx

from conftest import Workspace, tree_snapshot
from core.threads.thread_names import THREAD_NAME_RULE
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, TOKEN, ServeProcess, approve_shown, by_request, sse_events

NO_LLM = "http://127.0.0.1:9/v1"
SHORT = {"FSAGENT_SSE_KEEPALIVE": "0.2", "FSAGENT_HEADER_SECONDS": "1", "FSAGENT_BODY_SECONDS": "1"}


def write(path: str, content: str, call_id: str, before: str = "") -> dict[str, Any]:
    call = tool_call("write_file", {"path": path, "content": content}, id=call_id)
    return reply(before, tool_calls=[call])


def post(url: str, body: bytes | dict, token: bool = True, **kw: Any) -> httpx.Response:
    headers = {**JSON, **(ADMIN if token else {})}
    if isinstance(body, dict):
        return httpx.post(url, json=body, headers=headers, timeout=60, **kw)
    return httpx.post(url, content=body, headers=headers, timeout=60, **kw)


def test_the_api_keeps_questions_refuses_ambiguous_json_and_answers_in_the_seed_contract(
    workspace: Workspace,
):
    ask = reply(tool_calls=[tool_call("ask_person", {"question": "Which list?"}, id="call_q")])
    script = by_request({
        "add milk": [ask, text("Added to todo.md.")],
        "create hello": [
            # Slow chunks: the keep-alive comes while the model writes (FSAGENT_SSE_KEEPALIVE).
            reply("I'll create it.", tool_calls=[write("hello.txt", "hi\n", "c1")["tool_calls"][0]],
                  delay=0.3),
            text("Created hello.txt."),
        ],
        "escape": [write("inside.txt", "x\n", "c2"), text("It was refused.")],
        "race": [write("race.txt", "once\n", "c3"), text("Raced.")],
    })  # fmt: skip
    before = tree_snapshot(workspace.outside)
    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, env=SHORT)
        url = served.url

        # A pending question: a new message is 409 and the question stays; the answer works.
        asked = post(f"{url}/api/threads/q/messages", {"text": "add milk"}, token=False)
        assert sse_events(asked.text)[-1][1]["status"] == "pending"
        again = post(f"{url}/api/threads/q/messages", {"text": "something else"}, token=False)
        assert again.status_code == 409, again.text
        assert "waits for an answer to the model's question (Which list?)" in again.json()["error"]
        shown = httpx.get(f"{url}/api/threads/q", timeout=60).json()
        assert shown["status"] == "waiting for an answer" and not shown["running"]
        answered = post(f"{url}/api/admin/approvals/q", {"answers": {"call_q": "todo.md"}})
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "answered"
        assert answered.json()["answer"] == "Added to todo.md."

        # SSE frames are numbered, and a comment keeps the stream alive while the model is slow.
        said = post(f"{url}/api/threads/w/messages", {"text": "create hello"}, token=False)
        blocks = [b for b in said.text.split("\n\n") if b.strip()]
        assert ": keep-alive" in blocks
        ids = [int(b.split("\n")[0][4:]) for b in blocks if b.startswith("id: ")]
        assert ids == list(range(1, len(ids) + 1)) and len(ids) == len(sse_events(said.text))

        # Duplicate keys and deep nesting: 400, one line each, and nothing runs.
        twice = post(f"{url}/api/admin/approvals/w", b'{"approved": false, "approved": true}')
        assert twice.status_code == 400
        assert twice.json()["error"].startswith("the body is ambiguous JSON: the key 'approved'")
        deep = post(f"{url}/api/admin/approvals/w", b"[" * 100_000 + b"]" * 100_000)
        assert deep.status_code == 400 and "nests deeper than" in deep.json()["error"]
        assert not (workspace.root / "hello.txt").exists()
        assert len(llm.requests_with_tools()) == 3  # q twice, w once: nothing resumed w

        # The model's own words before its call are listed with the request, and when.
        [waiting] = httpx.get(f"{url}/api/admin/approvals", headers=ADMIN, timeout=60).json()[
            "approvals"
        ]
        assert (waiting["thread"], waiting["reason"]) == ("w", "I'll create it.")
        assert waiting["since"].startswith(time.strftime("%Y-"))

        # The seed's contract: the decision in `status`, the run's end in `run`.
        ids = {call["id"]: call["preview_id"] for call in waiting["calls"]}
        approved = post(f"{url}/api/admin/approvals/w", {"approved": True, "preview_ids": ids})
        assert approved.status_code == 200, approved.text
        body = approved.json()
        assert {k: body[k] for k in ("status", "thread_id", "answer", "run")} == {
            "status": "approved",
            "thread_id": "w",
            "answer": "Created hello.txt.",
            "run": "done",
        }
        [result] = body["results"]
        assert (result["path"], result["failed"]) == ("hello.txt", False)
        assert (workspace.root / "hello.txt").read_text() == "hi\n"
        rejected_body = post(f"{url}/api/admin/approvals/w", {"approved": False})
        assert rejected_body.status_code == 404
        assert "already decided by admin at 20" in rejected_body.json()["error"]

        # An edit the sandbox refuses: approved, and the result says it failed, by path.
        post(f"{url}/api/threads/e/messages", {"text": "escape"}, token=False)
        escaping = {"path": "../../escaped.txt", "content": "x\n"}
        edit_preview = post(
            f"{url}/api/admin/approvals/e/preview", {"call_id": "c2", "args": escaping}
        )
        edit = {"type": "edit", "args": escaping, "preview_id": edit_preview.json()["preview_id"]}
        edited = post(f"{url}/api/admin/approvals/e", {"decisions": {"c2": edit}})
        assert edited.status_code == 200, edited.text
        [result] = edited.json()["results"]
        assert result["path"] == "../../escaped.txt" and result["failed"] is True
        assert edited.json()["status"] == "approved"

        # Two racing approvals: one runs the write, the other is told who decided and when.
        post(f"{url}/api/threads/race/messages", {"text": "race"}, token=False)
        listed = httpx.get(f"{url}/api/admin/approvals", headers=ADMIN, timeout=60).json()
        race = approve_shown(listed, "race")
        answers: list[httpx.Response] = []

        def approve_race() -> None:
            answers.append(post(f"{url}/api/admin/approvals/race", race))

        racers = [threading.Thread(target=approve_race) for _ in range(2)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join(timeout=60)
        codes = sorted(a.status_code for a in answers)
        assert codes[0] == 200 and codes[1] in (404, 409), [a.text for a in answers]
        loser = max(answers, key=lambda a: a.status_code)
        assert "already decided by admin at 20" in loser.json()["error"]
        assert (workspace.root / "race.txt").read_text() == "once\n"

        # A bad thread name says the rule, wherever it is used.
        for method, path in [
            ("POST", "/api/threads/bad%2Fname/messages"),
            ("GET", "/api/threads/bad%2Fname"),
            ("POST", "/api/admin/approvals/bad%2Fname"),
        ]:
            bad = httpx.request(method, url + path, json={"text": "x"}, headers=ADMIN, timeout=60)
            assert bad.status_code == 400, (path, bad.text)
            assert THREAD_NAME_RULE in bad.json()["error"]

        # The schema is served, naming the endpoints.
        schema = httpx.get(f"{url}/openapi.json", timeout=60).json()
        assert {"/api/threads/{name}/messages", "/api/admin/approvals/{name}"} <= set(
            schema["paths"]
        )
        assert "Traceback" not in served.text
    assert tree_snapshot(workspace.outside) == before
    assert not (workspace.root.parent.parent / "escaped.txt").exists()


def open_raw(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(data)
    return sock


def closed_by_server(sock: socket.socket) -> bytes:
    """Read until the server closes the connection (bounded by the socket's timeout)."""
    got = b""
    with sock:
        while chunk := sock.recv(4096):
            got += chunk
    return got


def test_slow_clients_are_cut_and_a_client_gone_mid_model_call_leaves_the_thread_idle(
    workspace: Workspace,
):
    slow = reply("Thinking about it at length. " * 4, delay=0.3)
    script = by_request({"think": [slow], "check": [text("Fine.")]})
    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, env=SHORT)
        port = int(served.url.rsplit(":", 1)[1])

        # Headers that never end, and a body that never comes: each connection is closed
        # (FSAGENT_HEADER_SECONDS, FSAGENT_BODY_SECONDS), where uvicorn alone keeps them.
        head = f"POST /api/threads/s/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        slow_headers = [open_raw(port, head + b"X-Slow: 1\r\n") for _ in range(10)]
        body_head = head + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        slow_bodies = [open_raw(port, body_head) for _ in range(5)]
        for sock in slow_headers:
            assert closed_by_server(sock).startswith(b"HTTP/1.1 408")
        for sock in slow_bodies:
            answer = closed_by_server(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"did not arrive within 1 s" in answer
        assert httpx.get(f"{served.url}/api/threads", timeout=30).status_code == 200

        # Clients go away at every point of a run: before the model is asked, while it is
        # (its request seen by the stand-in), while it streams. Each thread is idle after.
        for trial in range(8):
            thread = f"gone{trial}"
            asked = len(llm.requests_with_tools())
            with httpx.stream(
                "POST", f"{served.url}/api/threads/{thread}/messages",
                json={"text": "think"}, timeout=60,
            ) as response:  # fmt: skip
                assert response.status_code == 200
                if trial % 2:
                    deadline = time.monotonic() + 30
                    while len(llm.requests_with_tools()) == asked:  # the model is asked now
                        assert time.monotonic() < deadline
                        time.sleep(0.02)
                time.sleep(0.05 * trial)  # a little later each time: another step of the run
            deadline = time.monotonic() + 30
            while (
                (shown := httpx.get(f"{served.url}/api/threads/{thread}", timeout=60))
                .json()
                .get("running")
            ):
                assert time.monotonic() < deadline, shown.text
                time.sleep(0.05)
            # Cut off before its first step, a thread is not even made; otherwise it is idle.
            assert shown.status_code == 404 or shown.json()["status"] == "idle", shown.text
        said = post(f"{served.url}/api/threads/gone1/messages", {"text": "check"}, token=False)
        frames = sse_events(said.text)
        texts = [data["text"] for kind, data in frames if kind == "text"]
        assert "".join(texts) == "Fine."
        # No "The last run was cut off… finishing it now", in any frame.
        assert not [data for kind, data in frames if kind == "notice"], frames
        assert "Traceback" not in served.text


def lan_address() -> str | None:
    """This machine's address on its network, if it has one but loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks a route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_a_wildcard_bind_takes_loopback_and_own_addresses_and_a_blank_token_is_none(
    workspace: Workspace,
):
    blank = {"FSAGENT_ADMIN_TOKEN": "   "}
    refused = workspace.run(NO_LLM, "", "serve", "--host", "0.0.0.0", thread=None, env=blank)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "fsagent: serve --host 0.0.0.0: off loopback every endpoint needs a token, and "
        "FSAGENT_ADMIN_TOKEN is not set (or blank); set it, or serve on 127.0.0.1"
    ]

    llm = FakeLLM([]).start()
    on_loopback = ServeProcess(workspace, llm.base_url, env=blank)
    assert "admin API off" in on_loopback.text
    off = httpx.get(f"{on_loopback.url}/api/admin/approvals", headers=ADMIN, timeout=60)
    assert off.status_code == 403 and "the admin API is off" in off.json()["error"]
    on_loopback.kill()

    wild = ServeProcess(workspace, llm.base_url, "--host", "0.0.0.0")
    port = int(wild.url.rsplit(":", 1)[1])
    for address in ["127.0.0.1", "localhost", socket.gethostname(), lan_address()]:
        if address is None:
            continue
        connect = "127.0.0.1" if address == "localhost" else address
        shown = httpx.get(
            f"http://{connect}:{port}/api/threads",
            headers={**ADMIN, "Host": f"{address}:{port}"},
            timeout=30,
        )
        assert shown.status_code == 200, (address, shown.text)
    rebound = httpx.get(
        f"http://127.0.0.1:{port}/api/threads",
        headers={**ADMIN, "Host": f"evil.example:{port}"},
        timeout=60,
    )
    assert rebound.status_code == 400 and "does not name this server" in rebound.json()["error"]
    assert TOKEN not in wild.text
    wild.kill()
    llm.stop()
