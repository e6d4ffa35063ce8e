"""A call's diff in the inbox page as a reviewer sees it (issue 32, "the change first"), in
Debian's headless Chromium against a real `fsagent serve` and the stand-in LLM: a rewrite's
first screen shows new lines, with line numbers, the whole diff's totals and the changed
word marked; unchanged runs are folded; `n` / `p` jump between changes; side by side
scrolls as one; a 5,000-line diff draws only the rows in view and still reaches its end."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from chromium import BrowserThread

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import TOKEN, ServeProcess, by_request

DOCS = Path(__file__).resolve().parents[2] / "docs"  # README and reviewing.md show it


def lines_of(template: str, count: int) -> str:
    return "".join(template.format(n=n) + "\n" for n in range(count))


@contextmanager
def serving(workspace: Workspace, writes: dict[str, tuple[str, str]]) -> Iterator[str]:
    """`fsagent serve` with the stand-in LLM, whose reply to each request is a write_file
    of (path, content), which pauses for approval."""
    script = by_request({
        request: [reply(tool_calls=[tool_call("write_file", {"path": path, "content": content},
                                              id=f"c_{request}")]), text("Written.")]
        for request, (path, content) in writes.items()
    })  # fmt: skip
    with FakeLLM(script, auto_route="filesystem") as llm:
        # Room for a 2,500-line file in one reply (the stand-in counts words as tokens).
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        for request in writes:
            said = httpx.post(
                f"{served.url}/api/threads/{request}/messages", json={"text": request}, timeout=60
            )
            assert said.status_code == 200, said.text
        try:
            yield served.url
        finally:
            served.kill()


@asynccontextmanager
async def inbox(browser: BrowserThread, url: str) -> AsyncIterator[Any]:
    page = await browser.tab(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(120_000)  # two shared cores, other tests beside it
    try:
        await page.goto(f"{url}/")
        await page.fill("#token-input", TOKEN)
        await page.click("#use-token")
        await page.locator("#approvals article.thread").first.wait_for()
        await page.locator("#live-state", has_text="live").wait_for()
        yield page
    finally:
        await browser.done(page)


def numbered(which: str, number: int) -> Any:
    """A filter for the row whose old (or new) line number is `number`, exactly."""
    return re.compile(rf"^{number}$"), f".ln.{which}"


def row_with(scroller: Any, which: str, number: int) -> Any:
    pattern, cell = numbered(which, number)
    return scroller.locator(".diff-row").filter(has=scroller.page.locator(cell, has_text=pattern))


async def in_view(scroller: Any, node: Any) -> bool:
    """Whether `node` is inside the scroll container's visible part, its top on the page's
    screen."""
    box, inner = await scroller.bounding_box(), await node.bounding_box()
    screen = scroller.page.viewport_size
    return (
        box is not None
        and inner is not None
        and inner["y"] >= box["y"]
        and inner["y"] + inner["height"] <= box["y"] + box["height"]
        and 0 <= inner["y"] < screen["height"]
    )


def test_a_rewrite_s_first_screen_shows_new_lines_numbered_with_totals_and_words(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    """A 2,000-line rewrite: its first screen holds added lines (each removed line beside the
    added one that replaces it), old and new line numbers, +2,000 −2,000 for the whole diff
    though only its start was sent, and the changed word marked on both sides."""
    (workspace.root / "big.txt").write_text(lines_of("old line {n}", 2000))

    async def review(url: str) -> None:
        async with inbox(browser, url) as page:
            call = page.locator('.call[data-call="c_rewrite"]')
            scroller = call.locator("pre.diff-scroll")
            await scroller.wait_for()
            assert await call.locator(".diff-totals").inner_text() == "+2,000 −2,000"
            first_added = scroller.locator(".text.add").first
            assert await first_added.inner_text() == "+new line 0"
            assert await in_view(scroller, first_added)
            # Line numbers: old line 1 and new line 1 on screen, each on its side.
            removed_row = row_with(scroller, "old", 1)
            added_row = row_with(scroller, "new", 1)
            assert await removed_row.locator(".text.del").inner_text() == "-old line 0"
            assert await added_row.locator(".text.add").inner_text() == "+new line 0"
            assert await removed_row.locator(".ln.new").inner_text() == ""
            # The changed word, and only it, is marked.
            assert await removed_row.locator("mark.word").all_inner_texts() == ["old"]
            assert await added_row.locator("mark.word").all_inner_texts() == ["new"]
            shot = tmp_path / "rewrite.png"
            await call.screenshot(path=str(shot))
            if os.environ.get("FSAGENT_DOCS_SHOTS"):  # the docs' picture, taken again on request
                shutil.copy(shot, DOCS / "rewrite.png")

    with serving(workspace, {"rewrite": ("big.txt", lines_of("new line {n}", 2000))}) as url:
        browser.call(review(url))


def test_side_by_side_scrolls_as_one_so_old_line_k_sits_beside_new_line_k(
    workspace: Workspace, browser: BrowserThread
):
    """The whole 2,000-line rewrite, side by side, scrolled to the bottom: the row showing
    old line 1990 shows new line 1990, in one scroll container; back to unified, the same
    lines are in view."""
    (workspace.root / "big.txt").write_text(lines_of("old line {n}", 2000))

    async def review(url: str) -> None:
        async with inbox(browser, url) as page:
            call = page.locator('.call[data-call="c_rewrite"]')
            await call.locator("button.whole-diff").click()
            await call.locator(".status", has_text="the whole diff").wait_for()
            await call.locator("button.split-toggle").click()
            scroller = call.locator("pre.diff-scroll.split")
            assert await call.locator("pre.diff-scroll").count() == 1  # one container
            await scroller.evaluate("node => { node.scrollTop = node.scrollHeight; }")
            row = row_with(scroller, "old", 1990)
            await row.wait_for()
            assert await row.locator(".ln.new").inner_text() == "1990"
            assert await row.locator(".side-old").inner_text() == "-old line 1989"
            assert await row.locator(".side-new").inner_text() == "+new line 1989"
            assert await in_view(scroller, row)
            # Back to unified, the old line at the top stays in view.
            top = await scroller.evaluate("node => node.topLine()")
            assert 1900 < top <= 1990
            await call.locator("button.split-toggle").click()
            unified = call.locator("pre.diff-scroll:not(.split)")
            await row_with(unified, "old", top).wait_for()
            assert await in_view(unified, row_with(unified, "old", top))

    with serving(workspace, {"rewrite": ("big.txt", lines_of("new line {n}", 2000))}) as url:
        browser.call(review(url))


def test_unchanged_runs_are_folded_and_n_and_p_jump_between_changes(
    workspace: Workspace, browser: BrowserThread
):
    """A one-word change every 100 lines of a 3,000-line file: three lines of context each,
    the lines between folded and counted; `n` scrolls the next change into view and marks
    it, `p` goes back; j still focuses a thread."""
    notes = lines_of("line {n} of the notes", 3000)
    changed = notes
    for n in range(99, 3000, 100):
        changed = changed.replace(f"line {n} of the notes", f"line {n} of the papers")
    (workspace.root / "notes.txt").write_text(notes)

    def change(page: Any, scroller: Any, number: int) -> Any:
        pattern, cell = numbered("old", number)
        marked = scroller.locator(".diff-row.current")
        return marked.filter(has=page.locator(cell, has_text=pattern))

    async def review(url: str) -> None:
        async with inbox(browser, url) as page:
            call = page.locator('.call[data-call="c_sparse"]')
            scroller = call.locator("pre.diff-scroll")
            await scroller.wait_for()
            assert await call.locator(".diff-totals").inner_text() == "+30 −30"
            folds = await scroller.locator(".fold").all_inner_texts()
            assert folds[:3] == ["⋯ 96 unchanged lines", *["⋯ 93 unchanged lines"] * 2]
            row = row_with(scroller, "old", 97)
            assert await row.locator(".text").inner_text() == " line 96 of the notes"
            assert await row.locator(".ln.new").inner_text() == "97"
            await page.keyboard.press("j")
            await page.locator('article.thread.focused[data-thread="sparse"]').wait_for()
            await page.keyboard.press("n")
            await change(page, scroller, 100).wait_for()
            await page.keyboard.press("n")
            await change(page, scroller, 200).wait_for()
            await page.keyboard.press("n")
            third = change(page, scroller, 300)
            await third.wait_for()
            assert await scroller.evaluate("node => node.scrollTop") > 0  # the view moved
            assert await in_view(scroller, third)
            assert await third.locator("mark.word").all_inner_texts() == ["notes"]
            await page.keyboard.press("p")
            await change(page, scroller, 200).wait_for()
            assert await change(page, scroller, 300).count() == 0
            # A refresh of the inbox keeps the thread, and the diff where the reviewer left it.
            left_at = await scroller.evaluate("node => node.scrollTop")
            await page.click("#refresh")
            await page.wait_for_function(
                "top => document.querySelector('pre.diff-scroll').scrollTop === top", arg=left_at
            )
            await change(page, scroller, 200).wait_for()

    with serving(workspace, {"sparse": ("notes.txt", changed)}) as url:
        browser.call(review(url))


def test_a_5000_line_diff_draws_only_the_rows_in_view_and_reaches_its_end(
    workspace: Workspace, browser: BrowserThread
):
    """A 2,500-line rewrite is a 5,000-line diff: loaded whole, the page draws a bounded
    number of rows, and scrolled to the bottom it shows the last added line."""
    (workspace.root / "huge.txt").write_text(lines_of("old line {n}", 2500))

    async def review(url: str) -> None:
        async with inbox(browser, url) as page:
            call = page.locator('.call[data-call="c_huge"]')
            await call.locator("button.whole-diff").click()
            await call.locator(".status", has_text="the whole diff").wait_for()
            scroller = call.locator("pre.diff-scroll")
            assert await call.locator(".diff-totals").inner_text() == "+2,500 −2,500"
            assert await scroller.locator(".diff-row").count() <= 200
            await scroller.evaluate("node => { node.scrollTop = node.scrollHeight; }")
            last = row_with(scroller, "new", 2500)
            await last.wait_for()
            assert await last.locator(".text.add").inner_text() == "+new line 2499"
            await scroller.scroll_into_view_if_needed()
            assert await in_view(scroller, last)
            assert await scroller.locator(".diff-row").count() <= 200

    with serving(workspace, {"huge": ("huge.txt", lines_of("new line {n}", 2500))}) as url:
        browser.call(review(url))
