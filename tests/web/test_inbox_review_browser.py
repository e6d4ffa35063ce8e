"""The inbox a reviewer chooses over a PR page (issue 32), in Debian's headless Chromium against
a real `fsagent serve` and the stand-in LLM: the stream delivers a change made while it read
the list; every outcome stays until dismissed, in a Decided list saying who and when; what is
new is marked, first, counted in the title and notified; the chat view tells the whole story;
the keys, focus and an axe-core check."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx
from chromium import BrowserThread
from race_pause import STOP, Pauses

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import LISTING, TOKEN, ServeProcess, approve_over_http, by_request

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
# Nothing but the change under test may wake the stream: no poll, no keep-alive for an hour.
QUIET_STREAM = {"FSAGENT_INBOX_POLL": "3600", "FSAGENT_SSE_KEEPALIVE": "3600"}
# Records every desktop notification the page makes, around the browser's own Notification.
RECORD_NOTIFICATIONS = """
window.__notified = [];
const RealNotification = window.Notification;
function RecordedNotification(title, options) {
  window.__notified.push({ title, body: (options || {}).body || "" });
  return new RealNotification(title, options);
}
RecordedNotification.requestPermission = (...a) => RealNotification.requestPermission(...a);
Object.defineProperty(RecordedNotification, "permission", {
  get: () => RealNotification.permission,
});
window.Notification = RecordedNotification;
"""


def writes(*files: str) -> dict[str, list[Any]]:
    """A script: "write NAME" asks to write NAME.txt (call c_NAME), then answers "NAME done"."""

    def asks(name: str) -> dict[str, Any]:
        return tool_call("write_file", {"path": f"{name}.txt", "content": f"{name}\n"}, f"c_{name}")

    return {
        f"write {name}": [reply(tool_calls=[asks(name)]), text(f"{name} done.")] for name in files
    }


def stand_in(table: dict[str, list[Any]]) -> FakeLLM:
    return FakeLLM(by_request(table), auto_route="filesystem")


def say(url: str, thread: str, words: str) -> None:
    said = httpx.post(f"{url}/api/threads/{thread}/messages", json={"text": words}, timeout=60)
    assert said.status_code == 200, said.text


async def signed_in(page: Any, url: str) -> None:
    page.set_default_timeout(120_000)  # two shared cores, other tests beside it
    await page.goto(f"{url}/")
    await page.fill("#token-input", TOKEN)
    await page.click("#use-token")
    await page.locator("#live-state", has_text="live").wait_for()


def test_a_change_made_while_the_stream_reads_the_list_is_sent_at_once(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    """The stream has read the list again (a run that changed nothing woke it: nothing waits)
    and is held right there, before it waits for the next change, by the test-only pause;
    then a thread pauses. Let go, the stream must send that change, not wait for the next poll
    (set to an hour here): the page draws the thread, and the stream's count and the drawn
    list agree. (The first read would not do: its event makes the page fetch the list.)"""
    pauses = Pauses(tmp_path / "pause")
    env = {**QUIET_STREAM, "FSAGENT_TEST_INBOX_PAUSE": str(pauses.folder)}

    async def review(url: str) -> None:
        page = await browser.tab()
        page.set_default_timeout(120_000)
        answerer: threading.Thread | None = None
        try:
            await page.goto(f"{url}/")
            await page.fill("#token-input", TOKEN)
            await page.click("#use-token")
            await asyncio.to_thread(pauses.reached, "inbox", "read")  # its first read
            pauses.go()
            await page.locator("#live-state", has_text="live").wait_for()
            await page.locator("#inbox-status", has_text="Nothing waits").wait_for()
            await asyncio.to_thread(say, url, "h", "hello")  # a run: the stream reads again
            await asyncio.to_thread(pauses.reached, "inbox", "read")  # ...and is held
            await asyncio.to_thread(say, url, "a", "write a")  # the change, during the pause
            pauses.go()
            answerer = threading.Thread(target=pauses.answer_all, daemon=True)
            answerer.start()
            thread = page.locator('article.thread[data-thread="a"]')
            await thread.wait_for(timeout=60_000)  # an hour's poll would come long after
            await page.locator("#inbox-status", has_text="1 thread(s) waiting").wait_for()
            assert await page.locator("#approvals article.thread").count() == 1
        finally:
            await browser.done(page)
            if answerer is not None:
                os.write(pauses.paused, STOP)
                answerer.join(timeout=60)

    try:
        with stand_in(writes("a")) as llm:
            served = ServeProcess(workspace, llm.base_url, env=env)
            browser.call(review(served.url))
            served.kill()
    finally:
        pauses.close()
    assert not (workspace.root / "a.txt").exists()  # nothing was decided


def test_new_approvals_come_first_and_every_outcome_stays_in_the_decided_list(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    """What arrived since the reviewer looked is marked "new", drawn first (never below a long
    diff), counted in the tab's title and notified once notifications are allowed; looked at,
    it is no longer new. Two tabs approve the same call: the winner's outcome and the loser's
    refusal both stay, in the Decided list, saying who decided and when, until dismissed; so
    does a refused (400) decision while its thread still waits."""
    long_old = "".join(f"line {n}\n" for n in range(300))
    (workspace.root / "a.txt").write_text(long_old)  # a's diff is long

    async def review(url: str) -> None:
        context = await browser.browser.new_context()
        await context.add_init_script(RECORD_NOTIFICATIONS)
        winner = await context.new_page()
        loser = await context.new_page()
        try:
            # The tab in use is brought to the front, as a person looks at the tab they click
            # in: Chromium throttles a tab in the background (each click there waited ~2 s
            # for an animation frame).
            await winner.bring_to_front()
            await signed_in(winner, url)
            a = winner.locator('article.thread[data-thread="a"]')
            await a.wait_for()
            # Never looked at in this browser: new, in words, and in the title.
            assert (await a.locator(".badge.new").inner_text()).lower() == "new"
            assert await winner.title() == "(1) fsagent inbox"
            # The reviewer's yes to the browser's question, as the button asks it.
            await context.grant_permissions(["notifications"])
            await winner.click("#notify")
            await winner.locator("#notify", has_text="Notifications on").wait_for()
            await a.locator(":scope > details > summary").click()  # looked at
            await a.locator(".badge.new").wait_for(state="detached")
            assert await winner.title() == "fsagent inbox"
            # Open again: its long diff on screen, above which nothing new may be drawn.
            await a.locator(":scope > details > summary").click()

            # Two arrive: each first, newest on top, counted and notified.
            await asyncio.to_thread(say, url, "b", "write b")
            await winner.locator('article.thread.new[data-thread="b"]').wait_for()
            await asyncio.to_thread(say, url, "c", "write c")
            await winner.locator('article.thread.new[data-thread="c"]').wait_for()
            order = await winner.locator("#approvals article.thread").evaluate_all(
                "all => all.map(a => a.dataset.thread)"
            )
            assert order == ["c", "b", "a"]
            assert await winner.title() == "(2) fsagent inbox"
            notified = await winner.evaluate("window.__notified")
            assert [n["title"] for n in notified] == [
                "fsagent: b waits for approval",
                "fsagent: c waits for approval",
            ]
            assert notified[0]["body"] == "b.txt"

            # A decision the server refuses (400) stays, and its thread still waits.
            b = winner.locator('#approvals article.thread[data-thread="b"]')
            await b.locator("input[value=edit]").check()
            await b.locator("textarea.edit-args").fill('{"path": 5}')
            await b.locator("button.submit").click()
            refused = b.locator('p.error[role="alert"]')
            await refused.wait_for()
            await winner.click("#refresh")
            await winner.locator("#inbox-status", has_text="3 thread(s) waiting").wait_for()
            assert await refused.is_visible()

            # The race: the loser's list fetches wait until it has been refused.
            await loser.bring_to_front()
            await signed_in(loser, url)
            release = asyncio.Event()

            async def hold_lists(route: Any) -> None:
                await release.wait()
                await route.continue_()

            await loser.route(LISTING, hold_lists)
            await winner.bring_to_front()
            await winner.locator('article.thread[data-thread="c"] button.approve-all').click()
            won = winner.locator('#decided article.thread[data-thread="c"]')
            await won.locator(".answer", has_text="c done.").wait_for()
            assert "by admin at 20" in await won.locator(".decided-by").inner_text()
            await loser.bring_to_front()
            lost = loser.locator('article.thread[data-thread="c"]')
            await lost.locator("button.approve-all").click()
            said = lost.locator('p.error[role="alert"]', has_text="already decided by admin at")
            await said.wait_for()
            release.set()  # the live refresh lands: c is gone from the server's list
            await loser.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            moved = loser.locator('#decided article.thread[data-thread="c"]')
            assert await said.count() == 1 and await moved.count() == 1
            assert "by admin at 20" in await moved.locator(".decided-by").inner_text()
            assert "(not by this tab)" in await moved.locator(".decided-by").inner_text()
            assert await loser.locator("#decided-title").inner_text() == "Decided (1)"
            shot = tmp_path / "race-loser.png"
            await loser.screenshot(path=str(shot), full_page=True)
            if os.environ.get("FSAGENT_DOCS_SHOTS"):  # docs/reviewing.md's picture, on request
                shutil.copy(shot, DOCS / "race-loser.png")

            # Each stays until dismissed.
            await winner.bring_to_front()
            await winner.click("#refresh")
            await winner.locator("#inbox-status", has_text="2 thread(s) waiting").wait_for()
            assert await won.is_visible()
            await won.locator("button.dismiss").click()
            assert await won.count() == 0
            await loser.bring_to_front()
            await moved.locator("button.dismiss").click()
            assert await moved.count() == 0
            assert await loser.locator("#decided-box").is_hidden()

            # b, refused here, is approved elsewhere: it leaves the server's list, and its
            # refusal still stays on this page until dismissed.
            decided = await asyncio.to_thread(approve_over_http, url, "b")
            assert decided.status_code == 200, decided.text
            await winner.bring_to_front()
            await winner.locator("#inbox-status", has_text="1 thread(s) waiting").wait_for()
            assert await refused.is_visible()
            await b.locator("button.dismiss").click()
            assert await b.count() == 0
        finally:
            await context.close()

    with stand_in(writes("a", "b", "c")) as llm:
        served = ServeProcess(workspace, llm.base_url)
        for name in ("a",):
            say(served.url, name, f"write {name}")
        browser.call(review(served.url), timeout=600)
        served.kill()
    assert (tmp_path / "race-loser.png").stat().st_size > 10_000
    assert (workspace.root / "c.txt").read_text() == "c\n"  # written once, by the winner
    assert (workspace.root / "a.txt").read_text() == long_old
    assert (workspace.root / "b.txt").read_text() == "b\n"  # approved over HTTP


def test_the_chat_view_tells_the_whole_story_in_order(workspace: Workspace, browser: BrowserThread):
    """A turn that pauses: the chat log keeps "queued" and "waiting for approval", then says
    who decided and when, then the result and the answer, in the order they happened."""

    async def chat(url: str) -> None:
        page = await browser.tab()
        page.set_default_timeout(120_000)
        try:
            await page.goto(f"{url}/#chat")
            await page.fill("#chat-thread", "s")
            await page.fill("#chat-text", "write s")
            await page.click("#chat-send")
            await page.locator("#chat-log .notice", has_text="Following the thread").wait_for()
            decided = await asyncio.to_thread(approve_over_http, url, "s")
            assert decided.status_code == 200
            await page.locator("#chat-log .notice", has_text="the run ended").wait_for()
            lines = await page.locator("#chat-log .line").all_inner_texts()
        finally:
            await browser.done(page)
        story = [
            "you> write s",
            "Queued for review",
            "⚠ waiting for approval: write_file",
            "Following the thread",
            "✓ decided: approve write_file (c_s) by admin at 20",
            "← ",
            "agent> s done.",
            "— the run ended; the thread is idle",
        ]
        places = [next(i for i, line in enumerate(lines) if step in line) for step in story]
        assert places == sorted(places), lines

    with stand_in(writes("s")) as llm:
        served = ServeProcess(workspace, llm.base_url)
        browser.call(chat(served.url))
        served.kill()
    assert (workspace.root / "s.txt").read_text() == "s\n"


def test_the_keys_the_focus_and_an_accessibility_check(
    workspace: Workspace, browser: BrowserThread
):
    """? lists the keys and Escape closes the list; Tab reaches every action and shows where
    it is (:focus-visible); j then a approves by keyboard alone; axe-core finds nothing wrong
    with the page (waiting, decided, and the list of keys open)."""
    assert AXE.exists(), f"{AXE} is missing: run `make node-modules` (npm ci)"

    async def axe_violations(page: Any) -> list[str]:
        await page.evaluate(AXE.read_text())
        found = await page.evaluate(
            "async () => (await axe.run(document)).violations.map(v => "
            "`${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`)"
        )
        return list(found)

    async def review(url: str) -> str:
        page = await browser.tab()
        try:
            await signed_in(page, url)
            await page.locator('article.thread[data-thread="k"]').wait_for()
            await page.locator('article.thread[data-thread="m"]').wait_for()

            # The keys: ? opens the list, Escape closes it.
            await page.locator("body").click(position={"x": 5, "y": 5})
            await page.keyboard.press("?")
            await page.locator("#keys-help").wait_for(state="visible")
            assert "approve the focused thread" in await page.locator("#keys-help").inner_text()
            assert await axe_violations(page) == []
            await page.keyboard.press("Escape")
            await page.locator("#keys-help").wait_for(state="hidden")

            # Tab reaches every kind of action, each drawn with a visible outline.
            reached: set[str] = set()
            for _ in range(60):
                await page.keyboard.press("Tab")
                focus = await page.evaluate(
                    "() => { const e = document.activeElement; const s = getComputedStyle(e);"
                    " return [e.id || e.className || e.type || e.tagName,"
                    " e.matches(':focus-visible'), s.outlineStyle, s.outlineWidth]; }"
                )
                name, visible, style, width = focus
                if name == "BODY":  # past the last control, round to the first
                    continue
                assert visible and style != "none" and width != "0px", focus
                reached.add(name)
            every_kind = ("refresh", "notify", "show-keys", "filter", "approve-all", "reject-all",
                          "submit", "radio", "split-toggle", "thread-link")  # fmt: skip
            for wanted in every_kind:
                assert any(wanted in name for name in reached), (wanted, reached)

            # By keyboard alone: j to the first thread, a approves it.
            await page.locator("body").click(position={"x": 5, "y": 5})
            await page.keyboard.press("j")
            first = await page.locator("#approvals article.focused").get_attribute("data-thread")
            await page.keyboard.press("a")
            done = page.locator(f'#decided article.thread[data-thread="{first}"]')
            await done.locator(".answer").wait_for()
            violations = await axe_violations(page)
            assert violations == [], "axe-core found:\n" + "\n".join(violations)
        finally:
            await browser.done(page)
        return str(first)

    (workspace.root / "k.txt").write_text("".join(f"old {n}\n" for n in range(80)))
    table = writes("k", "m")
    table["write k"][0] = reply(
        tool_calls=[tool_call("write_file", {"path": "k.txt", "content": "new\n" * 80}, "c_k")]
    )
    with stand_in(table) as llm:
        served = ServeProcess(workspace, llm.base_url)
        say(served.url, "k", "write k")
        say(served.url, "m", "write m")
        first = browser.call(review(served.url))
        served.kill()
    # The one approved by keyboard is written; the other still waits, its file untouched.
    assert (workspace.root / "k.txt").read_text().startswith("new") == (first == "k")
    assert (workspace.root / "m.txt").exists() == (first == "m")


def test_a_list_answer_older_than_a_decision_never_draws_the_decided_batch_again(
    workspace: Workspace, browser: BrowserThread
):
    """The page's list fetch has its answer (t waits) but is held while the reviewer approves
    t; released, that older answer must not draw t among the waiting again: it stays in the
    Decided list alone. Everything drawn in the waiting list is recorded as it is drawn."""

    async def review(url: str) -> None:
        page = await browser.tab()
        fetched, release, next_one = asyncio.Event(), asyncio.Event(), asyncio.Event()
        held = 0

        async def hold_one_answer(route: Any) -> None:
            nonlocal held
            held += 1
            if held > 1:
                next_one.set()  # asked only once the held answer was drawn (loadInbox's loop)
                await route.continue_()
                return
            answer = await route.fetch()  # t still waits, as the server says now
            fetched.set()
            await release.wait()
            await route.fulfill(response=answer)

        try:
            await signed_in(page, url)
            thread = page.locator('article.thread[data-thread="t"]')
            await thread.wait_for()
            await page.route(LISTING, hold_one_answer)
            await page.click("#refresh")
            await fetched.wait()
            await thread.locator("button.approve-all").click()
            await page.locator('#decided article.thread[data-thread="t"] .answer').wait_for()
            # From here on, whatever the waiting list draws is recorded.
            await page.evaluate(
                "() => { window.__drawn = []; new MutationObserver((changes) => {"
                " for (const c of changes) for (const n of c.addedNodes)"
                " window.__drawn.push(n.dataset.thread); })"
                ".observe(document.querySelector('#approvals'), { childList: true }); }"
            )
            release.set()
            await next_one.wait()
            await page.locator("#inbox-status", has_text="Nothing waits").wait_for()
            assert await page.evaluate("window.__drawn") == []
            assert await page.locator('article.thread[data-thread="t"]').count() == 1
        finally:
            await browser.done(page)

    with stand_in(writes("t")) as llm:
        served = ServeProcess(workspace, llm.base_url)
        say(served.url, "t", "write t")
        browser.call(review(served.url))
        served.kill()
    assert (workspace.root / "t.txt").read_text() == "t\n"
