"""The admin API's diff keys (issue 32), against a real `fsagent serve`: a cut rewrite's
listing carries the whole diff's totals, a first view with added lines and its changed words,
under the very preview_id its whole pages have, and a yes with that id writes the file."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from langchain_core.messages import ToolCall

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import ADMIN, JSON, ServeProcess, approve_shown, by_request, serving
from web.payloads import drawn_diff


def test_a_cut_rewrite_is_listed_with_totals_a_first_view_and_words_under_its_binding(
    workspace: Workspace,
):
    big = workspace.root / "big.txt"
    big.write_text("".join(f"old line {n}\n" for n in range(2000)))
    new = "".join(f"new line {n}\n" for n in range(2000))
    call = tool_call("write_file", {"path": "big.txt", "content": new}, id="c_big")
    script = by_request({"rewrite": [reply(tool_calls=[call]), text("Rewritten.")]})
    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        url = served.url
        said = httpx.post(f"{url}/api/threads/t/messages", json={"text": "rewrite"}, timeout=60)
        assert said.status_code == 200, said.text
        listed = httpx.get(f"{url}/api/admin/approvals", headers=ADMIN, timeout=60).json()
        [shown] = listed["approvals"][0]["calls"]
        assert shown["diff_totals"] == {"added": 2000, "removed": 2000}
        first = shown["preview_first"]
        assert "+new line 0" in first and "-old line 0" in first
        assert "more lines not shown" in first[-1]
        at = first.index("+new line 0")
        assert shown["preview_words"][str(at)] == [[0, 3]]  # "new"
        assert not any(line.startswith("+") for line in shown["preview"][3:-1])  # the old cut
        page = httpx.post(
            f"{url}/api/admin/approvals/t/preview",
            json={"call_id": "c_big", "offset": 0},
            headers={**ADMIN, **JSON},
            timeout=60,
        ).json()
        assert page["preview_id"] == shown["preview_id"]
        assert page["totals"] == {"added": 2000, "removed": 2000}
        assert page["lines"][3] == "-old line 0" and page["words"]["3"] == [[0, 3]]  # "old"
        decided = httpx.post(
            f"{url}/api/admin/approvals/t",
            json=approve_shown(listed, "t"),
            headers={**ADMIN, **JSON},
            timeout=60,
        )
        assert decided.status_code == 200, decided.text
        served.kill()
    assert big.read_text() == new


def test_a_first_view_of_another_state_than_the_preview_drawn_is_not_sent(workspace: Workspace):
    """The first view is the whole preview read again: if the file changed since the cut
    preview was read, the two show different states, and the page gets no first view (it
    would draw a state its yes does not bind to)."""
    big = workspace.root / "big.txt"
    big.write_text("".join(f"old line {n}\n" for n in range(2000)))
    new = "".join(f"new line {n}\n" for n in range(2000))
    call = tool_call("write_file", {"path": "big.txt", "content": new}, id="c_big")
    script = by_request({"rewrite": [reply(tool_calls=[call]), text("Rewritten.")]})

    async def check(base_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        async with serving(workspace, base_url) as served:
            await served.say("t", "rewrite")
            session = await served.app.state.service.session("t")
            waiting = ToolCall(
                name="write_file", args={"path": "big.txt", "content": new}, id="c_big"
            )
            shown = await session.preview(waiting)
            same = await drawn_diff(session, waiting, shown)
            big.write_text("".join(f"other line {n}\n" for n in range(2000)))
            return same, await drawn_diff(session, waiting, shown)

    with FakeLLM(script, auto_route="filesystem") as llm:
        same, changed = asyncio.run(check(llm.base_url))

    assert "+new line 0" in same["preview_first"]  # the control: one state, a first view
    assert "preview_first" not in changed and "diff_totals" not in changed
    assert big.read_text().startswith("other line 0")  # and nothing was written


def test_the_listing_marks_look_alikes_and_whitespace_where_they_are(workspace: Workspace):
    """Issue 41: the inbox gets the characters the terminal names (core/changes/marks.py),
    each where it is in code points and in UTF-16 units (the page counts the latter: after
    five emoji the two differ by five)."""
    conf = workspace.root / "pip.conf"
    conf.write_text("😀😀😀😀😀 index = https://pypi.org/simple\n")
    new = "😀😀😀😀😀 index = https://руpi.org/simple \n"
    call = tool_call("write_file", {"path": "pip.conf", "content": new}, id="c_conf")
    script = by_request({"swap": [reply(tool_calls=[call]), text("Swapped.")]})

    async def listed(base_url: str) -> dict[str, Any]:
        async with serving(workspace, base_url) as served:
            await served.say("t", "swap")
            answer = await served.client.get("/api/admin/approvals", headers=ADMIN)
            return answer.json()

    with FakeLLM(script, auto_route="filesystem") as llm:
        [shown] = asyncio.run(listed(llm.base_url))["approvals"][0]["calls"]

    at = next(i for i, line in enumerate(shown["preview"]) if line.startswith("+😀"))
    line = shown["preview"][at]
    assert line.endswith("simple·")
    flags = shown["preview_flags"][str(at)]
    er = line.index("р") - 1  # in the text after the sign
    assert [(f["at"], f["at16"], f["code"], f["kind"]) for f in flags] == [
        (er, er + 5, "U+0440", "look-alike"),
        (er + 1, er + 6, "U+0443", "look-alike"),
        (len(line) - 2, len(line) - 2 + 5, "U+0020", "space"),
    ]
    warning = "⚠ look-alike characters (+): р U+0440"
    assert any(text.startswith(warning) for text in shown["preview"])
    assert conf.read_text().startswith("😀😀😀😀😀 index = https://pypi")
