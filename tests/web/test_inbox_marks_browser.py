"""The inbox marks what a line cannot show by itself (issue 41), in Debian's headless Chromium
against a real `fsagent serve` and the stand-in LLM: each look-alike letter, sign drawn for
whitespace and control character the server flags (core/changes/marks.py) is its own mark on
its line, named in its title, in the unified and side-by-side views, a cut diff's first view
and the whole diff; the notes the server writes after a run stay on the page."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from chromium import BrowserThread

from conftest import Workspace
from fake_llm import FakeLLM, reply, text, tool_call
from serving import TOKEN, ServeProcess, by_request

DOCS = Path(__file__).resolve().parents[2] / "docs"
AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
EMOJI = "😀😀😀😀😀"  # one code point each, two UTF-16 units: a mark counted in units lands 5 late
ER = "U+0440 CYRILLIC SMALL LETTER ER"
U = "U+0443 CYRILLIC SMALL LETTER U"
ROW_PX = 18  # diff.js's DIFF_ROW_PX: each drawn row's height


THREAD = "t"


@contextmanager
def paused(workspace: Workspace, calls: list[Any]) -> Iterator[str]:
    """`fsagent serve` with thread 't' paused on `calls`; yields the server's URL."""
    script = by_request({"please": [reply("Done as asked.", tool_calls=calls), text("Done.")]})
    with FakeLLM(script, auto_route="filesystem") as llm:
        served = ServeProcess(workspace, llm.base_url, "--max-tokens", "30000")
        said = httpx.post(
            f"{served.url}/api/threads/{THREAD}/messages", json={"text": "please"}, timeout=60
        )
        assert '"status": "pending"' in said.text, said.text
        try:
            yield served.url
        finally:
            served.kill()


async def open_inbox(browser: BrowserThread, url: str) -> Any:
    page = await browser.tab(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(120_000)  # two shared cores, other tests beside it
    await page.goto(f"{url}/#inbox")
    await page.fill("#token-input", TOKEN)
    await page.click("#use-token")
    await page.locator(f'article.thread[data-thread="{THREAD}"] pre.diff-scroll').first.wait_for()
    return page


def mirror(n: int, host: str) -> str:
    return f"mirror {n} = https://{host}.org/simple/{n}\n"


def long_line(host: str) -> str:
    """A line too long to draw whole: shown by its change, `+[col 202] …`."""
    return "x" * 200 + f" https://{host}.org " + "y" * 200 + "\n"


async def marks(line: Any) -> list[tuple[str, str, str]]:
    """Each flagged character's mark in a drawn line: its class, its text and its title."""
    found = await line.locator("mark.flag").evaluate_all(
        "marks => marks.map(m => [m.className, m.textContent, m.title])"
    )
    return [tuple(mark) for mark in found]


async def before_marks(line: Any) -> list[str]:
    """The line's text before each flagged character's mark: where the mark is."""
    return list(
        await line.evaluate(
            """line => [...line.querySelectorAll("mark.flag")].map(mark => {
                 const range = document.createRange();
                 range.setStart(line, 0);
                 range.setEndBefore(mark);
                 return range.toString();
               })"""
        )
    )


def test_look_alikes_and_drawn_whitespace_are_marked_where_they_are(
    workspace: Workspace, browser: BrowserThread, tmp_path: Path
):
    """`pypi` -> `руpi` after five emoji: exactly `р` and `у` are marked, on those letters,
    named, unified and side by side, with the server's warning under them; a trailing space,
    a tab for spaces and a no-break space are marked as the signs drawn for them, with the
    legend; an edit's preview, a long line's part and a written-out ESC are marked where they
    are; in a cut 300-line rewrite the look-alike on its second line is marked in the first
    view, under the run's warning, and the one on line 250 once the whole diff is loaded;
    axe-core finds nothing wrong (the marks' contrast)."""
    old_conf = f"{EMOJI} index = https://pypi.org/simple"
    new_conf = f"{EMOJI} index = https://руpi.org/simple"
    (workspace.root / "pip.conf").write_text(old_conf + "\n")
    (workspace.root / "build.sh").write_text("rm -rf ./build\nmake all\n    cc main.c\n")
    (workspace.root / "long.txt").write_text(long_line("pypi"))
    (workspace.root / "ctl.txt").write_text("a = 1\n")
    (workspace.root / "mirrors.txt").write_text("".join(mirror(n, "pypi") for n in range(300)))
    rewrite = "".join(
        mirror(n, "руpi" if n in (1, 250) else "pypi").replace("simple", "s") for n in range(300)
    )
    calls = [
        tool_call("write_file", {"path": "pip.conf", "content": new_conf + "\n"}, id="c_conf"),
        tool_call(
            "write_file",
            {"path": "build.sh", "content": "rm -rf\u00a0./build\nmake all \n\tcc main.c\n"},
            id="c_ws",
        ),
        tool_call("write_file", {"path": "mirrors.txt", "content": rewrite}, id="c_big"),
        tool_call("write_file", {"path": "long.txt", "content": long_line("руpi")}, id="c_long"),
        tool_call("write_file", {"path": "ctl.txt", "content": "a = 1\x1b[2J\n"}, id="c_ctl"),
    ]

    async def review(url: str) -> None:
        page = await open_inbox(browser, url)
        try:
            conf = page.locator('.call[data-call="c_conf"]')
            for layout in ("unified", "side by side"):
                if layout == "side by side":
                    await conf.locator("button.split-toggle").click()
                    await conf.locator("pre.diff-scroll.split").wait_for()
                added = conf.locator("pre.diff-scroll .text.add")
                assert await added.inner_text() == "+" + new_conf, layout
                assert await marks(added) == [
                    ("flag lookalike", "р", ER),
                    ("flag lookalike", "у", U),
                ], layout
                at = "+" + new_conf[: new_conf.index("р")]
                assert await before_marks(added) == [at, at + "р"], layout
                assert await marks(conf.locator(".text.del")) == [], layout
            warning = conf.locator(".row-note", has_text="⚠ look-alike characters (+): р U+0440")
            assert await warning.inner_text() == f"⚠ look-alike characters (+): р {ER}, у {U}"
            await shoot(conf, tmp_path / "look-alike.png")
            await conf.locator("input[type=radio][value=edit]").check()  # the edit's preview too
            edited = conf.locator(".edit-preview span.add")
            await edited.wait_for()
            assert await marks(edited) == [("flag lookalike", "р", ER), ("flag lookalike", "у", U)]

            # A long line's part counts from after its `[col N] `.
            part = page.locator('.call[data-call="c_long"] pre.diff-scroll .text.add')
            drawn = await part.inner_text()
            assert drawn.startswith("+[col ") and "руpi" in drawn
            assert await marks(part) == [("flag lookalike", "р", ER), ("flag lookalike", "у", U)]
            at = drawn[: drawn.index("р")]
            assert await before_marks(part) == [at, at + "р"]

            ws = page.locator('.call[data-call="c_ws"] pre.diff-scroll')
            rows = ws.locator(".text.add")
            assert await rows.all_inner_texts() == ["+rm -rf⍽./build", "+make all·", "+→cc main.c"]
            assert await marks(rows.nth(0)) == [("flag whitespace", "⍽", "U+00A0 NO-BREAK SPACE")]
            assert await marks(rows.nth(1)) == [("flag whitespace", "·", "U+0020 SPACE")]
            assert await before_marks(rows.nth(1)) == ["+make all"]
            assert await marks(rows.nth(2)) == [
                ("flag whitespace", "→", "U+0009 CHARACTER TABULATION")
            ]
            notes = await ws.locator(".row-note").all_inner_texts()
            assert "⚠ unusual characters (+): U+00A0 NO-BREAK SPACE" in notes
            assert notes[-1].startswith("(· a space, → a tab, ⍽ another kind of space")
            await shoot(page.locator('.call[data-call="c_ws"]'), tmp_path / "whitespace.png")

            # A control character is marked as the terminal writes it out.
            ctl = page.locator('.call[data-call="c_ctl"] pre.diff-scroll .text.add')
            assert await ctl.inner_text() == "+a = 1\\x1b[2J"
            assert await marks(ctl) == [("flag control", "\\x1b", "U+001B ESCAPE")]
            assert await before_marks(ctl) == ["+a = 1"]

            big = page.locator('.call[data-call="c_big"]')
            scroller = big.locator("pre.diff-scroll")
            second = scroller.locator(".text.add", has_text="mirror 1 =")
            assert await marks(second) == [("flag lookalike", "р", ER), ("flag lookalike", "у", U)]
            assert await before_marks(second) == ["+mirror 1 = https://", "+mirror 1 = https://р"]
            # The run's warning is in the first view too, with the letters it names.
            await scroller.locator(".row-note", has_text="⚠ look-alike characters (+)").wait_for()
            await big.locator("button.whole-diff").click()
            await big.locator(".status", has_text="the whole diff").wait_for()
            far = scroller.locator(".text.add", has_text="mirror 250 =")
            await scroller.evaluate(
                f"e => {{ e.scrollTop = 495 * {ROW_PX}; }}"
            )  # pairs: 2 rows a line
            await far.wait_for()
            assert await marks(far) == [("flag lookalike", "р", ER), ("flag lookalike", "у", U)]
            await scroller.evaluate("e => { e.scrollTop = e.scrollHeight; }")
            await scroller.locator(".row-note", has_text="⚠ look-alike characters (+)").wait_for()

            await page.evaluate(AXE.read_text())  # the marks' colours, four diffs' names
            violations = await page.evaluate(
                "async () => (await axe.run(document))"
                ".violations.map(v => "
                "`${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`)"
            )
            assert violations == [], "axe-core found:\n" + "\n".join(violations)
        finally:
            await browser.done(page)

    with paused(workspace, calls) as url:
        browser.call(review(url))


async def shoot(node: Any, shot: Path) -> None:
    await node.screenshot(path=str(shot))
    if os.environ.get("FSAGENT_DOCS_SHOTS"):  # docs/reviewing.md's pictures, on request
        shutil.copy(shot, DOCS / shot.name)
