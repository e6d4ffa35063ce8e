"""The prompt before the imports (issue 31): at a terminal, `you>` comes before the model
server has been asked anything, the banner's model line follows when it is known, and a
line typed before then waits for it under a status line. The real CLI on a pty, and the
stand-in held deterministically: `FakeLLM.bind()` listens (a connection is accepted by the
kernel) but answers nothing until `start()`."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import psycopg
import pytest
from release_files import RELEASE_0_1_0, restore
from thread_folders import LIST, elsewhere, with_root, without_root

from conftest import Workspace, agent_env, tool_messages
from fake_llm import FakeLLM, reply, text, tool_call
from pty_screen import ENTER, PtyScreen
from store.location import shown


def at_a_terminal(workspace: Workspace, llm: FakeLLM, *, exec_: bool = False) -> PtyScreen:
    """fsagent on a pty: forked by the test launcher (its libraries imported there already),
    or with exec_ the real `python agent.py`, imports and all (tests/pty_screen.py)."""
    state = workspace.root.parent / "state"  # the history, kept out of the person's home
    environment = agent_env() | {"XDG_STATE_HOME": str(state)}
    return PtyScreen(workspace.command(llm.base_url), str(workspace.root), environment, exec_=exec_)


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_the_prompt_comes_before_the_model_server_answers(workspace: Workspace):
    llm = FakeLLM([text("Hello there.")], auto_route="general")
    llm.bind()  # listening, answering nothing yet
    try:
        # exec'd: the start itself, from the interpreter's, with every import still to pay.
        screen = at_a_terminal(workspace, llm, exec_=True)
        at = screen.wait_for("you>")
        before = screen.screen_text()[:at]
        assert "Thread 't': new conversation." in before
        assert f"Root: {workspace.root}" in before and "Approval: ask" in before
        assert f"Threads: {shown(workspace.location)}" in before  # which store, said first
        assert "model fake-model" not in before  # the server has not said yet
        screen.type("hello")
        screen.type(ENTER)
        typed = screen.wait_for("you> hello", at - len("you>"))
        screen.wait_for("starting: the model server and the tools", typed)  # a sign of life
        assert llm.requests == []  # nothing was sent: the prompt waits for the start
        llm.start()
        # The status line is gone when the start is done: look from the typed line on.
        at = screen.wait_for("Loaded 20 tools. model fake-model, context unknown", typed)
        at = screen.wait_for("agent> Hello there.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    said = [m["content"] for m in llm.requests_with_tools()[-1]["messages"] if m["role"] == "user"]
    assert said == ["hello"]  # typed before the start was done, sent once after it


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_a_resumed_thread_prompts_before_the_model_server_answers(workspace: Workspace):
    # The thread is read by the store's light reader (psycopg alone on Postgres), so its
    # recap and `you>` need no model server, no LangGraph and no MCP server.
    with FakeLLM([text("The shed needs a roof.")], auto_route="general") as first:
        made = workspace.run(first.base_url, "what does the shed need\n")
        assert made.returncode == 0, made.stderr
    llm = FakeLLM([text("Slate, then.")], auto_route="general")
    llm.bind()  # listening, answering nothing yet
    try:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("\nyou>")
        before = screen.screen_text()[:at]
        assert "Thread 't': resuming, 2 messages." in before
        assert "Last: you> what does the shed need · agent> The shed needs a roof." in before
        assert llm.requests == []  # the model server was not needed for any of it
        screen.enter("slate or tin?")
        typed = screen.wait_for("you> slate or tin?", at - len("you>"))
        llm.start()
        at = screen.wait_for("agent> Slate, then.", typed)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    sent = llm.requests_with_tools()[-1]["messages"]
    said = [(m["role"], m["content"]) for m in sent if m["role"] in ("user", "assistant")]
    assert said == [
        ("user", "what does the shed need"),
        ("assistant", "The shed needs a roof."),
        ("user", "slate or tin?"),
    ]


def test_a_release_0_1_0_thread_is_migrated_first_and_resumed_not_greeted_as_new(
    workspace: Workspace,
):
    # That release made its tables without recording migrations, nor the thread's settings:
    # the file holds a store all the same, which the usual start migrates before the prompt,
    # and its thread is resumed, never greeted early as a new conversation.
    restore(RELEASE_0_1_0, workspace.db)
    with FakeLLM([], auto_route="general") as llm:
        screen = PtyScreen(
            workspace.command(llm.base_url, thread="done"),
            str(workspace.root),
            agent_env() | {"XDG_STATE_HOME": str(workspace.root.parent / "state")},
        )
        at = screen.wait_for("\nyou>")
        before = screen.screen_text()[:at]
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert "Thread 'done': resuming, " in before and "new conversation" not in before
    assert before.startswith("Loaded 20 tools.")  # the usual start, done first


def test_a_postgres_server_that_is_not_there_is_one_line_and_no_prompt(workspace: Workspace):
    # The early look connects first: a server that refuses is said once, as the store says
    # it, and nothing is prompted for (a prompt whose line could never be sent).
    workspace.database_url = "postgresql://fsagent@127.0.0.1:1/threads"
    llm = FakeLLM([], auto_route="general")
    llm.bind()
    try:
        screen = at_a_terminal(workspace, llm)
        code = screen.close()
    finally:
        llm.stop()

    shown = screen.screen_text()
    assert code == 2, shown  # cannot start: a database it cannot use (README's exit codes)
    assert shown == (
        "fsagent: cannot connect to Postgres at postgresql://fsagent@127.0.0.1:1/threads: "
        "Connection refused; start the server or pass another --db"
    )
    assert llm.requests == []


def test_the_model_line_comes_above_a_prompt_being_typed(workspace: Workspace):
    llm = FakeLLM([text("Noted.")], auto_route="general")
    llm.bind()
    try:
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("you>")
        screen.type("half a thou")  # still typing when the model is known
        llm.start()
        # Printed where the prompt was, which is drawn again below it.
        loaded = screen.wait_for("Loaded 20 tools. model fake-model", at - len("you>"))
        screen.wait_for("you> half a thou", loaded)  # with what was typed kept
        screen.type("ght")
        screen.type(ENTER)
        at = screen.wait_for("agent> Noted.", loaded)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
    finally:
        llm.stop()

    assert code == 0, screen.screen_text()
    said = [m["content"] for m in llm.requests_with_tools()[-1]["messages"] if m["role"] == "user"]
    assert said == ["half a thought"]


def test_a_start_that_fails_after_a_line_was_typed_says_it_was_not_sent(workspace: Workspace):
    llm = FakeLLM([], auto_route="general")
    llm.bind()
    screen = at_a_terminal(workspace, llm)
    at = screen.wait_for("you>")
    screen.type("tidy the notes")
    screen.type(ENTER)
    typed = screen.wait_for("you> tidy the notes", at - len("you>"))
    screen.wait_for("starting: the model server and the tools", typed)
    llm.stop()  # the model server goes away before it answered
    at = screen.wait_for("fsagent: not sent: 'tidy the notes'", typed)
    screen.wait_for("fsagent: cannot reach the model server", at)
    code = screen.close()

    assert code != 0
    assert not workspace.db.exists()  # a start that failed leaves no thread file behind


def test_a_thread_waiting_for_approval_is_asked_about_before_any_prompt(workspace: Workspace):
    write = {"path": "hello.txt", "content": "hi\n"}
    script = [reply(tool_calls=[tool_call("write_file", write)]), text("Done.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        paused = workspace.run(llm.base_url, "write hello\n")
        assert paused.returncode == 3, paused.stderr
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("paused: waiting for your approval of write_file")
        at = screen.wait_for("write_file? [y/n/e/a/r/?]", at)
        asked_first = screen.screen_text()[:at].splitlines()
        assert not any(line.startswith("you>") for line in asked_first)  # the approval first
        screen.type("y")
        screen.type(ENTER)
        at = screen.wait_for("agent> Done.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert (workspace.root / "hello.txt").read_text() == "hi\n"


def test_a_resumed_thread_gets_the_same_recap_before_the_prompt(workspace: Workspace):
    with FakeLLM([text("The shed needs a roof."), text("Yes.")], auto_route="general") as llm:
        first = workspace.run(llm.base_url, "what does the shed need\n")
        assert first.returncode == 0, first.stderr
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("\nyou>")  # the prompt, not the recap's
        before = screen.screen_text()[:at]
        assert "Thread 't': resuming, 2 messages." in before
        assert "Last: you> what does the shed need · agent> The shed needs a roof." in before
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_a_thread_resumed_without_root_prompts_early_in_its_own_roots(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi."), LIST, text("Listed.")], auto_route="filesystem") as llm:
        assert workspace.run(llm.base_url, "hello\n").returncode == 0
        command = without_root(workspace, llm.base_url)
        screen = PtyScreen(command, str(other), agent_env() | {"XDG_STATE_HOME": str(other)})
        at = screen.wait_for("\nyou>")
        assert f"Root: {workspace.root.resolve()} (this thread's)" in screen.screen_text()[:at]
        screen.enter("what is here?")
        at = screen.wait_for("agent> Listed.", at)
        screen.wait_for("you>", at)
        screen.enter("/quit")
        code = screen.close()
        [listing] = tool_messages(llm.requests_with_tools()[-1])

    assert code == 0, screen.screen_text()
    assert "notes.md" in listing["content"] and "Makefile" not in listing["content"]


def test_other_roots_are_asked_about_before_any_prompt(workspace: Workspace):
    other = elsewhere(workspace)
    with FakeLLM([text("Hi.")], auto_route="general") as llm:
        assert workspace.run(llm.base_url, "hello\n").returncode == 0
        command = with_root(workspace.command(llm.base_url), other)
        screen = PtyScreen(command, str(other), agent_env() | {"XDG_STATE_HOME": str(other)})
        at = screen.wait_for("Act in the roots given for this session? [y/N]")
        assert not any(line.startswith("you>") for line in screen.screen_text()[:at].splitlines())
        screen.enter("")
        code = screen.close()

    assert code == 2, screen.screen_text()


def test_a_thread_with_grants_says_them_before_the_prompt(workspace: Workspace):
    write = {"path": "docs/a.md", "content": "a\n"}
    script = [reply(tool_calls=[tool_call("write_file", write)]), text("a done")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        granted = workspace.run(llm.base_url, "write a\na\n")  # a: approve, and grant the like
        assert granted.returncode == 0, granted.stderr
        screen = at_a_terminal(workspace, llm)
        at = screen.wait_for("\nyou>")
        before = screen.screen_text()[:at]
        screen.enter("/quit")
        code = screen.close()

    assert code == 0, screen.screen_text()
    assert "Grants in this thread" in before and "1. write_file inside docs/" in before


def test_a_sqlite_file_of_something_else_is_refused_before_any_prompt(workspace: Workspace):
    # Not a store yet, but not empty either: the start refuses it, so no prompt is offered
    # for a line that could never be sent.
    with closing(sqlite3.connect(workspace.db)) as conn, conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = workspace.db.read_bytes()
    with FakeLLM([], auto_route="general") as llm:
        screen = at_a_terminal(workspace, llm)
        code = screen.close()

    shown_text = screen.screen_text()
    assert code == 2, shown_text
    assert "you>" not in shown_text and "new conversation" not in shown_text
    said = (
        f"fsagent: {workspace.db} is a SQLite database of something else (tables: notes), not "
        "an fsagent threads file; it was left untouched. Pass another --db"
    )
    assert shown_text == said
    assert workspace.db.read_bytes() == before


def on_store(workspace: Workspace, statement: str, params: tuple[str, ...] = ()) -> list[tuple]:
    """One statement on the workspace's store, behind fsagent's back (a hand edit)."""
    if workspace.database_url is None:
        with closing(sqlite3.connect(workspace.db)) as conn, conn:
            return conn.execute(statement, params).fetchall()
    with psycopg.connect(workspace.database_url, autocommit=True) as pg:
        found = pg.execute(statement.replace("?", "%s"), params)
        return found.fetchall() if found.description else []


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("settings", ["[1]", "{not json"])
def test_settings_that_are_not_readable_are_one_line_and_the_thread_is_kept(
    workspace: Workspace, settings: str
):
    # A hand-edited or hostile store: said once, at a terminal (the early look) and in a pipe
    # (the usual start) alike, with nothing changed; the store's other threads still open.
    with FakeLLM([text("Hi."), text("Hello.")], auto_route="general") as llm:
        assert workspace.run(llm.base_url, "hello\n").returncode == 0
        on_store(workspace, "UPDATE fsagent_threads SET settings = ? WHERE name = 't'", (settings,))
        screen = at_a_terminal(workspace, llm)
        code = screen.close()
        piped = workspace.run(llm.base_url, "hello again\n")
        other = workspace.run(llm.base_url, "hello\n", thread="other")
        history = workspace.invoke(llm.base_url, "", "threads", "show", "t", thread=None)

    line = (
        f"fsagent: thread 't' in {shown(workspace.location)}: its recorded settings are not "
        f"readable ({settings!r}); open another thread (--thread NAME) or restore it from a "
        "backup"
    )
    assert code == 2 and screen.screen_text() == line
    assert piped.returncode == 2 and piped.stderr.splitlines() == [line]
    assert other.returncode == 0, other.stderr
    assert "agent> Hello." in other.stdout
    kept = on_store(workspace, "SELECT settings FROM fsagent_threads WHERE name = 't'")
    assert kept == [(settings,)]
    assert "you> hello" in history.stdout and "agent> Hi." in history.stdout  # messages kept
    assert "hello again" not in history.stdout
