"""The previews of waiting calls, worked out once per state (issue 43: every listing of the
inbox diffed every waiting call again, twice; eight threads each waiting on a 2,000-line
rewrite listed 42x slower than eight waiting on one-line changes).

A diff (write_file, patch_file) is kept under its `preview_id` (core.changes.binding), which
names the thread, the call, its arguments and the state the server's plan read: the same id is
the same diff, so what is kept can never show another state's. The state is still read at
every look (the server's `plan`, one hash of the file), so a file changed since gives another
id, and that id's diff is worked out fresh. What is kept for an id is all the inbox draws it
with, from one dry run: the cut preview (with its undo note), the whole one (the pages of "Show
the whole diff"), and the diff facts (totals, the first view, the changed words). The listing,
a thread's view and the preview endpoint share it.

Nothing is kept that may not be of the state its id names: the dry run's diff must be of the
content the plan hashed (its `old_sha256`), and the plan is read again after the undo note, so
a file that changed while it was worked out is shown as before and not kept. A call the server
could not plan ("no plan": its id names no state) and the other tools (no diff, a few cheap
reads) are worked out at every look, as before. Entries are dropped least recently used first
once they hold more than LIMIT characters.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.changes.binding import Preview, preview_id, shown
from core.changes.diff_view import WordSpans, first_view_page, is_diff, totals, word_spans
from core.changes.intraline import shown_lines
from core.changes.marks import Flag, mark
from core.changes.plans import Plan, expect_of, plan_of
from core.changes.preview import DIFF_TOOLS, cut, dry_run_views, undo_note
from core.session import ThreadSession
from mcp_servers import race_hook

LIMIT = 64 * 1024 * 1024  # characters kept in all (a 2,000-line rewrite keeps ~0.3 M)
LINE_COST = 64  # what a kept line costs besides its characters (the str, the list slot)
CUT_MARK = "more lines not shown"  # core.changes.preview.cut's last line
# Tests only: a folder with the two FIFOs of mcp_servers/race_hook.py. A diff being worked out
# pauses after its plan (`paused preview planned`) and after its dry run and undo note
# (`paused preview diffed`), so a test can change the file exactly there. Unset, nothing.
PAUSE_ENV = "FSAGENT_TEST_PREVIEW_PAUSE"
_hooks: dict[str, race_hook.Hook] = {}  # by folder: each test names its own

# A kept entry's key: the preview's id, and what its undo note depends on besides the state
# (the thread's undo bytes used, and why the server could not plan it when it said so).
Key = tuple[str, int, str | None]


@dataclass
class Drawn:
    """What the inbox draws one call's diff with, from one dry run."""

    preview: Preview  # the cut preview, with its undo note: the listing's `preview`
    whole: Preview  # every line: the preview endpoint's pages
    facts: dict[str, Any]  # diff_totals, preview_words, and for a cut diff preview_first
    words: WordSpans | None = field(default=None)  # the whole's, made when a page first asks

    def size(self) -> int:
        first = self.facts.get("preview_first") or []
        kept = [*self.preview.lines, *self.whole.lines, *first]
        return sum(len(line) + LINE_COST for line in kept)

    def whole_words(self) -> WordSpans:
        if self.words is None:
            self.words = word_spans(self.whole.lines)
        return self.words


class PreviewCache:
    """Diffs by preview_id, least recently used dropped first past `limit` characters.
    `computed` counts the previews worked out for the inbox (a dry run each), kept or not,
    the usual way too (`worked_out`); `reused` those found kept."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.held = 0
        self.computed = 0
        self.reused = 0
        self._kept: OrderedDict[Key, tuple[Drawn, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    async def worked_out(self, session: ThreadSession, call: Mapping[str, Any]) -> Preview:
        """A cut preview the usual way, for a call the cache does not keep (counted)."""
        self.computed += 1
        return await session.preview(call)

    async def worked_out_whole(self, session: ThreadSession, call: Mapping[str, Any]) -> Preview:
        """A whole preview the usual way, for a call the cache does not keep (counted)."""
        self.computed += 1
        return await session.whole_preview(call)

    def get(self, key: Key) -> Drawn | None:
        found = self._kept.get(key)
        if found is None:
            return None
        self._kept.move_to_end(key)
        self.reused += 1
        return found[0]

    def put(self, key: Key, drawn: Drawn) -> None:
        size = drawn.size()
        if size > self.limit:
            return  # bigger than all the room: worked out at each look instead
        old = self._kept.pop(key, None)
        if old is not None:
            self.held -= old[1]
        self._kept[key] = (drawn, size)
        self.held += size
        while self.held > self.limit:
            _, (_, dropped) = self._kept.popitem(last=False)
            self.held -= dropped

    async def drawn(self, session: ThreadSession, call: Mapping[str, Any]) -> Drawn | None:
        """The call's diff as the inbox draws it, kept or worked out now; None when it is
        no diff or cannot be kept (the caller works it out the usual way)."""
        if call.get("name") not in DIFF_TOOLS:
            return None
        plan = await plan_of(call, session.tools)
        expect = expect_of(plan)
        if plan is None or expect is None:
            return None  # "no plan": an id that names no state binds no diff
        used = await session.store.undo_bytes(session.thread)
        unplanned = call.get("unplanned")
        key: Key = (
            preview_id(session.thread, call, expect),
            used,
            unplanned if isinstance(unplanned, str) else None,
        )
        kept = self.get(key)
        if kept is not None:
            return kept
        await _paused("planned")
        views = await dry_run_views(call, session.tools)
        if views is None or not diffed_as_planned(plan, views[2]):
            return None  # failed, or the file changed between the plan and the dry run
        head, whole, _ = views
        note = await undo_note(call, session.tools, used)
        drawn = made(session.thread, call, plan, (cut(head), note), shown_lines(whole))
        self.computed += 1
        await _paused("diffed")
        if expect_of(await plan_of(call, session.tools)) == expect:
            self.put(key, drawn)  # else it changed while worked out: shown once, not kept
        return drawn


async def _paused(step: str) -> None:
    folder = os.environ.get(PAUSE_ENV)
    if folder:
        hook = _hooks.get(folder) or _hooks.setdefault(folder, race_hook.Hook(folder))
        await asyncio.to_thread(hook.pause, "preview", step)  # the server serves on


def diffed_as_planned(plan: Plan, diffed: str | None) -> bool:
    """Whether the dry run's diff was made from the content the plan read: the sha256 of a
    file, or no file where the plan found none."""
    state = next((e["state"] for e in plan if e.get("argument") == "path"), None)
    if not isinstance(state, dict):
        return False
    if not state.get("exists"):
        return diffed is None
    return state.get("type") == "file" and diffed is not None and state.get("sha256") == diffed


def made(
    thread: str,
    call: Mapping[str, Any],
    plan: Plan,
    cut_lines: tuple[list[str], list[str]],
    whole_lines: list[str],
) -> Drawn:
    """The cut preview (its lines and the undo note after them), the whole one and the facts
    a page draws the diff with (core.changes.diff_view), all from the same dry run, marked
    as ThreadSession.preview and whole_preview mark theirs (core.changes.marks): the note
    after the marking, so it is never marked."""
    head, note = cut_lines
    marked = mark(head)
    preview = shown(thread, call, plan, marked.lines + note, marked.flags)
    marked_whole = mark(whole_lines)
    whole = shown(thread, call, plan, marked_whole.lines, marked_whole.flags)
    return Drawn(preview, whole, facts(preview.lines, whole))


def flag_data(flags: Mapping[int, list[Flag]]) -> dict[str, list[dict[str, Any]]]:
    """Marked characters as JSON: line index (a string) -> each flag."""
    return {str(at): [found.data() for found in flags[at]] for at in sorted(flags)}


def facts(lines: list[str], whole: Preview) -> dict[str, Any]:
    """drawn_diff's keys (web/payloads.py), of the whole diff from the same read."""
    if not is_diff(lines):
        return {}
    cut_at = next((i for i, line in enumerate(lines) if CUT_MARK in line), None)
    if cut_at is None:
        return {"diff_totals": totals(lines), "preview_words": word_spans(lines)}
    # After the cut: the undo note, and a legend of the signs this view draws.
    first, flags = first_view_page(whole.lines, whole.flags, lines[cut_at + 1 :])
    return {
        "diff_totals": totals(whole.lines),
        "preview_first": first,
        "preview_words": word_spans(first),
        "preview_first_flags": flag_data(flags),
    }
