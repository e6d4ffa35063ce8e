"""Text the inbox page did not write, in Debian's headless Chromium against a real `fsagent
serve` and the stand-in LLM (issue 41): control and bidi characters are written out as the
terminal writes them (core/text.py's `visible` is the reference), everywhere the page draws
a file's lines, the model's words, a request or a name; changed words are marked on the
right letters after emoji (the server counts code points, a JS string UTF-16 units); and long
tokens wrap instead of making the page scroll sideways, while a diff keeps its own scroll."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from chromium import BrowserThread

from conftest import Workspace
from core.text import HIDDEN_CATEGORIES, visible
from fake_llm import FakeLLM, reply, text, tool_call
from serving import TOKEN, ServeProcess, by_request

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: what follows it is drawn reversed
THREAD = "t"
KEY = "please"  # in every request: the stand-in model answers by it


@contextmanager
def paused(
    workspace: Workspace, request: str, words: str, calls: list[Any], *, ask: bool = True
) -> Iterator[str]:
    """`fsagent serve` with thread 't' paused on `calls`, which the model makes after `words`
    in answer to `request` (asked here unless `ask` is false); yields the server's URL."""
    script = by_request({KEY: [reply(words, tool_calls=calls), text("Done.")]})
    with FakeLLM(script, auto_route="filesystem") as llm:
        # Room for a 5,000-character word (the stand-in counts four letters a token).
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        if ask:
            said = httpx.post(
                f"{served.url}/api/threads/{THREAD}/messages", json={"text": request}, timeout=60
            )
            assert said.status_code == 200, said.text
            assert '"status": "pending"' in said.text
        try:
            yield served.url
        finally:
            served.kill()


async def new_page(browser: BrowserThread) -> Any:
    page = await browser.tab(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(120_000)  # two shared cores, other tests beside it
    return page


async def open_inbox(browser: BrowserThread, url: str, page: Any = None) -> Any:
    page = page or await new_page(browser)
    await page.goto(f"{url}/#inbox")
    await page.fill("#token-input", TOKEN)
    await page.click("#use-token")
    await page.locator(f'article.thread[data-thread="{THREAD}"] pre.diff-scroll').first.wait_for()
    return page


def hidden_in(shown: str) -> list[str]:
    """The characters the terminal never draws raw (bar tab and newline) found in `shown`."""
    return [
        f"U+{ord(char):04X}"
        for char in shown
        if char not in "\t\n" and unicodedata.category(char) in HIDDEN_CATEGORIES
    ]


def test_bidi_and_control_characters_are_written_out_as_the_terminal_does(
    workspace: Workspace, browser: BrowserThread
):
    """A right-to-left override in the request, the model's words and a file's new line, and
    an escape character in the old line: the inbox draws each as the terminal does
    (`\\xe2\\x80\\xae`), in the diff, its tooltips, the request, the reason and the chat view,
    so nothing reads reversed; a name the server already wrote out is drawn as it is; the
    edit box holds JSON escapes, the same arguments once parsed."""
    (workspace.root / "conf.txt").write_text("mirror = https://good.example/pkg\x1b[8m\n")
    new_line = f"mirror = {RLO}gkp/elpmaxe.doog//:sptth"  # reads as the old URL when drawn raw
    # A name with a raw bidi control is refused before anyone is asked (the server's plan):
    # the model can only name it as the server writes it, already escaped, drawn as it is.
    name = r"notes\xe2\x80\xaetxt.sh"
    request = f"{KEY} fix the mirror {RLO}won"
    words = f"I'll point it at {RLO}rorrim eht.\u2028(a line separator)"
    calls = [
        tool_call("write_file", {"path": "conf.txt", "content": new_line + "\n"}, id="c_conf"),
        tool_call("write_file", {"path": name, "content": "x\n"}, id="c_name"),
    ]

    async def review(url: str) -> None:
        page = await new_page(browser)
        try:
            # Asked in the chat view, which streams the model's words and its calls.
            await page.goto(f"{url}/#chat")
            await page.fill("#chat-thread", THREAD)
            await page.fill("#chat-text", request)
            await page.click("#chat-send")
            log = page.locator("#chat-log")
            await log.locator(".notice", has_text="waiting for approval").wait_for()
            streamed = await log.inner_text()
            assert f"agent> {visible(words)}" in streamed
            assert hidden_in(streamed) == []

            await open_inbox(browser, url, page)
            thread = page.locator(f'article.thread[data-thread="{THREAD}"]')
            diff = thread.locator('.call[data-call="c_conf"] pre.diff-scroll')
            assert await diff.locator(".text.add").inner_text() == "+" + visible(new_line, "\t")
            old = await diff.locator(".text.del").inner_text()
            assert old == "-" + visible("mirror = https://good.example/pkg\x1b[8m", "\t")
            assert await thread.locator(".request").text_content() == "Request " + visible(request)
            assert await thread.locator(".reason-said").text_content() == (
                "The model said " + visible(words)
            )
            path = thread.locator('.call[data-call="c_name"] h3 .path')
            assert await path.inner_text() == name  # not escaped twice
            assert name in await thread.locator("details > summary").first.inner_text()
            # Side by side, each side's tooltip is its whole line: written out too.
            await thread.locator('.call[data-call="c_conf"] button.split-toggle').click()
            added = thread.locator('.call[data-call="c_conf"] pre.diff-scroll.split .side-new')
            assert await added.last.get_attribute("title") == "+" + visible(new_line, "\t")
            assert hidden_in(await page.evaluate("document.body.innerText")) == []
            editor = thread.locator('.call[data-call="c_conf"] textarea.edit-args')
            edited = await editor.evaluate("e => e.value")
            assert hidden_in(edited) == [] and r"\u202e" in edited
            assert json.loads(edited) == {"path": "conf.txt", "content": new_line + "\n"}

            # The thread's history in the chat view.
            await page.goto(f"{url}/#chat/{THREAD}")
            await log.locator(".line.agent").wait_for()
            shown = await log.inner_text()
            assert f"you> {visible(request)}" in shown
            assert f"agent> {visible(words)}" in shown
            assert hidden_in(shown) == []
        finally:
            await browser.done(page)

    with paused(workspace, request, words, calls, ask=False) as url:
        browser.call(review(url))


def test_changed_words_are_marked_on_the_changed_letters_after_emoji(
    workspace: Workspace, browser: BrowserThread
):
    """Five emoji (two UTF-16 units each, one code point) and a zero-width space (written out
    as twelve characters) before the changed word: the marks hold exactly the changed words,
    unified and side by side."""
    before = "😀😀😀😀😀 \u200bname = alpha  # the mirror the build reads"
    after = "😀😀😀😀😀 \u200bname = bravo  # the mirror the build reads"
    (workspace.root / "emoji.txt").write_text(before + "\n")
    calls = [tool_call("write_file", {"path": "emoji.txt", "content": after + "\n"}, id="c_e")]

    async def review(url: str) -> None:
        page = await open_inbox(browser, url)
        try:
            call = page.locator('.call[data-call="c_e"]')
            for layout in ("unified", "side by side"):
                if layout == "side by side":
                    await call.locator("button.split-toggle").click()
                    await call.locator("pre.diff-scroll.split").wait_for()
                diff = call.locator("pre.diff-scroll")
                removed, added = diff.locator(".text.del"), diff.locator(".text.add")
                assert await removed.inner_text() == "-" + visible(before, "\t"), layout
                assert await added.inner_text() == "+" + visible(after, "\t"), layout
                assert await removed.locator("mark.word").all_inner_texts() == ["alpha"], layout
                assert await added.locator("mark.word").all_inner_texts() == ["bravo"], layout
        finally:
            await browser.done(page)

    with paused(workspace, f"{KEY} rename it", "Renaming.", calls) as url:
        browser.call(review(url))


def test_long_tokens_wrap_and_the_page_never_scrolls_sideways(
    workspace: Workspace, browser: BrowserThread
):
    """A 4,000-character token in the request, a 5,000-character one in the model's words, a
    200-character file name and a 3,000-character line in the file: in a 1,280 px window
    neither the inbox nor the chat view scrolls sideways; the diff scrolls within itself."""
    name = "n" * 196 + ".txt"
    content = "short line\n" + "x" * 3000 + "\n"
    calls = [tool_call("write_file", {"path": name, "content": content}, id="c_long")]
    request = f"{KEY} keep this " + "r" * 4000
    words = "Here it is: " + "w" * 5000

    async def page_width(page: Any) -> tuple[int, int]:
        return tuple(
            await page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        )

    async def review(url: str) -> None:
        page = await open_inbox(browser, url)
        try:
            call = page.locator('.call[data-call="c_long"]')
            await call.locator("details.args-box summary").click()  # the arguments shown too
            scrolled, window = await page_width(page)
            assert scrolled <= window
            diff = call.locator("pre.diff-scroll")
            inner, box = await diff.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert inner > box and box <= window  # the long line scrolls inside the diff

            await page.goto(f"{url}/#chat/{THREAD}")
            await page.locator("#chat-log .line.agent").wait_for()
            scrolled, window = await page_width(page)
            assert scrolled <= window
        finally:
            await browser.done(page)

    with paused(workspace, request, words, calls) as url:
        browser.call(review(url))


def test_the_page_writes_out_what_the_terminal_writes_out(browser: BrowserThread):
    """text.js's `visible` against core/text.py's, over every code point of the Basic
    Multilingual Plane (lone surrogates included) and a few past it: the same characters are
    written out, the same way, for a name (nothing kept) and for a line of a file (tab kept)."""
    script = Path(__file__).resolve().parents[2] / "web" / "static" / "text.js"
    astral = [0x1F600, 0x1D173, 0xE0001, 0xE0020, 0xF0000, 0x10FFFF]
    points = [*range(0x10000), *astral]

    async def written_out() -> dict[str, dict[str, str]]:
        page = await browser.tab()
        try:
            await page.add_script_tag(path=str(script))
            return dict(
                await page.evaluate(
                    """points => Object.fromEntries(["", "\\t"].map(keep => [keep,
                      Object.fromEntries(points
                        .map(p => [p, visible(String.fromCodePoint(p), keep)])
                        .filter(([p, shown]) => shown !== String.fromCodePoint(p)))]))""",
                    points,
                )
            )
        finally:
            await browser.done(page)

    found = browser.call(written_out())
    for keep in ("", "\t"):
        expected = {
            str(point): shown
            for point in points
            if (shown := visible(chr(point), keep)) != chr(point)
        }
        assert found[keep] == expected, keep
