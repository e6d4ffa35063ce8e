"""Memory and time stay bounded whatever a client sends: request lines and their JSON values
are capped before any JSON is built, answers a client leaves unread stop the server from taking
more requests, and patterns are capped by size. Peak memory is VmHWM from /proc, as in
test_filesystem_memory.py. Also: the server offers tools only, and says so the way the MCP
spec has it.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import termios
import threading
from pathlib import Path

from mcp_session import REPO, RawServer, server_command, status_kib, tool_text

from mcp_servers.request_limits import MAX_JSON_VALUES, MAX_LINE_BYTES

PEAK_BUDGET_KIB = 400 * 1024  # the bound for the whole server process
F_GETPIPE_SZ = 1032  # fcntl(2), Linux


def call_line(request_id: int, name: str, arguments_json: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments_json}}}}}\n'
    ).encode()


def test_requests_of_millions_of_values_are_refused_before_their_json_is_built(tmp_path) -> None:
    (tmp_path / "a").write_text("inside\n")
    many_paths = '{"paths":[' + '"a",' * 4_000_000 + '"a"]}'  # 16 MB, 4 million paths
    many_edits = (
        '{"path":"a","edits":['
        + '{"old_text":"i","new_text":"o"},' * 700_000  # 22 MB, within the byte cap
        + '{"old_text":"i","new_text":"o"}]}'
    )
    # Exec'd: its peak is measured, which a fork would share with the launcher.
    with RawServer([tmp_path], exec_=True) as raw:
        # Three at once, then one of 700,000 edits, then a line over the byte cap; a ping
        # after each must be answered.
        for request_id in (101, 102, 103):
            raw.send_bytes(call_line(request_id, "read_multiple_files", many_paths))
        raw.send_bytes(call_line(104, "patch_file", many_edits))
        over_the_cap = '{"path":"b","content":"' + "x" * MAX_LINE_BYTES + '"}'
        raw.send_bytes(call_line(105, "write_file", over_the_cap))
        raw.next_id = 200
        ping = raw.request("ping")
        answers = {}
        while len(answers) < 6:
            answer = raw.next_answer()
            answers[answer["id"]] = answer
        for request_id in (101, 102, 103, 104):
            error = answers[request_id]["error"]
            assert error["code"] == -32600
            assert f"at most {MAX_JSON_VALUES:,} JSON values" in error["message"], error
        too_long = answers[105]["error"]
        assert too_long["code"] == -32600
        assert f"limited to {MAX_LINE_BYTES:,} bytes" in too_long["message"]
        assert answers[ping]["result"] == {}
        assert not (tmp_path / "b").exists() and (tmp_path / "a").read_text() == "inside\n"
        read = raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "a"}})
        assert tool_text(read) == ("inside\n", False)
        assert status_kib(raw.pid, "VmHWM") < PEAK_BUDGET_KIB


def pipe_bytes(fd: int) -> int:
    """Bytes waiting in a pipe (either end)."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


def pipe_full(fd: int) -> bool:
    return pipe_bytes(fd) >= fcntl.fcntl(fd, F_GETPIPE_SZ)


def test_a_client_that_stops_reading_stops_the_server_taking_requests(tmp_path) -> None:
    (tmp_path / "big.txt").write_text(("x" * 99 + "\n") * 2600)  # a read answer of ~256 KiB
    count = 1000  # unread answers (3,000 once held 826 MB)
    server = subprocess.Popen(
        server_command([tmp_path]), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": RawServer.hello()}
        server.stdin.write(json.dumps(hello).encode() + b"\n")
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 0
        lines = b"".join(
            call_line(number, "read_file", '{"path":"big.txt"}') for number in range(1, count + 1)
        )

        def send() -> None:
            assert server.stdin is not None
            server.stdin.write(lines)
            server.stdin.flush()

        writer = threading.Thread(target=send, daemon=True)
        writer.start()
        # Wait, reading nothing, until either every request went in, or both pipes stay full:
        # the server neither takes requests nor can write answers.
        full_twice = 0
        while writer.is_alive() and full_twice < 2:
            writer.join(0.1)
            both = pipe_full(server.stdin.fileno()) and pipe_full(server.stdout.fileno())
            full_twice = full_twice + 1 if both else 0
        stopped_taking = writer.is_alive()
        answered = set()
        while len(answered) < count:
            answer = json.loads(server.stdout.readline())
            assert answer["result"]["content"][0]["text"].startswith("x" * 99)
            answered.add(answer["id"])
        writer.join()
        assert stopped_taking
        assert status_kib(server.pid, "VmHWM") < PEAK_BUDGET_KIB
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def test_patterns_and_excludes_are_capped_by_size(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    with RawServer([tmp_path], "--call-timeout", "1") as raw:
        huge_glob = "*a" * 600_000  # 1.2 MB: it once kept a core busy for 20 s after "abandoned"
        cases = [
            ("search_files", {"path": ".", "pattern": huge_glob}, "pattern is 1,200,000"),
            ("search_files", {"path": ".", "pattern": "*", "exclude": ["x"] * 101}, "at most 100"),
            ("directory_tree", {"path": ".", "exclude": [huge_glob]}, "an exclude glob is"),
            ("grep", {"pattern": "a", "glob": huge_glob}, "glob is 1,200,000 characters"),
        ]
        for name, arguments, expected in cases:
            text, is_error = tool_text(
                raw.ask("tools/call", {"name": name, "arguments": arguments})
            )
            assert is_error and text.startswith("invalid_argument:") and expected in text, text
        read = raw.ask("tools/call", {"name": "read_file", "arguments": {"path": "a.txt"}})
        assert tool_text(read) == ("a\n", False)


def test_only_tools_are_offered_and_other_methods_get_the_spec_codes(tmp_path: Path) -> None:
    # The Python SDK answers an unknown resource with code 0 (noted in MCP SEP-2164,
    # modelcontextprotocol.io/seps/2164-resource-not-found-error); a server that offers no
    # resources or prompts advertises neither capability, and a method it does not serve is
    # JSON-RPC's -32601 "Method not found".
    with RawServer([tmp_path]) as raw:
        hello = raw.ask("initialize", RawServer.hello())
        capabilities = hello["result"]["capabilities"]
        assert "tools" in capabilities
        assert "resources" not in capabilities and "prompts" not in capabilities
        for method, params in [
            ("resources/read", {"uri": "file:///etc/passwd"}),
            ("resources/list", {}),
            ("prompts/get", {"name": "nope"}),
            ("prompts/list", {}),
        ]:
            assert raw.ask(method, params)["error"]["code"] == -32601, method
        assert raw.ask("ping")["result"] == {}
        assert json.loads(json.dumps(raw.ask("tools/list")))["result"]["tools"]
