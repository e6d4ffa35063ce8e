"""The inbox page in a real browser: Debian's headless Chromium driven by Playwright (never
`playwright install`: `make test` installs the chromium package), against a real `fsagent
serve` process. A person chats a request that pauses, enters the token, sees the pending
calls' diffs, rejects one with a reason, approves the other and reads the answer; then the
files on disk are checked."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
from chromium import BrowserThread

from conftest import Workspace, tool_messages, tree_snapshot
from fake_llm import FakeLLM, reply, text, tool_call
from serving import (
    LISTING,
    TOKEN,
    ServeProcess,
    approve_over_http,
    by_request,
    held_refreshes,
)

NO_LLM = "http://127.0.0.1:9/v1"
DOCS = Path(__file__).resolve().parents[2] / "docs"  # the README shows the page from here


def test_review_a_batch_in_the_inbox_page(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    (workspace.root / "b.txt").write_text("old line\nkept\n")
    before_outside = tree_snapshot(workspace.outside)
    calls = [
        tool_call("write_file", {"path": "a.txt", "content": "a new file\n"}, id="call_a"),
        tool_call("write_file", {"path": "b.txt", "content": "new line\nkept\n"}, id="call_b"),
    ]
    answer = "b.txt now starts with 'new line'; a.txt was not created."
    script = [reply(tool_calls=calls), text(answer)]

    async def click_through(url: str, llm: FakeLLM) -> None:
        page = await browser.tab()
        try:
            # The chat view: the request streams until it is queued for review.
            await page.goto(f"{url}/#chat")
            await page.fill("#chat-thread", "t")
            await page.fill("#chat-text", "write a.txt, and change b.txt's first line")
            await page.click("#chat-send")
            await page.locator("#chat-log .notice", has_text="waiting for approval").wait_for()
            assert "Queued for review" in await page.inner_text("#chat-log")
            assert len(llm.requests_with_tools()) == 1  # one model call, then paused

            # The inbox asks for the token once; it is kept in the tab, never in the URL.
            await page.click("#nav-inbox")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            await thread.wait_for()
            assert TOKEN not in page.url
            assert await page.evaluate("sessionStorage.getItem('fsagent.adminToken')") == TOKEN

            call_a = thread.locator('.call[data-call="call_a"]')
            call_b = thread.locator('.call[data-call="call_b"]')
            await call_a.locator("details.args-box summary").click()
            shown_args = await call_a.locator("dl.args pre.arg").all_inner_texts()
            assert shown_args == ["a.txt", "a new file\n"]  # the content as text, not JSON
            assert "a new file" in await call_a.locator("pre.diff").inner_text()
            removed = call_b.locator("pre.diff span.del")
            added = call_b.locator("pre.diff span.add")
            assert await removed.inner_text() == "-old line"
            assert await added.inner_text() == "+new line"
            colours = {
                await line.evaluate("e => getComputedStyle(e).backgroundColor")
                for line in (removed, added)
            }
            assert len(colours) == 2 and "rgba(0, 0, 0, 0)" not in colours  # coloured, apart

            # Nothing decided: the page refuses to submit half a batch.
            await thread.locator("button.submit").click()
            result = thread.locator(".result")
            assert "decide write_file (call_a) first" in await result.inner_text()

            await call_a.locator("input[value=reject]").check()
            await call_a.locator("input.reason").fill("not a.txt, thanks")
            await call_b.locator("input[value=approve]").check()
            await page.screenshot(path=str(tmp_path / "inbox-review.png"), full_page=True)
            await thread.locator("button.submit").click()
            await thread.locator(".answer").wait_for()
            assert await thread.locator(".answer").inner_text() == answer
            shown = await result.inner_text()
            assert "rejected write_file a.txt (call_a): not a.txt, thanks" in shown
            assert "✓ write_file b.txt: done" in shown
            await page.screenshot(path=str(tmp_path / "inbox.png"), full_page=True)
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        browser.call(click_through(served.url, llm))
        assert len(llm.requests_with_tools()) == 2
        answered = tool_messages(llm.requests_with_tools()[1])
        assert "Their reason: not a.txt, thanks." in answered[0]["content"]
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0

    for shot in ("inbox-review.png", "inbox.png"):
        assert (tmp_path / shot).stat().st_size > 10_000
    assert (workspace.root / "b.txt").read_text() == "new line\nkept\n"
    assert not (workspace.root / "a.txt").exists()
    assert tree_snapshot(workspace.outside) == before_outside
    audit = workspace.invoke(NO_LLM, "", "audit", "--json", thread="t")
    rows = json.loads(audit.stdout)
    assert [(r["call_id"], r["decision"], r["by"]) for r in rows] == [
        ("call_a", "reject", "admin"),
        ("call_b", "approve", "admin"),
    ]


def test_the_inbox_follows_the_server_and_reviews_as_a_reviewer_expects(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    """The page as a reviewer uses it (issue 23): what pauses appears without a click and the
    count follows; the model's words and the age; a 2,000-line rewrite reviewed whole, side
    by side; an edit's diff before it is approved, and its failure said; a batch rejected
    with one reason; j/k/a; filter and collapse; the server gone and back; the chat view's
    thread list, history and name rule, following a paused thread until the answer."""
    # Room for the 2,000-line rewrite in one reply (the stand-in counts words as tokens).
    BIG_REPLIES = ("--max-tokens", "30000")
    old = "".join(f"old line {n}\n" for n in range(2000))
    new = "".join(f"new line {n}\n" for n in range(2000))
    (workspace.root / "big.txt").write_text(old)
    before_outside = tree_snapshot(workspace.outside)

    def write(path: str, content: str, call_id: str) -> dict:
        return tool_call("write_file", {"path": path, "content": content}, id=call_id)

    script = by_request({
        "rewrite big": [reply("I'll rewrite big.txt.", tool_calls=[write("big.txt", new, "c_big")]),
                        text("big.txt rewritten.")],
        "note it": [reply(tool_calls=[write("note.txt", "draft\n", "c_note")]),
                    text("The sandbox refused it.")],
        "two files": [reply(tool_calls=[write("x.txt", "x\n", "c_x"),
                                        write("y.txt", "y\n", "c_y")]),
                      text("Left both alone.")],
        "keyed": [reply(tool_calls=[write("k.txt", "k\n", "c_k")]), text("k.txt written.")],
        "chat pause": [reply(tool_calls=[write("c.txt", "c\n", "c_c")]),
                       text("c.txt is there now.")],
    })  # fmt: skip

    def say(url: str, thread: str, words: str) -> None:
        said = httpx.post(f"{url}/api/threads/{thread}/messages", json={"text": words}, timeout=60)
        assert said.status_code == 200, said.text

    async def review(served: ServeProcess, llm: FakeLLM) -> ServeProcess:
        url = served.url
        page = await browser.tab()
        page.set_default_timeout(120_000)  # two shared cores, other tests beside it
        try:
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            await page.locator("#inbox-status", has_text="Nothing waits").wait_for()
            await page.locator("#live-state", has_text="live").wait_for()

            # What pauses shows up by itself, and the count follows.
            await asyncio.to_thread(say, url, "big", "rewrite big.txt")
            big = page.locator('article.thread[data-thread="big"]')
            await big.wait_for()
            await page.locator("#inbox-status", has_text="1 thread(s) waiting").wait_for()
            assert "I'll rewrite big.txt." in await big.locator(".reason-said").inner_text()
            assert "paused" in await big.locator("time.age").inner_text()

            # The whole rewrite, both sides: 2,000 lines out, 2,000 in (drawn as they come
            # into view: tests/web/test_diff_view_browser.py).
            call = big.locator('.call[data-call="c_big"]')
            assert await call.locator(".diff-totals").inner_text() == "+2,000 −2,000"
            await call.locator("button.whole-diff").click()
            await call.locator(".status", has_text="the whole diff: 4003 lines").wait_for()
            await call.locator("button.split-toggle").click()
            first_new = call.locator("pre.diff-scroll.split .side-new.add").first
            assert await first_new.inner_text() == "+new line 0"

            # An edit shows its own diff before it is approved; refused by the sandbox, the
            # result says the approved call failed.
            await asyncio.to_thread(say, url, "note", "note it")
            note = page.locator('article.thread[data-thread="note"]')
            await note.wait_for()
            await page.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            await note.locator("input[value=edit]").check()
            editor = note.locator("textarea.edit-args")
            await editor.fill(json.dumps({"path": "note.txt", "content": "final words\n"}))
            await note.locator("button.preview-edit").click()
            await note.locator(".edit-preview span.add", has_text="+final words").wait_for()
            assert not (workspace.root / "note.txt").exists()  # a dry run, nothing written
            # The file appears after the edit's diff was drawn: the edit, bound to that
            # diff, is refused and drawn again with what happened; nothing is written over.
            (workspace.root / "note.txt").write_text("someone else's\n")
            await note.locator("button.submit").click()
            changed = note.locator(".changed")
            await changed.wait_for()
            assert "This changed since you looked" in await changed.inner_text()
            await note.locator("span.del", has_text="-someone else's").wait_for()
            assert (workspace.root / "note.txt").read_text() == "someone else's\n"
            await note.locator("input[value=edit]").check()
            await editor.fill(json.dumps({"path": "../../escaped.txt", "content": "x\n"}))
            await note.locator("button.preview-edit").click()  # an edit binds to its preview
            await note.locator(".edit-preview", has_text="no plan").wait_for()
            await note.locator("button.submit").click()
            await note.locator(".answer").wait_for()
            assert "approved, then failed" in await note.locator(".result").inner_text()
            assert "../../escaped.txt" in await note.locator(".result").inner_text()

            # One reason for the whole batch.
            await asyncio.to_thread(say, url, "two", "two files")
            two = page.locator('article.thread[data-thread="two"]')
            await two.wait_for()
            await two.locator("input.batch-reason").fill("not today")
            await two.locator("button.reject-all").click()
            await two.locator(".answer", has_text="Left both alone.").wait_for()

            # Filter and collapse.
            await page.fill("#filter", "big.txt")
            assert await page.locator('article.thread[data-thread="big"]').is_visible()
            assert not await page.locator('article.thread[data-thread="two"]').is_visible()
            await page.fill("#filter", "")
            await page.click("#collapse-all")
            assert not await call.is_visible()
            await page.click("#expand-all")
            shot = tmp_path / "inbox.png"
            await page.screenshot(path=str(shot))
            if os.environ.get("FSAGENT_DOCS_SHOTS"):  # README's picture, taken again on request
                shutil.copy(shot, DOCS / "inbox.png")

            # The keyboard: j to the thread (new, so first: issue 32), a to approve its batch.
            await asyncio.to_thread(say, url, "keyed", "keyed")
            keyed = page.locator('article.thread[data-thread="keyed"]')
            await keyed.wait_for()
            await page.locator("body").click(position={"x": 5, "y": 5})
            await page.keyboard.press("j")
            await page.locator("article.thread.focused[data-thread='keyed']").wait_for()
            await page.keyboard.press("a")
            await keyed.locator(".answer", has_text="k.txt written.").wait_for()

            # The server goes away: the page says so, Submit can be retried; it comes back.
            port = url.rsplit(":", 1)[1]
            served.kill()
            await big.locator("input[value=approve]").check()
            await big.locator("button.submit").click()
            await page.locator("#server-state", has_text="unreachable").wait_for()
            # The page's poll can say so before the submit's own fetch fails: wait for the
            # submit's answer, which is shown only once the button is enabled again.
            await big.locator(".error[role=alert]", has_text="unreachable").wait_for()
            assert await big.locator("button.submit").is_enabled()
            served = ServeProcess(workspace, llm.base_url, *BIG_REPLIES, "--port", port)
            await page.locator("#server-state").wait_for(state="hidden")
            await page.locator("#live-state", has_text="live").wait_for()
            await big.locator("button.submit").click()
            await big.locator(".answer", has_text="big.txt rewritten.").wait_for()
            await page.locator("#inbox-status", has_text="Nothing waits").wait_for()

            # The chat view: the thread list, a thread's history by its link, the name rule.
            await page.click('article.thread[data-thread="keyed"] a.thread-link')
            await page.locator("#chat-log .you", has_text="keyed").wait_for()
            assert "k.txt written." in await page.inner_text("#chat-log")
            await page.locator("#thread-list a", has_text="big").wait_for()
            await page.fill("#chat-thread", "bad/name")
            await page.fill("#chat-text", "hello")
            await page.click("#chat-send")
            rule = page.locator("#chat-log .bad", has_text="letters, digits")
            await rule.wait_for()

            # A turn that pauses: the view follows the thread until the answer comes.
            await page.fill("#chat-thread", "chat")
            await page.fill("#chat-text", "chat pause")
            await page.click("#chat-send")
            await page.locator("#chat-log .notice", has_text="Following the thread").wait_for()
            decided = await asyncio.to_thread(approve_over_http, served.url, "chat")
            assert decided.status_code == 200
            await page.locator("#chat-log .agent", has_text="c.txt is there now.").wait_for()
        finally:
            await browser.done(page)
        return served

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(
            workspace, llm.base_url, *BIG_REPLIES, env={"FSAGENT_INBOX_POLL": "0.5"}
        )
        served = browser.call(review(served, llm), timeout=600)
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 0

    assert (tmp_path / "inbox.png").stat().st_size > 10_000
    assert (workspace.root / "big.txt").read_text() == new
    assert (workspace.root / "note.txt").read_text() == "someone else's\n"
    assert not (workspace.root / "x.txt").exists() and not (workspace.root / "y.txt").exists()
    assert (workspace.root / "k.txt").read_text() == "k\n"
    assert (workspace.root / "c.txt").read_text() == "c\n"
    assert tree_snapshot(workspace.outside) == before_outside
    audit = workspace.invoke(NO_LLM, "", "audit", "--json", thread="two")
    rows = json.loads(audit.stdout)
    assert [(r["call_id"], r["decision"], r["reason"]) for r in rows] == [
        ("c_x", "reject", "not today"),
        ("c_y", "reject", "not today"),
    ]


def test_the_page_binds_its_yes_to_what_it_drew_and_shows_a_changed_long_line(
    workspace: Workspace, browser: BrowserThread
):
    """Issue 28 in the page: a 2,000-character config line whose registry changed shows the
    new host with its column; the notes file changes after the page drew its diff, so
    "Approve all" is refused (412), nothing is written, and the page draws the fresh preview
    with a notice that stays until dismissed; approved again, both files are written. The
    page's refreshes are held until the yes is refused: one that landed first would draw the
    change itself (issue 43), and the yes would answer the new diff."""
    old_host, new_host = "https://registry.npmjs.org/", "https://npm.evil.example/x/"

    def config(registry: str) -> str:
        before = {f"setting_{n:03}": f"value number {n}" for n in range(30)}
        after = {f"option_{n:03}": f"choice number {n}" for n in range(30)}
        return json.dumps({**before, "registry": registry, **after}) + "\n"

    settings, notes = workspace.root / "settings.json", workspace.root / "notes.md"
    settings.write_text(config(old_host))
    notes.write_text("version 1\n")
    calls = [
        tool_call("write_file", {"path": "settings.json", "content": config(new_host)}, "c_cfg"),
        tool_call("write_file", {"path": "notes.md", "content": "the model's notes\n"}, "c_md"),
    ]
    script = by_request({"point npm elsewhere": [reply(tool_calls=calls), text("Both written.")]})
    column = config(old_host).index(old_host) + len("https://") + 1

    async def review(url: str, llm: FakeLLM) -> None:
        said = await asyncio.to_thread(
            httpx.post,
            f"{url}/api/threads/t/messages",
            json={"text": "point npm elsewhere"},
            timeout=60,
        )
        assert said.status_code == 200, said.text
        page = await browser.tab()
        page.set_default_timeout(120_000)  # two shared cores, other tests beside it
        release = asyncio.Event()
        try:
            await page.route(LISTING, held_refreshes("t", release))
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            await thread.wait_for()

            # The long line by its change: both hosts on screen, the column said, elided.
            cfg = thread.locator('.call[data-call="c_cfg"] pre.diff')
            removed = await cfg.locator("span.del").all_inner_texts()
            added = await cfg.locator("span.add").all_inner_texts()
            [old_line] = [line for line in removed if old_host in line]
            [new_line] = [line for line in added if new_host in line]
            assert f'"registry": "{new_host}"' in new_line and f"col {column:,}" in new_line
            assert f'"registry": "{old_host}"' in old_line and "…" in old_line
            assert len(new_line) < 200  # the rest of the 2,000 characters left out
            assert await cfg.locator("span.add", has_text=new_host).is_visible()
            md = thread.locator('.call[data-call="c_md"] pre.diff')
            assert "-version 1" in await md.inner_text()

            # The file changes after the page drew it: the yes is refused, nothing runs.
            notes.write_text("version 2\n")
            await thread.locator("button.approve-all").click()
            fresh = page.locator('article.thread[data-thread="t"]')
            notice = fresh.locator(".changed")
            await notice.wait_for()
            assert "This changed since you looked" in await notice.inner_text()
            assert "not what its preview showed" in await notice.inner_text()
            await fresh.locator(
                '.call[data-call="c_md"] span.del', has_text="-version 2"
            ).wait_for()
            assert notes.read_text() == "version 2\n" and settings.read_text() == config(old_host)
            assert len(llm.requests_with_tools()) == 1  # nothing resumed
            assert await fresh.locator("input[type=radio]:checked").count() == 0  # asked again
            release.set()

            # The notice stays through a refresh until it is dismissed.
            await page.click("#refresh")
            await page.locator("#inbox-status", has_text="1 thread(s) waiting").wait_for()
            assert await fresh.locator(".changed").is_visible()
            await fresh.locator(".changed button.dismiss").click()
            assert await fresh.locator(".changed").count() == 0

            # Approved as it is drawn now: both written.
            await fresh.locator("button.approve-all").click()
            await fresh.locator(".answer", has_text="Both written.").wait_for()
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        browser.call(review(served.url, llm))
        served.kill()
    assert notes.read_text() == "the model's notes\n"
    assert settings.read_text() == config(new_host)


def test_a_whole_diff_whose_file_changed_while_it_loaded_binds_no_yes_to_it(
    workspace: Workspace, browser: BrowserThread
):
    """The whole diff comes a page at a time; the file changes between two pages, so the
    pages show no one state: the page says so and keeps the id of what it first drew, and a
    yes to that is refused (412) rather than bound to the last page's state, which no one
    read whole. (The page's refreshes are held: one would draw the change itself.)"""
    big = workspace.root / "big.txt"
    big.write_text("".join(f"old line {n}\n" for n in range(2500)))
    new = "".join(f"new line {n}\n" for n in range(2500))
    calls = [tool_call("write_file", {"path": "big.txt", "content": new}, "c_big")]
    script = by_request({"rewrite big.txt": [reply(tool_calls=calls), text("Rewritten.")]})

    async def review(url: str, llm: FakeLLM) -> None:
        said = await asyncio.to_thread(
            httpx.post,
            f"{url}/api/threads/t/messages",
            json={"text": "rewrite big.txt"},
            timeout=60,
        )
        assert said.status_code == 200, said.text
        page = await browser.tab()
        page.set_default_timeout(120_000)
        pages = 0

        async def second_page_after_a_change(route: Any) -> None:
            nonlocal pages
            pages += 1
            if pages == 2:  # between the first page and the second, someone edits the file
                big.write_text("changed while the diff loaded\n")
            await route.continue_()

        try:
            await page.route("**/preview", second_page_after_a_change)
            await page.route(LISTING, held_refreshes("t", asyncio.Event()))  # none lands
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            thread = page.locator('article.thread[data-thread="t"]')
            await thread.wait_for()
            await thread.locator("button.whole-diff").click()
            await thread.locator(".status", has_text="it changed while it loaded").wait_for()
            await thread.locator("button.approve-all").click()
            await thread.locator(".changed").wait_for()
            assert big.read_text() == "changed while the diff loaded\n"
            assert len(llm.requests_with_tools()) == 1  # nothing resumed
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        browser.call(review(served.url, llm))
        served.kill()
    assert big.read_text() == "changed while the diff loaded\n"


def test_an_approval_that_comes_during_the_page_s_fetch_is_shown_without_a_reload(
    workspace: Workspace, browser: BrowserThread
):
    """Issue 32's first defect, driven as it happens: the page's list fetch is on its way
    (held, its answer already taken from the server: one thread waits) when a second thread
    pauses and the stream says so. The page must not draw the older answer and stop there:
    it fetches again, and shows both, with the count the stream said."""

    def write(path: str, call_id: str) -> list[dict]:
        return [
            reply(tool_calls=[tool_call("write_file", {"path": path, "content": "x\n"}, call_id)])
        ]

    script = by_request({"write a": [*write("a.txt", "c_a"), text("a")],
                         "write b": [*write("b.txt", "c_b"), text("b")]})  # fmt: skip

    def say(url: str, thread: str, words: str) -> None:
        said = httpx.post(f"{url}/api/threads/{thread}/messages", json={"text": words}, timeout=60)
        assert said.status_code == 200, said.text

    async def review(url: str, llm: FakeLLM) -> None:
        await asyncio.to_thread(say, url, "a", "write a")
        page = await browser.tab()
        page.set_default_timeout(120_000)
        fetched, release = asyncio.Event(), asyncio.Event()
        held = 0

        async def hold_one_answer(route: Any) -> None:
            nonlocal held
            held += 1
            if held > 1:
                await route.continue_()
                return
            answer = await route.fetch()  # the server's list now: thread a alone
            fetched.set()
            await release.wait()
            await route.fulfill(response=answer)

        try:
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            await page.locator("#inbox-status", has_text="1 thread(s) waiting").wait_for()
            await page.locator("#live-state", has_text="live").wait_for()
            await page.route(LISTING, hold_one_answer)
            await page.click("#refresh")  # a fetch on its way...
            await fetched.wait()
            await asyncio.to_thread(say, url, "b", "write b")  # ...when b pauses
            # The stream's word reaches the page while the fetch is still held.
            await page.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            release.set()
            await page.locator('article.thread[data-thread="b"]').wait_for(timeout=30_000)
            await page.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            assert await page.locator("article.thread").count() == 2
            assert held >= 2  # it fetched again after the held answer
        finally:
            await browser.done(page)

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        browser.call(review(served.url, llm))
        served.kill()
    assert not (workspace.root / "a.txt").exists() and not (workspace.root / "b.txt").exists()


def test_the_losing_tab_keeps_its_message_until_dismissed(
    workspace: Workspace, browser: BrowserThread
):
    """Issue 32's second defect: two tabs approve the same call; the loser's "already decided"
    stayed 0.1-0.2 s, then the live refresh removed the thread. Driven as it happens: the
    loser's list fetches are held until it has clicked and been refused; then the refresh
    comes, and the refusal stays until it is dismissed."""
    calls = [tool_call("write_file", {"path": "w.txt", "content": "w\n"}, "c_w")]
    script = by_request({"write w": [reply(tool_calls=calls), text("Written.")]})

    async def review(url: str, llm: FakeLLM) -> None:
        said = await asyncio.to_thread(
            httpx.post, f"{url}/api/threads/t/messages", json={"text": "write w"}, timeout=60
        )
        assert said.status_code == 200, said.text
        context = await browser.browser.new_context()
        winner, loser = await context.new_page(), await context.new_page()
        release = asyncio.Event()

        async def hold_lists(route: Any) -> None:
            await release.wait()
            await route.continue_()

        try:
            # Each tab is brought to the front before it is used, as a person looks at the tab
            # they click in: Chromium throttles a tab in the background (each click there
            # waited ~2 s for an animation frame).
            for page in (winner, loser):
                page.set_default_timeout(120_000)
                await page.bring_to_front()
                await page.goto(f"{url}/")
                await page.fill("#token-input", TOKEN)
                await page.click("#use-token")
                await page.locator('article.thread[data-thread="t"]').wait_for()
                await page.locator("#live-state", has_text="live").wait_for()
            await loser.route(LISTING, hold_lists)
            await winner.bring_to_front()
            await winner.locator('article.thread[data-thread="t"] button.approve-all').click()
            await winner.locator("article.thread.decided").wait_for()
            await loser.bring_to_front()
            thread = loser.locator('article.thread[data-thread="t"]')
            await thread.locator("button.approve-all").click()  # the same call, a moment late
            refusal = thread.locator('p.error[role="alert"]', has_text="already decided")
            await refusal.wait_for()
            release.set()  # now the live refresh lands: the thread is gone from the server
            await loser.locator("#inbox-status", has_text="Nothing waits").wait_for()
            assert await refusal.count() == 1  # still there to read
            await thread.locator("button.dismiss").click()
            assert await loser.locator('article.thread[data-thread="t"]').count() == 0
        finally:
            await context.close()

    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url)
        browser.call(review(served.url, llm))
        served.kill()
    assert (workspace.root / "w.txt").read_text() == "w\n"  # written once, by the winner
