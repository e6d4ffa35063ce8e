"""One way into a thread (core.opening), for the terminal and HTTP alike: a request too big for
the model's context is refused the same way over both; a reply cut at the limit and a
reasoning model's thinking reach an HTTP client as they reach the terminal; a thread whose
name an older version accepted (`my notes`) is decided over HTTP and from the shell by its
escaped name, printed escaped, and commands that only read or remove register nothing."""

from __future__ import annotations

import asyncio

from conftest import Workspace
from fake_llm import FakeLLM, reply, text
from old_graph import leave_paused
from serving import ADMIN, JSON, kinds, serving
from store import open_store

NO_LLM = "http://127.0.0.1:9/v1"  # nothing listens: these commands must not need LM Studio


def paused_by_an_older_version(workspace: Workspace, thread: str) -> None:
    """A thread paused for approval of write_file(old.txt) at the current graph's `approve`
    step (a version-2 payload this version resumes), under a name today's rule refuses."""
    leave_paused(workspace.location, thread, "approve", 2)


async def registered(workspace: Workspace) -> list[str]:
    async with open_store(workspace.location) as store:
        return await store.thread_names()


def test_a_request_too_big_for_the_context_is_refused_over_http_as_at_the_terminal(
    workspace: Workspace,
):
    # The same server the terminal's test refuses "hello" on (tests/test_long_threads.py):
    # llama.cpp says its context is 384 tokens, less than even the smallest route's tools and
    # instructions need.
    async def scenario() -> None:
        with FakeLLM([text("Hello.")], flavour="llamacpp", context=384) as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "hello")
                shown = await served.client.get("/api/threads/t")
                listed = (await served.client.get("/api/threads")).json()
            assert llm.requests == []  # no model request at all, not even the router's

        [error] = [data["text"] for kind, data in events if kind == "error"]
        assert "does not fit the model's context" in error and "384 tokens" in error
        assert "--read-only" in error and "larger context" in error
        assert events[-1] == ("done", {"thread": "t", "status": "error"})
        # Nothing was stored: the thread does not exist, as after the terminal's refusal.
        assert shown.status_code == 404
        assert listed == {"threads": []}

    asyncio.run(scenario())
    terminal = workspace.invoke(NO_LLM, "", "threads", thread=None)
    assert terminal.stdout.startswith("No threads in"), terminal.stdout


def test_a_cut_reply_and_reasoning_arrive_over_sse(workspace: Workspace):
    script = [
        text("general"),
        # Thinks first, then loops until the reply limit (an eighth of 8192: 1024 tokens).
        reply(reasoning="They want a long story.", loop="Once upon a time. "),
    ]

    async def scenario() -> None:
        with FakeLLM(script, flavour="llamacpp", context=8192) as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "tell me a story")
                assert llm.requests[-1]["max_tokens"] == 1024

        names = kinds(events)
        thought = "".join(data["text"] for kind, data in events if kind == "reasoning")
        assert thought == "They want a long story."
        assert names.index("reasoning") < names.index("text") < names.index("answer")
        streamed = "".join(data["text"] for kind, data in events if kind == "text")
        assert streamed.startswith("Once upon a time.") and "long story" not in streamed
        [answer] = [data["text"] for kind, data in events if kind == "answer"]
        assert "[fsagent" not in answer  # the note is for the model; the client gets `cut`
        assert ("cut", {"limit": 1024}) in events
        assert names.index("answer") < names.index("cut") < names.index("done")
        assert events[-1] == ("done", {"thread": "t", "status": "done"})

    asyncio.run(scenario())


def test_an_unsure_first_reply_arrives_over_sse_and_is_settled_as_what_it_was(
    workspace: Workspace,
):
    # A DeepSeek-R1 distill's reply holds only `</think>` (the template opened the block):
    # until the tag comes it could be the answer, so it is sent as `unsure`, then `settled`.
    script = [text("general"), text("I should greet them.</think>Hello there.")]

    async def scenario() -> None:
        with FakeLLM(script) as llm:
            async with serving(workspace, llm.base_url) as served:
                events = await served.say("t", "hi")

        names = kinds(events)
        unsure = "".join(data["text"] for kind, data in events if kind == "unsure")
        # As much as came before the piece holding the tag.
        assert unsure and "I should greet them.".startswith(unsure)
        assert names.count("settled") == 1
        assert names.index("unsure") < names.index("settled") < names.index("reasoning")
        thought = "".join(data["text"] for kind, data in events if kind == "reasoning")
        assert thought == "I should greet them."
        streamed = "".join(data["text"] for kind, data in events if kind == "text")
        assert streamed == "Hello there."
        assert [data["text"] for kind, data in events if kind == "answer"] == ["Hello there."]

    asyncio.run(scenario())


def test_a_spaced_thread_name_is_decided_over_http_and_printed_escaped(workspace: Workspace):
    paused_by_an_older_version(workspace, "my notes")

    listed = workspace.invoke(NO_LLM, "", "approvals", thread=None)
    assert listed.returncode == 0, listed.stderr
    assert "my%20notes" in listed.stdout and "my notes" not in listed.stdout

    async def scenario() -> None:
        with FakeLLM([text("Wrote old.txt.")], auto_route="filesystem") as llm:
            async with serving(workspace, llm.base_url) as served:
                waiting = await served.client.get("/api/admin/approvals", headers=ADMIN)
                [item] = waiting.json()["approvals"]
                assert item["thread"] == "my notes"
                # The URL a client builds from the name: the path is decoded to the name.
                decided = await served.client.post(
                    "/api/admin/approvals/my%20notes",
                    json={
                        "approved": True,
                        "preview_ids": {c["id"]: c["preview_id"] for c in item["calls"]},
                    },
                    headers={**ADMIN, **JSON},
                )
                assert decided.status_code == 200, decided.text
                assert decided.json()["answer"] == "Wrote old.txt."
                # The escaped form as printed, encoded into a URL, names the same thread.
                shown = await served.client.get("/api/threads/my%2520notes")
                assert shown.status_code == 200, shown.text
                assert shown.json()["status"] == "idle"

    asyncio.run(scenario())
    assert (workspace.root / "old.txt").read_text() == "old"


def test_the_escaped_name_works_at_the_shell_and_no_read_or_remove_registers_a_thread(
    workspace: Workspace,
):
    paused_by_an_older_version(workspace, "my notes")
    paused_by_an_older_version(workspace, "red\x1b[31malert")

    listed = workspace.invoke(NO_LLM, "", "threads", thread=None)
    assert listed.returncode == 0, listed.stderr
    assert "my%20notes" in listed.stdout and "red%1B%5B31malert" in listed.stdout
    assert "\x1b" not in listed.stdout

    with FakeLLM([text("Understood.")], auto_route="filesystem") as llm:
        denied = workspace.run(
            llm.base_url, "", "deny", "my%20notes", "--reason", "no", thread=None
        )
    assert denied.returncode == 0, denied.stderr
    assert "rejected: call_old" in denied.stdout
    assert not (workspace.root / "old.txt").exists()

    before = asyncio.run(registered(workspace))
    for command in (
        ("threads", "show", "nope"),
        ("threads", "rm", "nope", "-y"),
        ("threads", "reset", "nope"),
        ("deny", "nope"),
        ("approve", "no%20such"),
        ("undo", "nope"),
    ):
        refused = workspace.invoke(NO_LLM, "", *command, thread=None)
        assert refused.returncode == 1, (command, refused.stderr)
        [line] = refused.stderr.splitlines()
        assert line.startswith("fsagent: no thread named '"), line
    assert asyncio.run(registered(workspace)) == before

    # A new thread must follow the rule, at the shell as over HTTP; nothing is stored.
    new = workspace.run(NO_LLM, "hello\n", thread="new notes")
    assert new.returncode == 2, new.stderr  # a usage error
    assert new.stderr.splitlines() == [
        "fsagent: 'new%20notes' is not a thread name (1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit)"
    ]
    assert asyncio.run(registered(workspace)) == before

    # The thread made before the rule is removed by its escaped name.
    removed = workspace.invoke(NO_LLM, "", "threads", "rm", "red%1B%5B31malert", "-y", thread=None)
    assert removed.returncode == 0, removed.stderr
    assert "red%1B%5B31malert" in removed.stdout and "\x1b" not in removed.stdout
    assert sorted(asyncio.run(registered(workspace))) == ["my notes"]
