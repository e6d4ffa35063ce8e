"""Test-only pauses at exactly the point between two steps, so a test can act there, with no
sleep and no timing. Three hooks, each set by a variable naming a folder that holds two FIFOs,
`paused` and `go`, before the server starts; at each of its points the server writes the line
`paused <what> <which>` to `paused` and waits for the line `go` on `go`.

FSAGENT_TEST_PAUSE pauses a write tool between its check and its act: right before each act on
a checked entry, and before anything is made for it (a temp file, a folder on the way: capture.py,
replacing.py, the tools), `paused <tool> <argument>`.

FSAGENT_TEST_CHECKED_PAUSE pauses a write tool in the instant between its last check that the
folders it acts in are still those checked (parent_checks.py) and the act's one call (a rename,
a creation), `paused checked <tool> <argument>`: a folder moved there is seen by the check right
after the act, which undoes it. Its own variable, so the other tests never meet it.

FSAGENT_TEST_RELEASE_PAUSE pauses a tool call's worker thread after its work returned and
before it hands its slot back to the event loop (tool_runner.py), `paused release <tool>`; and
the loop at the session's end, `paused session over`. That line goes out at once, while the
call is still held, so the test knows the session is over; its `go` is read only once the held
call has handed its slot back, and the loop runs nothing meanwhile: the hand-off happens with
the loop not running, as when a client leaves mid-call and the loop stops for good, and a
hand-off that waited for the loop would hang the server there (tests/mcp_servers/
test_cancels.py). Its own variable, so a test of the write tools' acts never meets these.

FSAGENT_TEST_STEP_PAUSE pauses at each step of the journal of intent (journal.py): after a
record is made durable and before the rename it announces (`paused recorded <kind>`), right
after an entry is set aside or swapped (`paused renamed aside`, `paused renamed exchange`),
after a checked delete is committed (`paused committed aside`), once a file being written is full
and before it is named or put in place (`paused written temp`), and after a temp name is gone
and before its record is closed (`paused cleared temp`): a test kills the server at each of
them (tests/mcp_servers/test_filesystem_journal.py); and before a folder moved across links
a later name of a hard-linked file to its first copy (`paused linking <path below the
folder>`, tree_copy.py), where a test swaps a folder of the copy for a link. Its own
variable, so the other tests never meet these.

FSAGENT_TEST_START_PAUSE pauses a tool call at the two points between taking its slot and
beginning its work (tool_runner.py): on the loop, after the slot is taken and before a thread
is asked for, `paused slot <tool>`, awaited so the loop reads on (a cancel sent then lands
there: no `go` is read for it once cancelled); and in the worker thread, before it claims the
slot, `paused thread <tool>`. A cancel between the two, or at either, once left the slot taken
for good.

FSAGENT_TEST_ANSWER_PAUSE pauses, on the loop, the answer a handler made for a request that was
answered as cancelled already, before it is dropped (stdio_transport.py): `paused drop <id>`,
awaited so the loop reads on. A cancel read then is a second cancel of a request whose first
cancel's answer went out: it must not be answered again.

Every hook's FIFOs are opened at start, before any root is served (so a restriction set up
later, such as Landlock's, which forbids opening anything outside the roots, cannot stop the
hook), and read-write, so neither open waits for the test's end of the FIFO.

Unset, a hook is one lookup in an empty dict per point: it costs nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import anyio

PAUSE_ENV = "FSAGENT_TEST_PAUSE"
RELEASE_PAUSE_ENV = "FSAGENT_TEST_RELEASE_PAUSE"
STEP_PAUSE_ENV = "FSAGENT_TEST_STEP_PAUSE"
START_PAUSE_ENV = "FSAGENT_TEST_START_PAUSE"
ANSWER_PAUSE_ENV = "FSAGENT_TEST_ANSWER_PAUSE"
CHECKED_PAUSE_ENV = "FSAGENT_TEST_CHECKED_PAUSE"
GO = b"go\n"
NOT_HELD: AbstractContextManager[None] = nullcontext()


class Hook:
    """The two FIFOs, held open; one paused call at a time."""

    def __init__(self, folder: str) -> None:
        flags = os.O_RDWR | os.O_CLOEXEC
        self.paused = os.open(os.path.join(folder, "paused"), flags)
        self.go = os.open(os.path.join(folder, "go"), flags)
        self.lock = threading.Lock()

    def pause(self, tool: str, argument: str) -> None:
        with self.held(tool, argument):
            pass

    @contextmanager
    def held(self, tool: str, argument: str) -> Iterator[None]:
        """A pause with the caller's next step inside it: no later pause is let go before
        that step is done."""
        with self.lock:
            self.tell(tool, argument)
            self.wait_for_go()
            yield

    def pause_behind(self, tool: str, argument: str) -> None:
        """A pause whose line goes out at once, even while another one is held; its `go` is
        read once that one is done (so the test answers the lines in the order they came)."""
        self.tell(tool, argument)
        with self.lock:
            self.wait_for_go()

    async def pause_awaited(self, tool: str, argument: str) -> None:
        """A pause on the event loop that lets the loop run meanwhile: cancelled while it
        waits, it reads nothing (the test sends no `go` for it)."""
        self.tell(tool, argument)
        await anyio.wait_readable(self.go)
        with self.lock:
            self.wait_for_go()  # the test writes `go\n` at once: it is all there

    def tell(self, tool: str, argument: str) -> None:
        os.write(self.paused, f"paused {tool} {argument}\n".encode())

    def wait_for_go(self) -> None:
        answer = b""
        while not answer.endswith(b"\n"):
            answer += os.read(self.go, 1)
        if answer != GO:
            raise RuntimeError(f"test pause: expected 'go', read {answer!r}")


HOOK_VARIABLES = (
    PAUSE_ENV,
    RELEASE_PAUSE_ENV,
    STEP_PAUSE_ENV,
    START_PAUSE_ENV,
    ANSWER_PAUSE_ENV,
    CHECKED_PAUSE_ENV,
)
# The hooks whose variable names a folder, by variable: empty in normal use.
_hooks: dict[str, Hook] = {}


def open_from_environment() -> None:
    """Open the FIFOs of each hook whose variable names a folder; call it first thing."""
    for variable in HOOK_VARIABLES:
        folder = os.environ.get(variable)
        if folder:
            _hooks[variable] = Hook(folder)


def pause(tool: str, argument: str) -> None:
    """Wait here for the test, when the hook is set (never in normal use)."""
    if (hook := _hooks.get(PAUSE_ENV)) is not None:
        hook.pause(tool, argument)


def checked(tool: str, argument: str) -> None:
    """Wait here for the test, when the checked hook is set (never in normal use): right after
    the last check of the folders an act runs in, before its call."""
    if (hook := _hooks.get(CHECKED_PAUSE_ENV)) is not None:
        hook.pause("checked", f"{tool} {argument}")


def step(what: str, which: str) -> None:
    """Wait here for the test, when the step hook is set (never in normal use): around each
    rename the journal announces (journal.py), so a test can kill the server there."""
    if (hook := _hooks.get(STEP_PAUSE_ENV)) is not None:
        hook.pause(what, which)


def held_before_release(tool: str) -> AbstractContextManager[None]:
    """Around a worker thread's hand-off of its slot: wait for the test first, when the
    release hook is set (never in normal use), and hold the session's end until it is done."""
    if (hook := _hooks.get(RELEASE_PAUSE_ENV)) is None:
        return NOT_HELD
    return hook.held("release", tool)


def pause_at_session_end() -> None:
    """On the loop, the session over: wait for the test and for a call held before its
    hand-off, when the release hook is set (never in normal use)."""
    if (hook := _hooks.get(RELEASE_PAUSE_ENV)) is not None:
        hook.pause_behind("session", "over")


async def pause_on_the_loop(tool: str) -> None:
    """A call's slot is taken and its thread not asked for: wait for the test there, the loop
    reading on, when the start hook is set (never in normal use)."""
    if (hook := _hooks.get(START_PAUSE_ENV)) is not None:
        await hook.pause_awaited("slot", tool)


def pause_in_thread(tool: str) -> None:
    """In a call's worker thread, before it claims its slot: wait for the test, when the start
    hook is set (never in normal use)."""
    if (hook := _hooks.get(START_PAUSE_ENV)) is not None:
        hook.pause_behind("thread", tool)


async def pause_before_dropping(request_id: int | str) -> None:
    """The answer to a request answered as cancelled is about to be dropped: wait for the
    test there, the loop reading on, when the answer hook is set (never in normal use)."""
    if (hook := _hooks.get(ANSWER_PAUSE_ENV)) is not None:
        await hook.pause_awaited("drop", str(request_id))
