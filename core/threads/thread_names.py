"""The one rule for thread names, for the command line and HTTP alike, and the escaped form
that keeps a thread made before the rule usable in both.

A name is a key in the store and part of URLs and log lines: no separators, no dots-only
names, no control characters, a bounded length. A thread whose stored name breaks the rule
(`--thread 'my notes'` was accepted once) is printed, and may be named, percent-encoded:
`my%20notes`. No name the rule allows holds a `%`, so the escaped form of one thread is
never the plain name of another. Over HTTP the path is decoded once before we see it, so
`/api/admin/approvals/my%20notes` reaches us as the stored name itself, which is accepted
for a thread that exists too.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from urllib.parse import quote, unquote

from core.errors import ThreadError, UsageError
from store.base import Store

THREAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
THREAD_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


class ThreadNameError(ThreadError, UsageError):
    """A name that is neither a thread name nor the name of a thread that exists: a usage
    error (exit 2) at the command line, a ThreadError for the rest."""


def follows_rule(name: str) -> bool:
    return bool(THREAD_NAME.fullmatch(name)) and ".." not in name


def escaped(name: str) -> str:
    """The name as printed, and as it may be typed back: itself when it follows the rule,
    percent-encoded when not (so ESC or a newline in it never reaches a screen raw)."""
    return name if follows_rule(name) else quote(name, safe="")


def as_given(given: str) -> str:
    """What the person typed, printed safely: escaped once, whether or not it was already."""
    return escaped(unquote(given))


def name_problem(given: str) -> str:
    return f"'{as_given(given)[:80]}' is not a thread name ({THREAD_NAME_RULE})"


async def stored_name(store: Store, given: str) -> str | None:
    """The stored thread `given` names, by its escaped form or by itself; None when no
    thread of the store is named so."""
    return name_among(await store.thread_names(), given)


def name_among(names: Collection[str], given: str) -> str | None:
    """`stored_name` among the store's thread names."""
    if "%" in given and unquote(given) in names:
        return unquote(given)
    return given if given in names else None


def no_thread(given: str, location: str) -> ThreadError:
    return ThreadError(
        f"no thread named '{as_given(given)}' in {location}; `fsagent threads` lists them"
    )


async def name_to_open(store: Store, given: str) -> str:
    """The thread `given` names: a name the rule allows (a new thread or not), or an
    existing thread's escaped or stored name. Anything else is a ThreadNameError, before
    anything is stored."""
    if follows_rule(given):
        return given  # the common case reads nothing
    found = await stored_name(store, given)
    if found is None:
        raise ThreadNameError(name_problem(given))
    return found


async def existing_name(store: Store, given: str) -> str:
    """The existing thread `given` names; a ThreadError when there is none, so a command
    that only reads or removes never registers a thread."""
    found = await stored_name(store, given)
    if found is None:
        raise no_thread(given, store.location)
    return found
