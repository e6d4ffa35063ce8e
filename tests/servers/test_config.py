"""The other servers' configuration (core/servers/config.py) and a project's acceptance
(core/servers/acceptance.py), read from real files on temp folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import StartupError
from core.servers import acceptance
from core.servers.config import configured_servers, filled_headers, servers_in_json
from core.user_config import load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def refusal(user: Path, project: Path | None = None, json_file: Path | None = None) -> str:
    with pytest.raises(StartupError) as caught:
        configured_servers(user, project, json_file)
    line = str(caught.value)
    assert "\n" not in line
    return line


def test_a_stdio_and_an_http_server_from_config_toml(tmp_path: Path) -> None:
    user = write(
        tmp_path / "config.toml",
        'model = "qwen"\n'
        "[mcp_servers.git]\n"
        'command = "mcp-server-git"\nargs = ["--repository", "."]\n'
        'env = { GIT_AUTHOR_NAME = "me" }\ncwd = "/tmp"\nexclude_tools = ["git_reset"]\n'
        "[mcp_servers.notes]\n"
        'url = "https://notes.example/mcp"\n'
        'headers = { Authorization = "Bearer ${NOTES_TOKEN}" }\nenabled = false\n',
    )
    git, notes = configured_servers(user, None, None)
    assert (git.transport, git.command, git.args) == (
        "stdio",
        "mcp-server-git",
        ("--repository", "."),
    )
    assert git.env == {"GIT_AUTHOR_NAME": "me"} and git.cwd == "/tmp"
    assert git.offers("git_status") and not git.offers("git_reset")
    assert (git.network, git.sandbox, git.enabled, git.origin) == (False, True, True, "user")
    assert (notes.transport, notes.url, notes.enabled) == (
        "http",
        "https://notes.example/mcp",
        False,
    )
    assert filled_headers(notes, {"NOTES_TOKEN": "s3"}) == {"Authorization": "Bearer s3"}
    # The rest of the file is still the person's defaults.
    config_home = tmp_path / "home"
    write(config_home / "fsagent" / "config.toml", user.read_text())
    assert load_config({"XDG_CONFIG_HOME": str(config_home)}).get("model") == "qwen"


def test_a_header_never_holds_its_secret_and_a_missing_variable_is_said(tmp_path: Path) -> None:
    user = write(
        tmp_path / "config.toml",
        '[mcp_servers.notes]\nurl = "https://n.example/mcp"\n'
        'headers = { Authorization = "Bearer abc123" }\n',
    )
    line = refusal(user)
    assert line.startswith(f"{user}: mcp_servers.notes.headers.Authorization: ")
    assert "environment variable" in line
    write(user, '[mcp_servers.notes]\nurl = "https://n.example/mcp"\nheaders = {X = "${NOPE}"}\n')
    (notes,) = configured_servers(user, None, None)
    with pytest.raises(StartupError, match="NOPE is not set"):
        filled_headers(notes, {})


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ('command = "x"\nnetwork = "yes"', "network", "not true or false"),
        ('command = "x"\nargs = "a b"', "args", "not a list of strings"),
        ('command = "x"\nsandbox = 1', "sandbox", "not true or false"),
        ('command = "x"\nurl = "http://a"', "url", "not both"),
        ('command = "x"\ncolour = "red"', "colour", "not a setting fsagent knows"),
        ('command = ""', "command", "not a non-empty string"),
        ('url = "ftp://a"', "url", "not an http"),
        ('args = ["a"]', None, "give a command"),
        ('command = "x"\nstartup_timeout = 0', "startup_timeout", "above 0"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, entry: str, key: str | None, words: str
) -> None:
    user = write(tmp_path / "config.toml", f"[mcp_servers.git]\n{entry}\n")
    line = refusal(user)
    where = "mcp_servers.git" + (f".{key}" if key else "")
    assert line.startswith(f"{user}: {where}: ")
    assert words in line and line.endswith("fix it or remove it")


def test_a_name_that_would_break_the_tool_names_is_refused(tmp_path: Path) -> None:
    user = write(tmp_path / "config.toml", '[mcp_servers.my__git]\ncommand = "x"\n')
    assert "without '__'" in refusal(user)


def test_the_common_json_of_lm_studio_and_claude(tmp_path: Path) -> None:
    mcp_json = write(
        tmp_path / "mcp.json",
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
                    "remote": {"type": "http", "url": "http://localhost:9/mcp"},
                }
            }
        ),
    )
    time, remote = servers_in_json(mcp_json)
    assert (time.transport, time.args, time.origin) == (
        "stdio",
        ("--local-timezone", "UTC"),
        "flag",
    )
    assert (remote.transport, remote.url) == ("http", "http://localhost:9/mcp")
    write(mcp_json, json.dumps({"mcpServers": {"old": {"type": "sse", "url": "http://a/sse"}}}))
    line = refusal(tmp_path / "none.toml", json_file=mcp_json)
    assert line.startswith(f"{mcp_json}: mcp_servers.old.type: ") and "streamable http" in line
    write(mcp_json, '{"servers": {}}')
    assert '"mcpServers"' in refusal(tmp_path / "none.toml", json_file=mcp_json)


def test_a_project_adds_servers_and_never_replaces_the_persons(tmp_path: Path) -> None:
    user = write(tmp_path / "config.toml", '[mcp_servers.git]\ncommand = "mcp-server-git"\n')
    project = write(tmp_path / "repo" / "fsagent.toml", '[mcp_servers.git]\ncommand = "evil"\n')
    line = refusal(user, project)
    assert line.startswith(f"{project}: mcp_servers.git: ") and "never replaces" in line


def test_a_projects_server_starts_only_once_accepted_as_written(tmp_path: Path) -> None:
    record = tmp_path / "data" / "fsagent" / acceptance.RECORD
    project = write(tmp_path / "repo" / "fsagent.toml", '[mcp_servers.tools]\ncommand = "a"\n')
    user = tmp_path / "config.toml"  # absent: no servers of the person's own
    (spec,) = configured_servers(user, project, None)
    assert spec.origin == "project"
    assert acceptance.unaccepted([spec], acceptance.read_record(record)) == [spec]
    acceptance.accept(spec, record)
    assert acceptance.unaccepted([spec], acceptance.read_record(record)) == []
    # One more argument is another entry: asked again, and said to have changed.
    write(project, '[mcp_servers.tools]\ncommand = "a"\nargs = ["--all"]\n')
    (changed,) = configured_servers(user, project, None)
    now = acceptance.read_record(record)
    assert acceptance.unaccepted([changed], now) == [changed]
    assert acceptance.was_changed(changed, now)
    # Taken back: asked again.
    acceptance.accept(changed, record)
    assert acceptance.forget(changed, record)
    assert acceptance.unaccepted([changed], acceptance.read_record(record)) == [changed]


def test_the_persons_own_servers_need_no_acceptance(tmp_path: Path) -> None:
    user = write(tmp_path / "config.toml", '[mcp_servers.git]\ncommand = "mcp-server-git"\n')
    (spec,) = configured_servers(user, None, None)
    assert acceptance.unaccepted([spec], {}) == []


def test_a_broken_record_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    record = write(tmp_path / acceptance.RECORD, "{not json")
    with pytest.raises(StartupError, match="delete it"):
        acceptance.read_record(record)
