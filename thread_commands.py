"""The commands that list, show, reset, remove and decide threads from any shell:
`fsagent threads [show|rm|reset]`, `approvals`, `approve` and `deny`. What they read and
change (the registry, the ledger, thread states) is `threads`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from agent import StartupError, ThreadError
from threads import (
    IDLE,
    INTERRUPTED,
    WAITING,
    ThreadView,
    all_views,
    cannot_resume_message,
    close_run,
    open_for_reading,
    require_thread,
)


def local_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp or "-"


def status_text(view: ThreadView) -> str:
    if view.problem:
        return f"{view.status} (cannot resume: run fsagent threads reset {view.name})"
    if view.status == INTERRUPTED:
        return f"{INTERRUPTED} (at {', '.join(view.steps)}; opening it finishes the run)"
    return view.status


def call_lines(view: ThreadView, indent: str = "    ") -> list[str]:
    from terminal import format_call

    return [
        f"{indent}{call.get('id')}: {format_call(call.get('name'), call.get('args'), 60)}"
        for call in view.waiting
    ]


# --- the commands ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "show", "rm", "reset"),
        help="list (default) every thread; show NAME prints its conversation; rm NAME deletes "
        "it; reset NAME cancels its pending approval or cut-off run",
    )
    parser.add_argument("name", nargs="?", help="the thread, for show, rm and reset")
    parser.add_argument("-y", "--yes", action="store_true", help="rm without asking")


def run(args: argparse.Namespace, settings: Any) -> int:
    if args.action == "list":
        if not settings.db.exists():  # reading must not create the file
            print(f"No threads in {settings.db} (the file does not exist yet).")
            return 0
        return asyncio.run(list_threads(settings.db))
    if not args.name:
        print(f"fsagent: threads {args.action} needs a thread name", file=sys.stderr)
        return 1
    require_file(settings.db, args.name)
    action = {"show": show_thread, "rm": remove_thread, "reset": reset_thread}[args.action]
    return asyncio.run(action(settings.db, args.name, args))


def require_file(db: Path, name: str) -> None:
    if not db.exists():
        raise ThreadError(f"no thread named '{name}': {db} does not exist")


async def list_threads(db: Path) -> int:
    async with open_for_reading(db) as (store, app):
        views = await all_views(store, app)
    if not views:
        print(f"No threads in {db}.")
        return 0
    width = max(len("NAME"), *(len(v.name) for v in views))
    print(f"{'NAME':<{width}}  {'MESSAGES':>8}  {'LAST ACTIVITY':<16}  STATUS")
    for view in views:
        print(
            f"{view.name:<{width}}  {len(view.messages):>8}  "
            f"{local_time(view.last_activity):<16}  {status_text(view)}"
        )
        for line in call_lines(view):
            print(f"{line}")
    return 0


async def show_thread(db: Path, name: str, args: argparse.Namespace) -> int:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from agent_graph import content_text
    from terminal import format_call, format_result

    async with open_for_reading(db) as (_store, app):
        view = await require_thread(app, name)
    print(f"Thread '{name}': {len(view.messages)} messages, {status_text(view)}")
    for message in view.messages:
        if isinstance(message, HumanMessage):
            print(f"you> {content_text(message.content)}")
        elif isinstance(message, AIMessage):
            if message.content:
                print(f"agent> {content_text(message.content)}")
            for call in message.tool_calls:
                print(f"→ {format_call(call['name'], call['args'])}")
        elif isinstance(message, ToolMessage):
            mark = "✗ " if message.status == "error" else ""
            print(f"← {mark}{format_result(content_text(message.content))}")
    if view.waiting:
        print("Waiting for approval of:")
        for line in call_lines(view, "  "):
            print(line)
    return 0


async def remove_thread(db: Path, name: str, args: argparse.Namespace) -> int:
    async with open_for_reading(db) as (store, app), store.hold(name):
        view = await require_thread(app, name)
        if not args.yes and sys.stdin.isatty():
            question = f"Delete thread '{name}' ({len(view.messages)} messages)? [y/N] "
            answer = await asyncio.to_thread(input, question)
            if answer.strip().lower() not in ("y", "yes"):
                print("Kept.")
                return 1
        await app.checkpointer.adelete_thread(name)
        await store.forget(name)
    print(f"Deleted thread '{name}'.")
    return 0


async def reset_thread(db: Path, name: str, args: argparse.Namespace) -> int:
    async with open_for_reading(db) as (store, app), store.hold(name):
        view = await require_thread(app, name)
        if view.status == IDLE and not view.problem:
            print(f"Thread '{name}' is idle; nothing to reset.")
            return 0
        why = "the person cancelled it with `fsagent threads reset`"
        answers = await close_run(app, store, name, why)
    print(f"Thread '{name}' reset: it takes new prompts.")
    for line in call_lines(view, "  cancelled "):
        print(line)
    if answers and not view.waiting:
        print(f"  {len(answers)} unanswered call(s) of the cut-off run were closed.")
    return 0


def add_approvals_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run_approvals(args: argparse.Namespace, settings: Any) -> int:
    if not settings.db.exists():
        print("No pending approvals.")
        return 0
    return asyncio.run(list_approvals(settings.db))


async def list_approvals(db: Path) -> int:
    async with open_for_reading(db) as (store, app):
        views = [v for v in await all_views(store, app) if v.waiting]
    if not views:
        print("No pending approvals.")
        return 0
    for view in views:
        note = f" (cannot resume: run fsagent threads reset {view.name})" if view.problem else ""
        print(f"{view.name}{note}")
        for line in call_lines(view, "  "):
            print(line)
    print("Decide with: fsagent approve NAME [--call ID] or fsagent deny NAME [--reason TEXT]")
    return 0


def add_decision_arguments(parser: argparse.ArgumentParser) -> None:
    denying = parser.prog.split()[-1] == "deny"
    parser.add_argument("name", help="the waiting thread")
    parser.add_argument(
        "--call",
        action="append",
        dest="calls",
        metavar="ID",
        help="the call to reject with --reason (repeatable); the batch is one pause, so "
        "every call in it is rejected"
        if denying
        else "approve only this call (repeatable); every other call of the batch is "
        "rejected, so nothing is left half-decided",
    )
    if denying:
        parser.add_argument("--reason", default="", help="why, told to the model")


def run_approve(args: argparse.Namespace, settings: Any) -> int:
    require_file(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=True))


def run_deny(args: argparse.Namespace, settings: Any) -> int:
    require_file(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=False))


def batch_decisions(
    calls: list[dict[str, Any]], chosen: list[str] | None, approve: bool, reason: str
) -> dict[str, Any]:
    """One resume value for the whole batch (it is one interrupt). Only calls approved by
    name run; every other call is rejected, so nothing is left pending."""
    ids = [call["id"] for call in calls]
    unknown = [c for c in chosen or [] if c not in ids]
    if unknown:
        raise ThreadError(
            f"no pending call {', '.join(unknown)}; the pending calls are {', '.join(ids)}"
        )
    named = set(chosen or ids)
    decisions: dict[str, Any] = {}
    for call_id in ids:
        if approve and call_id in named:
            decisions[call_id] = {"type": "approve"}
        elif approve:
            decisions[call_id] = {
                "type": "reject",
                "message": "the person approved only other calls of this batch",
            }
        elif call_id in named:
            decisions[call_id] = {"type": "reject", "message": reason or "the person said no"}
        else:
            decisions[call_id] = {"type": "reject", "message": "the person denied this batch"}
    return {"decisions": decisions}


async def decide(args: argparse.Namespace, settings: Any, *, approve: bool) -> int:
    """approve/deny: check the thread waits (without the model or the tools), then resume it
    as a session would, printing the steps and the model's answer."""
    from langgraph.types import Command

    from agent_graph import open_agent, run_config
    from display import Session, TurnInterrupter, pending_approval
    from terminal import Terminal

    name = args.name
    settings.thread = name
    async with open_for_reading(settings.db) as (store, reader), store.hold(name):
        view = await require_thread(reader, name)
        if view.problem:
            raise StartupError(cannot_resume_message(view))
        if view.status != WAITING:
            raise ThreadError(f"thread '{name}' is not waiting for approval ({view.status})")
        decisions = batch_decisions(view.waiting, args.calls, approve, getattr(args, "reason", ""))
        async with open_agent(settings, store) as (app, _tools, _policy):
            term = Terminal()
            for call in view.waiting:
                verdict = decisions["decisions"][call["id"]]["type"]
                term.say(f"{'✓ approved' if verdict == 'approve' else '✗ rejected'}: {call['id']}")
            with TurnInterrupter(asyncio.get_running_loop()) as interrupter:
                config = run_config(name)
                session = Session(
                    app, config, term, settings.base_url, interrupter, settings.verbose, store=store
                )
                if not await session.stream(Command(resume=decisions)):
                    return 1
            if payload := pending_approval(await app.aget_state(config)):
                term.say(f"Thread '{name}' waits for approval again:")
                for call in payload["calls"]:
                    term.say(f"  {call['id']}: {call['name']}")
                return 3
    return 0
