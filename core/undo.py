"""Taking approved writes back: which writes an undo covers, the steps that reverse them,
checked against what is there now, and running those steps as writes of their own.

The steps come from each write's record (core.changes.undo_capture) and its ledger row (the write's
result), newest write first:

    write_file, patch_file   restore the old content, or delete the file it created
    touch, make_dir          delete what it created (a folder only while it is empty)
    copy                     delete the copy, or restore the file it replaced
    move                     move it back, then restore the file it replaced
    delete                   make the file, or the folder and everything in it, again
                             (one that stopped part-way: what it deleted, again)

plus removing the folders a write created on its way (only while they are empty). Every path
a step changes must be as the write left it (hash check); one that changed since is refused
unless forced, after the person has seen the diff.

An undo is a write like any other: the person approves the plan; each step is claimed in the
ledger before it runs, so a run cut off by a crash is finished from the store and no step is
ever applied twice; every step is an audit row (decision `undo`); and the model is told in the
thread what was undone.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from core.approval.approval import new_id, tool_message
from core.changes.marks import mark
from core.changes.preview import cut, new_file_lines
from core.changes.server_reads import ReadError, Tools, ask, file_sha, info
from core.changes.undo_capture import Budget, fingerprint, sha256_text, shown
from core.errors import ThreadError
from core.text import NOTE_MARK, counted
from core.threads.audit import now
from core.threads.ledger import run_write_once
from core.threads.messages import content_text
from store.base import AuditRow, LedgerRow, Store, UndoRecord, UndoRun

EMPTY_SHA256 = sha256_text("")
NOTE_PREFIX = "note-"  # the id of the message that tells the model what was undone

State = dict[str, Any]  # {"absent": True} | {"sha256": ...} | {"tree": {...}} | {"folder": True}
ABSENT: State = {"absent": True}


class NothingToUndo(Exception):  # noqa: N818 - a normal outcome, not an error
    """There is nothing (left) to undo; the message says why. Not an error."""


class UndoError(ThreadError):
    """An undo that cannot be planned as asked (an unknown call or turn); exit code 1."""


VERBS = {
    "restore": ("restores", "restored"),
    "delete": ("deletes", "deleted"),
    "make": ("makes", "made"),
    "move": ("moves", "moved"),
    "remove": ("removes", "removed"),
}


@dataclass(frozen=True)
class Step:
    tool: str
    args: dict[str, Any]
    expect: dict[str, State]  # the state each path must be in just before the step runs
    verb: str  # a key of VERBS: with `what`, the step in words
    what: str
    soft: bool = False  # a folder removed only while empty: kept otherwise, not a failure
    # Made again only where it is missing (a delete that stopped part-way left the rest):
    # one that is there is left as it is, neither a problem nor a failure.
    if_missing: bool = False

    @property
    def doing(self) -> str:
        """The step as the plan shows it: "restores a.txt to ..."."""
        return f"{VERBS[self.verb][0]} {self.what}" + (" if it is empty" if self.soft else "")

    @property
    def done(self) -> str:
        """The step as the model is told it: "restored a.txt to ..."."""
        return f"{VERBS[self.verb][1]} {self.what}"

    def effect(self) -> dict[str, State]:
        """The state of the paths it changes, once it has run."""
        if self.tool == "write_file":
            return {self.args["path"]: {"sha256": sha256_text(self.args["content"])}}
        if self.tool == "move":
            moved = self.expect.get(self.args["source"], {"present": True})
            return {self.args["source"]: ABSENT, self.args["destination"]: moved}
        if self.tool == "make_dir":
            return {self.args["path"]: {"folder": True}}
        return {} if self.soft else {self.args["path"]: ABSENT}


@dataclass
class Item:
    """One write of an undo, and what taking it back takes."""

    record: UndoRecord
    steps: list[Step] = field(default_factory=list)
    cannot: str | None = None  # why it cannot be undone: left out
    nothing: str | None = None  # why there is nothing to undo: left out
    lines: list[str] = field(default_factory=list)  # what it will restore, as the person sees it
    problems: list[str] = field(default_factory=list)  # changed since the write
    present: set[int] = field(default_factory=set)  # steps whose path a stopped delete left

    @property
    def runs(self) -> bool:
        return bool(self.steps) and self.cannot is None


@dataclass
class UndoPlan:
    undo_id: str
    what: str  # "turn 3", "call call_ab12"
    items: list[Item]  # newest write first
    force: bool

    @property
    def to_run(self) -> list[Item]:
        return [item for item in self.items if item.runs]

    @property
    def blocked(self) -> bool:
        """Something changed since its write, and the undo is not forced."""
        return not self.force and any(item.problems for item in self.to_run)


# --- which writes ----------------------------------------------------------------------------


async def standing(store: Store, thread: str) -> list[tuple[UndoRecord, LedgerRow]]:
    """The thread's records of writes that ran, newest first, with their ledger rows."""
    found = []
    for record in reversed(await store.undo_records(thread)):
        row = await store.ledger_row(thread, record.message_id, record.call_id)
        if row is None:
            continue
        if not (row.status == "done" and row.failed) or stopped_delete(record, row):
            found.append((record, row))
    return found


# The server's answer to a recursive delete that stopped part-way (mcp_servers/stopped.py):
# what it had deleted is gone, the rest is back under the folder's name.
STOPPED_DELETE = re.compile(r"delete '.*' stopped: ([\d,]+) of [\d,]+ files deleted; ")


def stopped_delete(record: UndoRecord, row: LedgerRow) -> bool:
    """A failed delete that deleted part of its folder: its undo makes that part again."""
    if record.tool != "delete" or not row.failed:
        return False
    said = STOPPED_DELETE.match(first_line(row.result or "").removeprefix("Error: "))
    return said is not None and int(said.group(1).replace(",", "")) > 0


def choose(
    ran: list[tuple[UndoRecord, LedgerRow]], call: str | None, turn: int | None
) -> tuple[str, list[tuple[UndoRecord, LedgerRow]]]:
    """What an undo covers, and how to name it: the named call, the named turn, or the last
    turn that changed anything. Raises NothingToUndo or UndoError."""
    if not ran:
        raise NothingToUndo("Nothing to undo: no approved write has run in this thread.")
    if call is not None:
        same = [(r, row) for r, row in ran if r.call_id == call]
        if not same:
            calls = ", ".join(dict.fromkeys(r.call_id for r, _ in ran))
            raise UndoError(f"no write call {call} ran in this thread; the calls are {calls}")
        open_ = [(r, row) for r, row in same if r.undone_by is None]
        if not open_:
            raise NothingToUndo(f"Nothing to undo: call {call} was undone already.")
        return f"call {call}", open_[:1]
    chosen = turn if turn is not None else ran[0][0].turn
    in_turn = [(r, row) for r, row in ran if r.turn == chosen]
    if not in_turn:
        turns = ", ".join(str(t) for t in sorted({r.turn for r, _ in ran}))
        raise UndoError(f"turn {chosen} ran no approved write; turns with writes: {turns}")
    open_ = [(r, row) for r, row in in_turn if r.undone_by is None]
    if not open_:
        earlier = "" if turn is not None else "; --turn N undoes an earlier turn"
        raise NothingToUndo(
            f"Nothing to undo: the changes of turn {chosen} were undone already{earlier}."
        )
    return f"turn {chosen}", open_


# --- the steps that take one write back --------------------------------------------------------


def write_result(row: LedgerRow) -> dict[str, Any]:
    """A write's JSON result from the ledger (after the note an edited call starts with)."""
    text = row.result or ""
    if not text.startswith("{"):
        text = text.split("\n", 1)[-1]
    result: dict[str, Any] = json.loads(text)
    return result


def remove_created(folders: list[str], root: str | None, tool: str) -> list[Step]:
    """The folders a write created on its way, innermost first, each only while empty."""
    return [
        Step(
            "delete",
            {"path": folder},
            {},
            "remove",
            f"folder {shown(folder, root)}/ ({tool} created it)",
            soft=True,
        )
        for folder in reversed(folders)
    ]


def steps_for(record: UndoRecord, row: LedgerRow, force: bool) -> Item:
    """How to take one write back; an item that cannot, or need not, says why."""
    item = Item(record)
    kept = record.record
    if not kept.get("undoable"):
        item.cannot = str(kept.get("why", "nothing was kept for it"))
        return item
    if row.status != "done":
        item.cannot = "fsagent stopped while it ran, so what it changed is not known"
        return item
    try:
        if stopped_delete(record, row):
            item.steps = steps_stopped_delete(record)
        else:
            item.steps = STEPS[record.tool](record, write_result(row), force)
    except CannotTakeBack as why:
        item.cannot = str(why)
    except (KeyError, TypeError, ValueError) as error:
        item.cannot = f"its record or result is not one this version understands ({error})"
    if not item.steps and item.cannot is None:
        item.nothing = "it changed nothing an undo could put back"
    return item


class CannotTakeBack(Exception):
    """A write whose record does not let it be put back exactly; the message says why."""


def steps_write(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    path, before = kept["path"], kept["before"]
    left = {path: {"sha256": result["new_sha256"]}}
    if before["state"] == "absent" and result.get("old_sha256"):
        raise CannotTakeBack(
            "a file appeared there between its check and the write, which replaced it; what "
            "it replaced was not kept"
        )
    if before["state"] == "absent":
        what = f"{shown(path, root)} ({record.tool} created it)"
        return [Step("delete", {"path": path}, left, "delete", what)] + remove_created(
            before["created"], root, record.tool
        )
    if before["sha256"] != result.get("old_sha256"):
        raise CannotTakeBack(
            "what it replaced could not be read exactly before it ran (binary, or changed "
            "while it was read)"
        )
    what = f"{shown(path, root)} to its content before {record.tool}"
    content = {"path": path, "content": before["content"]}
    return [Step("write_file", content, left, "restore", what)]


def steps_touch(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    path, before = kept["path"], kept["before"]
    if before["state"] != "absent" or result.get("created") is False:
        return []  # it only changed a time stamp (of a file that appeared after its check)
    left = {path: {"sha256": EMPTY_SHA256}}
    what = f"{shown(path, root)} (touch created it)"
    return [Step("delete", {"path": path}, left, "delete", what)] + remove_created(
        before["created"], root, "touch"
    )


def steps_make_dir(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    before = kept["before"]
    if before["state"] != "absent" or result.get("created") is False:
        return []  # the folder was there: made by someone else after its check, if not before
    return remove_created([*before["created"], kept["path"]], root, "make_dir")


def steps_copy(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    destination, before = kept["destination"], kept["before"]
    if "copied_tree" in kept:
        left: State = {"tree": kept["copied_tree"]}
    else:
        left = {"sha256": result["sha256"]}
    where = shown(destination, root)
    if before["state"] == "absent":
        folder = "copied_tree" in kept
        args = {"path": destination, "recursive": True} if folder else {"path": destination}
        what = f"{where}{'/' if folder else ''} (the copy)"
        steps = [Step("delete", args, {destination: left}, "delete", what)]
        return steps + remove_created(before["created"], root, "copy")
    if before["state"] != "file":
        return []
    what = f"{where} to its content before the copy replaced it"
    content = {"path": destination, "content": before["content"]}
    return [Step("write_file", content, {destination: left}, "restore", what)]


def steps_move(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    source, destination, before = kept["source"], kept["destination"], kept["before"]
    if before["state"] == "failing":
        return []
    args = {"source": destination, "destination": source, "overwrite": force}
    what = f"{shown(destination, root)} back to {shown(source, root)}"
    steps = [Step("move", args, {destination: kept["moved"], source: ABSENT}, "move", what)]
    if before["state"] == "file":
        content = {"path": destination, "content": before["content"]}
        what = f"{shown(destination, root)}, which the move replaced"
        steps.append(Step("write_file", content, {destination: ABSENT}, "restore", what))
    elif before["state"] == "absent":
        steps += remove_created(before["created"], root, "move")
    return steps


def steps_delete(record: UndoRecord, result: dict[str, Any], force: bool) -> list[Step]:
    kept, root = record.record, record.record.get("root")
    path, before = kept["path"], kept["before"]
    if before["state"] == "file":
        what = f"{shown(path, root)} again, as it was before the delete"
        content = {"path": path, "content": before["content"]}
        return [Step("write_file", content, {path: ABSENT}, "make", what)]
    if before["state"] != "tree":
        return []
    files, folders = before["files"], before["folders"]
    what = (
        f"folder {shown(path, root)}/ again, with its {counted(len(files), 'file')} in "
        f"{counted(len(folders), 'folder')}"
    )
    steps = [Step("make_dir", {"path": path}, {path: ABSENT}, "make", what)]
    # What is inside is checked by the folder's own check: it was absent.
    for folder in folders:
        inner = posixpath.join(path, folder)
        steps.append(Step("make_dir", {"path": inner}, {}, "make", f"{shown(inner, root)}/"))
    for name, content in sorted(files.items()):
        inner = posixpath.join(path, name)
        args = {"path": inner, "content": content}
        steps.append(Step("write_file", args, {}, "make", shown(inner, root)))
    return steps


def steps_stopped_delete(record: UndoRecord) -> list[Step]:
    """A recursive delete that stopped part-way: what it deleted is made again, what it
    did not reach stays as it is (each step runs only where its path is missing)."""
    kept, root = record.record, record.record.get("root")
    path, before = kept["path"], kept["before"]
    if before["state"] != "tree":
        return []
    steps = [Step("make_dir", {"path": path}, {path: ABSENT}, "make", f"{shown(path, root)}/")]
    for folder in before["folders"]:
        inner = posixpath.join(path, folder)
        steps.append(
            Step("make_dir", {"path": inner}, {inner: ABSENT}, "make", f"{shown(inner, root)}/")
        )
    for name, content in sorted(before["files"].items()):
        inner = posixpath.join(path, name)
        args = {"path": inner, "content": content}
        what = f"{shown(inner, root)} again"
        steps.append(Step("write_file", args, {inner: ABSENT}, "make", what))
    return [replace(step, if_missing=True) for step in steps]


STEPS = {
    "write_file": steps_write,
    "patch_file": steps_write,
    "touch": steps_touch,
    "make_dir": steps_make_dir,
    "copy": steps_copy,
    "move": steps_move,
    "delete": steps_delete,
}


# --- checking a plan against what is there now --------------------------------------------------


async def current_state(tools: Tools, path: str, expected: State) -> State:
    found = await info(tools, path)
    if found is None:
        return ABSENT
    if "sha256" in expected and found["type"] == "file":
        return {"sha256": await file_sha(tools, path)}
    if "tree" in expected and found["type"] == "folder":
        return {"tree": await fingerprint(path, tools, Budget(0))}
    return {"folder": True} if found["type"] == "folder" else {"present": True}


def matches(expected: State, current: State) -> bool:
    if "absent" in expected:
        return "absent" in current
    if "sha256" in expected or "tree" in expected:
        return current == expected
    if "folder" in expected:
        return "folder" in current or "tree" in current
    return "absent" not in current


def difference(path: str, expected: State, current: State, record: UndoRecord) -> str:
    where, tool = shown(path, record.record.get("root")), record.tool
    if "absent" in expected:
        return f"{where} exists now: something made it after {tool}"
    if "absent" in current:
        return f"{where} is gone since {tool}"
    if "tree" in expected:
        return f"{where} changed since {tool}: files were added, removed or changed in it"
    return f"{where} changed since {tool} (its sha256 is not the one {tool} left)"


async def check(item: Item, tools: Tools, simulated: dict[str, State]) -> None:
    """Fill the item's problems and the lines that show what it will restore. `simulated`
    holds the paths newer items of the plan change, as they will be by then."""
    root = item.record.record.get("root")
    for index, step in enumerate(item.steps):
        if step.if_missing and await present(step, tools, simulated):
            item.present.add(index)
            continue
        for path, expected in step.expect.items():
            try:
                current = simulated.get(path) or await current_state(tools, path, expected)
            except ReadError as error:  # outside the roots this session was started with
                item.problems.append(f"{shown(path, root)} cannot be checked: {error}")
                continue
            if not matches(expected, current):
                item.problems.append(difference(path, expected, current, item.record))
        item.lines += await step_lines(step, tools, simulated, root)
        simulated.update(step.effect())
    left = sum(item.steps[index].tool == "write_file" for index in item.present)
    if left:  # the truth about a delete that stopped part-way
        item.lines.append(
            f"(the delete stopped part-way: {left:,} of its files are still there and stay "
            "as they are)"
        )
    # Drawn as an approval's preview is (core.changes.marks): an undo's yes is a decision too.
    item.lines = mark(cut(item.lines)).lines


async def present(step: Step, tools: Tools, simulated: dict[str, State]) -> bool:
    """Whether the path a step makes only where missing is there (now, or by then)."""
    (path,) = step.expect
    if path in simulated:
        return "absent" not in simulated[path]
    try:
        return await info(tools, path) is not None
    except ReadError:
        return False  # said by the check that follows


async def step_lines(
    step: Step, tools: Tools, simulated: dict[str, State], root: str | None
) -> list[str]:
    """What a step will do, as the person reviews it: a content restore as a diff."""
    if step.tool != "write_file" or not step.expect:
        return [step.doing]
    path = step.args["path"]
    if path in simulated:  # a newer write of this plan changes it first
        return [step.doing]
    try:
        found = await info(tools, path)
    except ReadError as error:
        return [step.doing, f"(no preview: {error})"]
    if found is None:
        return [step.doing + ":", *new_file_lines(shown(path, root), step.args["content"])]
    try:
        result = json.loads(await ask(tools, "write_file", {**step.args, "dry_run": True}))
    except (ReadError, ValueError) as error:
        return [step.doing, f"(no preview: {error})"]
    return [step.doing + ":", *(result.get("diff") or ["(no change)"])]


async def plan_undo(
    store: Store,
    thread: str,
    tools: Tools,
    *,
    call: str | None = None,
    turn: int | None = None,
    force: bool = False,
) -> UndoPlan:
    """What an undo of the last turn (or `call`, or `turn`) would do, checked, running
    nothing. Raises NothingToUndo when there is nothing left to undo."""
    what, chosen = choose(await standing(store, thread), call, turn)
    items = [steps_for(record, row, force) for record, row in chosen]
    simulated: dict[str, State] = {}
    for item in items:
        if item.runs:
            await check(item, tools, simulated)
    plan = UndoPlan(new_id("undo"), what, items, force)
    if not plan.to_run:
        reasons = "; ".join(
            f"{item.record.tool} {item.record.call_id}: {item.cannot or item.nothing}"
            for item in items
        )
        if any(item.cannot for item in items):
            raise UndoError(f"{what} cannot be undone: {reasons}")
        raise NothingToUndo(f"Nothing to undo in {what}: {reasons}.")
    return plan


# --- running an undo -------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a run of an undo did, for the person and the model."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.failed


def run_plan(plan: UndoPlan, by: str) -> dict[str, Any]:
    """What the store keeps of an approved plan: enough to finish it after a crash."""
    seqs = [item.record.seq for item in plan.to_run]
    root = plan.items[0].record.record.get("root") if plan.items else None
    return {"seqs": seqs, "force": plan.force, "by": by, "what": plan.what, "root": root}


async def begin(store: Store, thread: str, plan: UndoPlan, by: str) -> UndoRun:
    """Record an approved undo and its audit rows, before any step runs."""
    body = run_plan(plan, by)
    if not await store.begin_undo(thread, plan.undo_id, body, body["seqs"]):
        raise NothingToUndo("Nothing to undo: those changes were undone already.")
    run = UndoRun(thread, plan.undo_id, body, "running")
    # A step the plan found needless (what a stopped delete never reached) is no audit row.
    needless = {(item.record.seq, index) for item in plan.to_run for index in item.present}
    await store.record_audit(
        [
            audit_row(thread, run, item.record, number, step)
            for item, number, step in numbered_steps(await items_of(store, run))
            if (item.record.seq, item.steps.index(step)) not in needless
        ]
    )
    return run


async def items_of(store: Store, run: UndoRun) -> list[Item]:
    """The items of an approved undo, newest write first, as they were planned."""
    by_seq = {record.seq: record for record in await store.undo_records(run.thread)}
    items = []
    for seq in run.plan["seqs"]:
        record = by_seq[seq]
        row = await store.ledger_row(run.thread, record.message_id, record.call_id)
        if row is not None:
            items.append(steps_for(record, row, bool(run.plan.get("force"))))
    return items


def numbered_steps(items: list[Item]) -> list[tuple[Item, int, Step]]:
    numbered, number = [], 0
    for item in items:
        for step in item.steps:
            number += 1
            numbered.append((item, number, step))
    return numbered


def step_call(record: UndoRecord, number: int, step: Step) -> dict[str, Any]:
    """A step as a write call of its own, keyed in the ledger and the audit by the undo."""
    return {"id": f"{record.call_id}.undo{number}", "name": step.tool, "args": step.args}


def audit_row(thread: str, run: UndoRun, record: UndoRecord, number: int, step: Step) -> AuditRow:
    forced = ", forced" if run.plan.get("force") else ""
    return AuditRow(
        time=now(),
        thread=thread,
        message_id=run.undo_id,
        call_id=step_call(record, number, step)["id"],
        tool=step.tool,
        args=step.args,
        decision="undo",
        reason=f"undoes {record.tool} {record.call_id} of turn {record.turn}{forced}",
        by=str(run.plan.get("by", "person")),
    )


@dataclass(frozen=True)
class StepRun:
    """One step as it ran: reported as a tool call and its result."""

    call: dict[str, Any]
    text: str
    failed: bool


async def run_steps(
    store: Store, tools: Tools, run: UndoRun, outcome: Outcome
) -> AsyncIterator[StepRun]:
    """Run an approved undo's steps in order, each at most once (the ledger), checking each
    path just before its step unless forced. A step that fails stops the rest of its write's
    steps; the other writes go on."""
    force = bool(run.plan.get("force"))
    stopped: set[int] = set()
    for item, number, step in numbered_steps(await items_of(store, run)):
        record = item.record
        call = step_call(record, number, step)
        if record.seq in stopped:
            yield StepRun(call, "Not run: an earlier step of this write failed.", True)
            continue
        row = await store.ledger_row(run.thread, run.undo_id, call["id"])
        if step.if_missing and row is None and await present(step, tools, {}):
            continue  # the delete never reached it: it stays as it is
        text, failed = await run_step(store, tools, run, call, step, force)
        if failed and step.soft and "not empty" in text:
            text, failed = f"Kept {step.args['path']}: it is not empty.", False
        if failed:
            stopped.add(record.seq)
            outcome.failed.append(f"{step.tool} that {step.doing}: {first_line(text)}")
        elif not step.soft or text.startswith("{"):
            outcome.done.append(step.done)
        yield StepRun(call, text, failed)


async def run_step(
    store: Store, tools: Tools, run: UndoRun, call: dict[str, Any], step: Step, force: bool
) -> tuple[str, bool]:
    row = await store.ledger_row(run.thread, run.undo_id, call["id"])
    if row is None and not force:
        for path, expected in step.expect.items():
            try:
                current = await current_state(tools, path, expected)
            except ReadError:
                current = {"unreadable": True}
            if not matches(expected, current):
                where = shown(path, run.plan.get("root"))
                text = f"Not run: {where} changed since the undo was planned; nothing changed."
                await store.ledger_claim(run.thread, run.undo_id, call["id"], step.tool, step.args)
                await store.ledger_done(run.thread, run.undo_id, call["id"], text, True)
                return text, True

    async def invoke() -> Any:
        try:
            result = await tools[step.tool].ainvoke({"type": "tool_call", **call})
        except Exception as error:  # a broken pipe to the server must not lose the undo
            return tool_message(call["id"], f"Error: {step.tool} failed: {error}", error=True)
        text = content_text(result.content)
        return tool_message(call["id"], text, error=result.status == "error")

    message = await run_write_once(store, run.thread, run.undo_id, call, step.args, invoke)
    return content_text(message.content), message.status == "error"


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def model_note(run: UndoRun, outcome: Outcome) -> str:
    """What the model is told, in the thread, so its picture of the files stays true."""
    what = run.plan.get("what", "some changes")
    text = f"{NOTE_MARK}The person undid your changes of {what}."
    if outcome.done:
        text += " Undone, newest first: " + "; ".join(outcome.done) + "."
    if outcome.failed:
        text += " Not undone: " + "; ".join(outcome.failed) + "."
    return text + " Read the files again before relying on what you saw of them."
