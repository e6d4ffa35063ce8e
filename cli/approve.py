"""`fsagent approve` and `fsagent deny`: a waiting thread's calls decided from any shell, then the
thread run on as a session would.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from typing import TYPE_CHECKING

from cli.launch import launch, open_agent
from cli.reader import held_reader, require_store
from cli.roots import thread_roots
from core.errors import ThreadError

if TYPE_CHECKING:
    from cli.settings import Settings
    from core.approval.decisions import AnswerValue, ResumeValue


def approve_command(args: argparse.Namespace, settings: Settings) -> int:
    require_store(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=True))


def deny_command(args: argparse.Namespace, settings: Settings) -> int:
    require_store(settings.db, args.name)
    return asyncio.run(decide(args, settings, approve=False))


async def decide(args: argparse.Namespace, settings: Settings, *, approve: bool) -> int:
    """approve/deny: check the thread waits (without the model or the tools), then resume it
    as a session would."""
    from core.opening import open_thread
    from terminal import commands

    settings = dataclasses.replace(settings, thread=args.name)
    async with held_reader(settings, args.name) as (store, reader, args.name):
        settings = (await thread_roots(store, args.name, settings)).settings
        view = await commands.waiting_view(reader, args.name)
        calls = view.waiting
        reason = getattr(args, "reason", "")
        answer = getattr(args, "answer", None)
        approvals: ResumeValue | None = None  # the decisions, when it waits for approval
        decisions: ResumeValue | AnswerValue
        if view.kind == "question":
            answer = answer if approve else None
            decisions = commands.question_answers(calls, args.calls, answer, reason)
        elif answer is not None:
            raise ThreadError(
                f"thread '{args.name}' waits for approval of write calls, not for an answer; "
                "--answer answers a question"
            )
        else:
            decisions = approvals = commands.batch_decisions(calls, args.calls, approve, reason)
        async with launch(settings) as launched, open_agent(settings, launched, store) as agent:
            roots = launched.roots
            session = await open_thread(agent.parts, args.name, roots=roots, other_roots=True)
            # Approving writes: the person sees their previews first.
            if (
                approve
                and approvals is not None
                and not await commands.confirm_previews(session, calls, approvals, args.yes)
            ):
                return 3
            return await commands.decide(session, calls, decisions)
