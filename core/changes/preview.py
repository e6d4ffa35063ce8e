"""What a write call would change, worked out before the person decides, changing nothing.

Each preview asks the same MCP server the call would run on, with side-effect-free calls
only: write_file and patch_file with `dry_run=True` (the server returns the diff),
get_file_info and list_directory_with_sizes for delete, move and copy. A preview that fails
says why; it is never silently cut (`cut` says how much was left out). A write that could not
be undone (over the undo limits, binary, a symlink) says so here too (`undo_note`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from core.changes.intraline import blocks
from core.changes.other_calls import is_other_call, other_call_lines
from core.changes.plans import Plan
from core.changes.server_reads import ReadError, ask, info
from core.changes.undo_capture import CAPTURES, capture, undo_lines
from core.text import counted

PREVIEW_LINES = 40
NEW_FILE_HEAD = 15
# Folders listed to count what a delete takes; beyond this the count says "at least".
MAX_FOLDERS_COUNTED = 200

Tools = dict[str, Any]


async def preview(call: Mapping[str, Any], tools: Tools, plan: Plan | None = None) -> list[str]:
    """The lines that show what `call` would do, cut to PREVIEW_LINES with a marker. With the
    server's plan (core.changes.plans), what a delete, copy or move touches is said from it: paths
    as the server resolves them, whole counts, links named as links."""
    return cut(await whole_preview(call, tools, plan, whole=False))


async def whole_preview(
    call: Mapping[str, Any], tools: Tools, plan: Plan | None = None, *, whole: bool = True
) -> list[str]:
    """Every line of what `call` would do, uncut (a reviewer pages through a big diff)."""
    if is_other_call(call):
        return other_call_lines(call, tools, whole=whole)
    make = PREVIEWS.get(call["name"])
    if make is None:
        return []
    if whole and call["name"] == "write_file":
        make = preview_whole_write
    try:
        planned = PLANNED.get(call["name"]) if plan else None
        if planned is not None and plan is not None:
            lines = planned({entry["argument"]: entry for entry in plan}, call["args"])
        else:
            lines = await make(call["args"], tools)
    except ReadError as error:
        lines = [f"(no preview: {error})"]
    except (ValueError, KeyError, TypeError) as error:  # an answer of a shape we did not expect
        lines = [f"(no preview: unexpected answer from the server: {error})"]
    return unplanned_lines(call) + lines


DIFF_TOOLS = ("write_file", "patch_file")  # previewed by the server's dry run: a diff


async def dry_run_views(
    call: Mapping[str, Any], tools: Tools
) -> tuple[list[str], list[str], str | None] | None:
    """A write_file's or patch_file's dry run, asked once for both previews: the lines
    `preview` cuts, every line `whole_preview` gives, and the sha256 of the content the diff
    was made from (None: no file was there), so a caller can tell it is of the state a plan
    read (the inbox keeps these by preview_id, web/preview_cache.py). None for another tool,
    or when the dry run failed: the usual preview then says why."""
    if call.get("name") not in DIFF_TOOLS or not isinstance(call.get("args"), dict):
        return None
    args = call["args"]
    try:
        result = json.loads(await ask(tools, call["name"], {**args, "dry_run": True}))
        old = result.get("old_sha256")
        if call["name"] == "write_file" and old is None:
            content = str(args.get("content", ""))
            head = new_file_lines(result["path"], content)
            whole = new_file_lines(result["path"], content, head=None)
        else:
            head = whole = list(result.get("diff") or ["(no change)"])
    except (ReadError, ValueError, KeyError, TypeError):
        return None
    lead = unplanned_lines(call)
    return lead + head, lead + whole, old if isinstance(old, str) else None


def unplanned_lines(call: Mapping[str, Any]) -> list[str]:
    """Said first for a call the server could not plan (the payload's `unplanned`): no
    rule, mode or grant judged where it lands, so the person judges it by what it says."""
    why = call.get("unplanned")
    if not isinstance(why, str) or not why:
        return []
    return [f"⚠ not planned by the server ({why}): no rule judged where this lands"]


async def undo_note(call: Mapping[str, Any], tools: Tools, thread_used: int) -> list[str]:
    """Said before the person decides, when a write cannot be undone (or not exactly): the
    same record the write would keep is made, and nothing is kept."""
    if call["name"] not in CAPTURES:
        return []
    record, _ = await capture(call["name"], call["args"], tools, None, thread_used)
    return undo_lines(record)


def cut(lines: list[str], limit: int = PREVIEW_LINES) -> list[str]:
    """About `limit` lines of a preview as a screen shows them (core.changes.intraline: a
    changed long line by its changes), then how many lines of it were left out. A changed
    pair is never split by the cut."""
    shown: list[str] = []
    used = 0
    for block, stands_for in blocks(lines):
        if len(shown) >= limit:
            break
        shown += block
        used += stands_for
    if used < len(lines):
        more = counted(len(lines) - used, "more line")
        shown.append(f"… {more} not shown ({len(lines):,} in all)")
    return shown


# --- one preview per write tool --------------------------------------------------------------


async def preview_write(
    args: dict[str, Any], tools: Tools, head: int | None = NEW_FILE_HEAD
) -> list[str]:
    result = json.loads(await ask(tools, "write_file", {**args, "dry_run": True}))
    if result.get("old_sha256") is None:
        return new_file_lines(result["path"], str(args.get("content", "")), head)
    return list(result.get("diff") or ["(no change)"])


async def preview_whole_write(args: dict[str, Any], tools: Tools) -> list[str]:
    return await preview_write(args, tools, head=None)


def new_file_lines(path: str, content: str, head: int | None = NEW_FILE_HEAD) -> list[str]:
    # Split at "\n" only, as the server's diffs are: a CRLF line keeps its "\r" and a form
    # feed stays in its line (str.splitlines would break there and hide both).
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    kept = lines if head is None else lines[:head]
    size = counted(len(content.encode()), "byte")
    shown = [f"new file {path}, {counted(len(lines), 'line')}, {size}:"]
    shown += [f"+{line}" for line in kept]
    if len(lines) > len(kept):
        shown.append(f"… {counted(len(lines) - len(kept), 'more line')} not shown")
    return shown


async def preview_patch(args: dict[str, Any], tools: Tools) -> list[str]:
    result = json.loads(await ask(tools, "patch_file", {**args, "dry_run": True}))
    return list(result.get("diff") or ["(no change)"])


async def preview_delete(args: dict[str, Any], tools: Tools) -> list[str]:
    path = str(args.get("path"))
    found = await info(tools, path)
    if found is None:
        return [f"{path} does not exist: the call will fail"]
    if found.get("is_symlink"):
        return [f"deletes the symlink {path} (not {found.get('symlink_target')}, its target)"]
    if found["type"] != "folder":
        return [f"deletes file {found['path']} ({found['size']:,} bytes)"]
    files, folders, size, complete = await count_folder(tools, path)
    at_least = "" if complete else "at least "
    lines = [
        f"deletes folder {found['path']}/ with {at_least}{counted(files, 'file')} "
        f"in {counted(folders, 'folder')}, {counted(size, 'byte')}"
    ]
    if files + folders and not args.get("recursive"):
        lines.append("recursive is false: the call will fail because the folder is not empty")
    return lines


async def count_folder(tools: Tools, path: str) -> tuple[int, int, int, bool]:
    """Files, folders and bytes below `path`, one listing a folder; complete=False if capped."""
    files = folders = size = 0
    pending, listed = [path], 0
    while pending and listed < MAX_FOLDERS_COUNTED:
        folder = pending.pop()
        listed += 1
        listing = await ask(tools, "list_directory_with_sizes", {"path": folder})
        for line in listing.splitlines():
            if line.startswith("[DIR] "):
                folders += 1
                pending.append(f"{folder}/{line.removeprefix('[DIR] ')}")
            elif line.startswith("Total: "):
                numbers = [int(word.replace(",", "")) for word in line.split() if word[0].isdigit()]
                files += numbers[0]
                size += numbers[2]
    return files, folders, size, not pending


async def preview_transfer(args: dict[str, Any], tools: Tools, verb: str) -> list[str]:
    source, destination = str(args.get("source")), str(args.get("destination"))
    found = await info(tools, source)
    if found is None:
        return [f"{source} does not exist: the call will fail"]
    what = f"folder {found['path']}/" if found["type"] == "folder" else f"file {found['path']}"
    lines = [f"{verb} {what} -> {destination}"]
    existing = await info(tools, destination)
    if existing is None:
        lines.append(f"{destination} is new")
    elif args.get("overwrite"):
        lines.append(
            f"overwrites {existing['type']} {existing['path']} ({existing['size']:,} bytes)"
        )
    else:
        lines.append(f"{destination} exists and overwrite is false: the call will fail")
    return lines


async def preview_copy(args: dict[str, Any], tools: Tools) -> list[str]:
    return await preview_transfer(args, tools, "copies")


async def preview_move(args: dict[str, Any], tools: Tools) -> list[str]:
    return await preview_transfer(args, tools, "moves")


async def preview_make_dir(args: dict[str, Any], tools: Tools) -> list[str]:
    path = str(args.get("path"))
    found = await info(tools, path)
    return [f"{path} exists already: nothing changes" if found else f"creates folder {path}/"]


async def preview_touch(args: dict[str, Any], tools: Tools) -> list[str]:
    path = str(args.get("path"))
    found = await info(tools, path)
    return [f"updates the time of {path}" if found else f"creates empty file {path}"]


# --- from the server's plan ----------------------------------------------------------------

Entries = dict[str, dict[str, Any]]  # argument -> the plan's entry for it


def what_is(entry: dict[str, Any]) -> str:
    """The entry a plan found, named as what it is: a link as a link, a folder counted whole."""
    state, path = entry["state"], entry["path"]
    kind = state.get("type")
    if kind == "symlink":
        return f"the symlink {path} (-> {state.get('link')}; the link, not its target)"
    if kind == "folder":
        return (
            f"folder {path}/ with {counted(state.get('files', 0), 'file')} in "
            f"{counted(state.get('folders', 0), 'folder')}, "
            f"{counted(state.get('bytes', 0), 'byte')}"
        )
    if kind == "file":
        return f"file {path} ({state.get('size', 0):,} bytes)"
    return f"{kind} {path}"


def planned_delete(entries: Entries, args: dict[str, Any]) -> list[str]:
    entry = entries["path"]
    if not entry["state"].get("exists"):
        return [f"{entry['path']} does not exist: the call will fail"]
    lines = [f"deletes {what_is(entry)}"]
    state = entry["state"]
    inside = state.get("files", 0) + state.get("folders", 0)
    if state.get("type") == "folder" and inside and not args.get("recursive"):
        lines.append("recursive is false: the call will fail because the folder is not empty")
    return lines


def planned_transfer(entries: Entries, args: dict[str, Any], verb: str) -> list[str]:
    source, destination = entries["source"], entries["destination"]
    if not source["state"].get("exists"):
        return [f"{source['path']} does not exist: the call will fail"]
    lines = [f"{verb} {what_is(source)} -> {destination['path']}"]
    if not destination["state"].get("exists"):
        lines.append(f"{destination['path']} is new")
    elif args.get("overwrite"):
        lines.append(f"overwrites {what_is(destination)}")
    else:
        lines.append(f"{destination['path']} exists and overwrite is false: the call will fail")
    return lines


PLANNED: dict[str, Callable[[Entries, dict[str, Any]], list[str]]] = {
    "delete": planned_delete,
    "copy": lambda entries, args: planned_transfer(entries, args, "copies"),
    "move": lambda entries, args: planned_transfer(entries, args, "moves"),
}

PREVIEWS = {
    "write_file": preview_write,
    "patch_file": preview_patch,
    "delete": preview_delete,
    "copy": preview_copy,
    "move": preview_move,
    "make_dir": preview_make_dir,
    "touch": preview_touch,
}
