"""What a newcomer reaches for first, through the real command line: --version, -p, a
mistyped command, a base URL without a scheme, each command's own flags, one exit code for
every usage error, where threads live and the config file.

Where the process boundary is not what a test is about, `agent.main` runs in-process; a
session runs as the real CLI in a subprocess, on the real MCP server and the HTTP stand-in of
the model server.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from cli_runner import invoke
from conftest import AGENT, Workspace, agent_env
from fake_llm import FakeLLM, reply, text, tool_call


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """`fsagent ARGV` in this process (tests/cli_runner.py), in the test's own environment
    and folder: its exit code, stdout and stderr."""
    done = invoke(argv)
    return done.returncode, done.stdout, done.stderr


def write_hello() -> dict:
    return reply(tool_calls=[tool_call("write_file", {"path": "hello.txt", "content": "hello"})])


# --- --version, usage errors ---------------------------------------------------------------------


def test_version_is_the_package_version_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, agent\n"
        "try:\n    agent.main(['--version'])\nexcept SystemExit as e:\n    rc = e.code\n"
        "heavy = [m for m in ('langgraph', 'langchain_core', 'mcp', 'httpx') if m in sys.modules]\n"
        "print('heavy:', heavy, 'rc:', rc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=AGENT.parent,
        env=agent_env(),
    )
    assert done.stdout.splitlines() == [f"fsagent {version('fsagent')}", "heavy: [] rc: 0"]


def test_a_mistyped_command_gets_one_line_with_the_nearest_one() -> None:
    code, out, err = run_main(["treads"])
    assert (code, out) == (2, "")
    assert err.splitlines() == ["fsagent: unknown command 'treads'; did you mean 'threads'?"]


def test_a_prompt_typed_without_p_is_not_taken_for_a_command() -> None:
    code, _, err = run_main(["fix the failing test"])
    assert code == 2
    assert err.splitlines() == [
        "fsagent: unknown command 'fix the failing test'; to send it as a prompt: "
        "fsagent -p 'fix the failing test'"
    ]


def test_a_flag_a_command_does_not_use_is_refused_by_name(tmp_path: Path) -> None:
    db = str(tmp_path / "threads.db")
    code, out, err = run_main(["threads", "--db", db, "--transcript", "x.jsonl", "--model", "zzz"])
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "fsagent: threads does not take --transcript, --model (see fsagent threads --help)"
    ]
    assert not (tmp_path / "x.jsonl").exists() and not Path("x.jsonl").exists()
    # Before the command's name an option is a shared setting, read by the commands that use
    # it (as FSAGENT_* variables are): scripts pass one set to every command.
    code, out, _ = run_main(["--model", "zzz", "--db", db, "threads"])
    assert (code, out) == (0, f"No threads in {db} (the file does not exist yet).\n")


def test_each_command_s_help_lists_its_own_flags_only() -> None:
    helps = {}
    for command in ("threads", "approvals", "audit", "undo", "approve", "serve"):
        code, out, _ = run_main([command, "--help"])
        assert code == 0
        helps[command] = out
    for command in ("threads", "approvals", "audit"):
        flags = {word for word in helps[command].split() if word.startswith("--")}
        assert flags <= {"--help", "--db", "--verbose", "--yes", "--json", "--thread"}, command
        assert "exit codes: 0 finished" in helps[command]
    assert "--base-url" not in helps["undo"] and "--root" in helps["undo"]
    assert "--base-url" in helps["approve"] and "--transcript" not in helps["approve"]
    assert "--transcript" not in helps["serve"] and "--read-only" in helps["serve"]


def test_help_says_what_the_reply_limit_really_is() -> None:
    from core.context.budget import MAX_REPLY_TOKENS, default_max_tokens

    _, out, _ = run_main(["--help"])
    words = " ".join(out.split())
    assert "an eighth of the context, at most 1024" in words
    assert default_max_tokens(4096) == 4096 // 8 and MAX_REPLY_TOKENS == 1024
    assert default_max_tokens(100_000) == 1024


@pytest.mark.parametrize(
    "argv",
    [
        ["threads", "show"],
        ["threads", "rm"],
        ["threads", "show", "t", "extra"],
        ["-p", "hello", "threads"],
    ],
)
def test_every_usage_error_exits_2(argv: list[str], tmp_path: Path) -> None:
    code, _, err = run_main(["--db", str(tmp_path / "threads.db"), *argv])
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("fsagent: ")


def test_a_bad_thread_name_exits_2_and_stores_nothing(workspace: Workspace) -> None:
    with FakeLLM([text("never")]) as llm:
        result = workspace.run(llm.base_url, "hello\n", thread="bad name")
        assert llm.requests == []
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "fsagent: 'bad%20name' is not a thread name (1-64 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit)"
    ]
    assert not workspace.db.exists()


# --- the base URL ---------------------------------------------------------------------------------


def test_a_base_url_without_a_scheme_is_taken_as_http(workspace: Workspace) -> None:
    with FakeLLM([text("Hi there.")], auto_route="filesystem") as llm:
        bare = llm.base_url.removeprefix("http://").removesuffix("/v1")  # 127.0.0.1:PORT
        result = workspace.run(bare, "hello\n")
    assert result.returncode == 0, result.stderr
    assert "agent> Hi there." in result.stdout


@pytest.mark.parametrize("given", ["ftp://host/v1", "http://", "localhost:port"])
def test_a_base_url_that_is_no_server_s_is_refused_by_name(given: str) -> None:
    code, _, err = run_main(["--base-url", given, "threads", "show", "t"])
    assert code == 2
    assert err.splitlines() == [
        f"fsagent: --base-url {given!r}: not a model server's URL; pass one like "
        "http://localhost:1234/v1"
    ]


# --- -p ------------------------------------------------------------------------------------------


def test_p_from_a_pipe_pauses_at_a_write_and_names_the_answer(workspace: Workspace) -> None:
    with FakeLLM([write_hello(), text("never")], auto_route="filesystem") as llm:
        # A line on stdin is not read as an answer: -p asks at a terminal only.
        result = workspace.run(llm.base_url, "y\n", "-p", "create hello.txt")
        assert len(llm.requests_with_tools()) == 1
    assert result.returncode == 3, result.stderr
    assert not (workspace.root / "hello.txt").exists()
    assert (
        "Left paused: nothing was run. Answer it with `fsagent approve t` "
        "(or `fsagent deny t`), or open the thread again." in result.stdout
    )
    assert "Type a prompt" not in result.stdout


def test_p_runs_one_turn_under_approve_yes_and_exits_0(workspace: Workspace) -> None:
    script = [write_hello(), text("Created hello.txt.")]
    with FakeLLM(script, auto_route="filesystem") as llm:
        result = workspace.run(
            llm.base_url, "another prompt\n", "-p", "create hello.txt", "--approve", "yes"
        )
        prompts = [m for r in llm.requests for m in r["messages"] if m.get("role") == "user"]
    assert result.returncode == 0, result.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"
    assert "agent> Created hello.txt." in result.stdout
    assert not any("another prompt" in str(m.get("content")) for m in prompts)  # stdin unread


def test_a_piped_session_prints_no_keyboard_hint(workspace: Workspace) -> None:
    with FakeLLM([text("Hi.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, "hello\n")
    assert result.returncode == 0, result.stderr
    assert "Type a prompt" not in result.stdout and "/quit" not in result.stdout


# --- where threads live ---------------------------------------------------------------------------


def session(base_url: str, cwd: Path, stdin: str, *args: str, env: dict | None = None):
    """A piped session with no --db, started in `cwd` (the agent's root)."""
    return subprocess.run(
        [sys.executable, str(AGENT), "--base-url", base_url, "--thread", "t", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**agent_env(), **(env or {})},
    )


def test_threads_live_in_the_data_folder_and_every_folder_sees_them(
    tmp_path: Path, own_xdg_folders: Path, monkeypatch
) -> None:
    data = own_xdg_folders / "data" / "fsagent" / "threads.db"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with FakeLLM([text("Hi.")], auto_route="filesystem") as llm:
        result = session(llm.base_url, first, "hello\n")
    assert result.returncode == 0, result.stderr
    assert data.is_file() and not (first / "threads.db").exists()
    assert f"Threads: {data}" in result.stdout  # the banner's status line names the file
    monkeypatch.chdir(second)
    code, out, _ = run_main(["threads"])
    assert code == 0 and out.splitlines()[1].split()[0] == "t"


def test_a_threads_db_here_is_still_used_with_a_note_on_moving_it(
    tmp_path: Path, own_xdg_folders: Path, monkeypatch
) -> None:
    here = tmp_path / "project"
    here.mkdir()
    with FakeLLM([text("Hi.")], auto_route="filesystem") as llm:
        made = session(llm.base_url, here, "hello\n", "--db", str(here / "threads.db"))
    assert made.returncode == 0, made.stderr
    monkeypatch.chdir(here)
    code, out, err = run_main(["threads"])
    data = own_xdg_folders / "data" / "fsagent" / "threads.db"
    assert code == 0 and out.splitlines()[1].split()[0] == "t"
    assert err.splitlines() == [
        f"fsagent: using {here / 'threads.db'}, found in this folder; to see its threads from "
        f"every folder, move it: mkdir -p {data.parent} && mv {here / 'threads.db'} {data} "
        f"(or pass --db {here / 'threads.db'})"
    ]
    assert not data.exists()


def test_db_and_fsagent_db_override_the_config_file(
    tmp_path: Path, own_xdg_folders: Path, monkeypatch
) -> None:
    config = own_xdg_folders / "config" / "fsagent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'db = "{tmp_path / "configured.db"}"\n')
    _, out, _ = run_main(["threads"])
    assert out == f"No threads in {tmp_path / 'configured.db'} (the file does not exist yet).\n"
    monkeypatch.setenv("FSAGENT_DB", str(tmp_path / "env.db"))
    _, out, _ = run_main(["threads"])
    assert out == f"No threads in {tmp_path / 'env.db'} (the file does not exist yet).\n"
    _, out, _ = run_main(["threads", "--db", str(tmp_path / "flag.db")])
    assert out == f"No threads in {tmp_path / 'flag.db'} (the file does not exist yet).\n"


# --- the config file ------------------------------------------------------------------------------


def test_the_config_file_sets_the_server_the_model_the_mode_and_the_reply_limit(
    workspace: Workspace, own_xdg_folders: Path
) -> None:
    config = own_xdg_folders / "config" / "fsagent" / "config.toml"
    config.parent.mkdir(parents=True)
    script = [write_hello(), text("Created hello.txt.")]
    with FakeLLM(script, models=("small", "big"), auto_route="filesystem") as llm:
        config.write_text(
            f'base_url = "{llm.base_url}"\nmodel = "big"\napprove = "yes"\nmax_tokens = 77\n'
        )
        result = subprocess.run(
            [sys.executable, str(AGENT), "--root", str(workspace.root), "--db", str(workspace.db),
             "-p", "create hello.txt"],
            capture_output=True, text=True, timeout=60, cwd=workspace.root, env=agent_env(),
        )  # fmt: skip
        requests, agent_requests = llm.requests, llm.requests_with_tools()
    assert result.returncode == 0, result.stderr
    assert (workspace.root / "hello.txt").read_text() == "hello"  # approve = "yes"
    assert {r["model"] for r in requests} == {"big"}
    assert {r.get("max_tokens") for r in agent_requests} == {77}  # the router's is its own


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("model = \n", "not valid TOML (Invalid value (at line 1, column 9))"),
        ('modle = "x"\n', "modle: not a setting fsagent knows (it knows base_url, model, db, "
         "approve, max_tokens)"),
        ("max_tokens = \"many\"\n", "max_tokens: 'many' is not a whole number of tokens"),
        ("max_tokens = true\n", "max_tokens: True is not a whole number of tokens"),
        ('approve = "always"\n', "approve: 'always' is not one of ask, yes, no"),
        ("base_url = 5\n", "base_url: 5 is not a string"),
    ],
)  # fmt: skip
def test_a_bad_config_file_is_one_line_naming_the_file_and_the_key(
    content: str, says: str, own_xdg_folders: Path, tmp_path: Path
) -> None:
    config = own_xdg_folders / "config" / "fsagent" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(content)
    code, out, err = run_main(["--db", str(tmp_path / "t.db"), "threads"])
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"fsagent: {config}: {says}; fix it or remove it"]


# --- errors name the server in use ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flavour", "name"),
    [("ollama", "Ollama"), ("llamacpp", "llama.cpp"), ("openai", "the model server")],
)
def test_a_server_error_names_the_kind_of_server_in_use(
    flavour: str, name: str, workspace: Workspace
) -> None:
    failing = reply(status=500, error="out of memory")
    with FakeLLM([text("general"), failing], flavour=flavour, context=8192) as llm:
        result = workspace.run(llm.base_url, "hello\n")
        url = llm.base_url
    assert f"error: {name} at {url} answered 500: out of memory" in result.stdout
    assert "LM Studio" not in result.stdout + result.stderr


def test_a_resumed_thread_recaps_the_last_exchange(workspace: Workspace) -> None:
    script = [text("Hi there.\nA second line."), write_hello()]
    with FakeLLM(script, auto_route="filesystem") as llm:
        first = workspace.run(llm.base_url, "hello " + "x" * 100 + "\n")
        again = workspace.run(llm.base_url, "")
        workspace.run(llm.base_url, "create hello.txt\n")  # left paused at the write
        paused = workspace.run(llm.base_url, "")
    assert first.returncode == 0, first.stderr
    assert f"Last: you> hello {'x' * 64}… (+36 chars) · agent> Hi there." in again.stdout
    assert "A second line" not in again.stdout
    # Paused, it recaps the prompt; the banner says what the thread waits on.
    assert "Last: you> create hello.txt\n" in paused.stdout
    assert "paused: waiting for your approval of write_file" in paused.stdout


# --- a huge paste ---------------------------------------------------------------------------------


def test_a_huge_prompt_is_echoed_as_its_size_and_warned_about_once(workspace: Workspace) -> None:
    huge = "word " * 30_000  # 150,000 bytes on one line: ~50,000 estimated tokens
    with FakeLLM([text("Read it."), text("Again.")], auto_route="filesystem") as llm:
        result = workspace.run(llm.base_url, f"{huge}\n{huge}\n")
        sent = [m["content"] for r in llm.requests_with_tools() for m in r["messages"]
                if m.get("role") == "user"]  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("you> pasted 1 line (146 KB)") == 2
    assert "word word word" not in result.stdout
    warnings = [line for line in result.stdout.splitlines() if "context is unknown" in line]
    assert warnings == [
        "⚠ this prompt is ~50,000 tokens and the model's context is unknown; the server may "
        "cut or refuse it (pass --context-length N to have it checked)"
    ]
    assert huge.strip() in [str(content).strip() for content in sent]  # sent whole


def test_a_paste_that_cannot_fit_a_known_context_is_not_sent(workspace: Workspace) -> None:
    with FakeLLM([text("never")], flavour="llamacpp", context=4096) as llm:
        result = workspace.run(llm.base_url, "x" * 50_000 + "\n")
        assert [r for r in llm.requests if "x" * 100 in str(r)] == []
    assert "you> pasted 1 line (49 KB)" in result.stdout
    assert "context is unknown" not in result.stdout
    assert "does not fit" in result.stdout + result.stderr, result.stdout


def test_threads_names_the_store_it_lists(workspace: Workspace) -> None:
    with FakeLLM([text("Hi."), text("Hello.")], auto_route="general") as llm:
        assert workspace.run(llm.base_url, "hello\n", thread="one").returncode == 0
        assert workspace.run(llm.base_url, "hi\n", thread="two").returncode == 0
    listed = invoke(["threads", "--db", str(workspace.db)], env=agent_env(), cwd=workspace.outside)

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "MESSAGES", "LAST", "ACTIVITY", "STATUS"]
    assert [line.split()[0] for line in lines[1:3]] == ["one", "two"]
    assert lines[-1] == f"2 threads in {workspace.db}"  # which file, when a person has several
