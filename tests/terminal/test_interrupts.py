"""What Ctrl-C does at each moment of a session, with real SIGINTs sent to this process."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from terminal.interrupts import CtrlC, Interrupted


def ctrl_c_soon(delay: float = 0.1) -> None:
    asyncio.get_running_loop().call_later(delay, os.kill, os.getpid(), signal.SIGINT)


def test_a_blocking_read_is_cut_off():
    async def session() -> str:
        ctrl_c = CtrlC()
        with ctrl_c.installed():
            loop = asyncio.get_running_loop()
            # The loop cannot run while the read blocks: the signal comes from a timer thread.
            loop.run_in_executor(None, lambda: (time.sleep(0.2), os.kill(os.getpid(), 2)))
            quiet, unused = os.pipe()  # a pipe nobody writes to: its read blocks
            try:
                with ctrl_c.blocking_read():
                    os.read(quiet, 1)
            except KeyboardInterrupt:
                return "cut off"
            finally:
                os.close(quiet)
                os.close(unused)
            return "not cut off"

    assert asyncio.run(session()) == "cut off"


def test_a_run_or_a_review_is_cancelled_and_says_interrupted():
    cleaned_up = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)  # stands for a model streaming, a tool, a preview
        finally:
            cleaned_up.append(True)

    async def session() -> None:
        ctrl_c = CtrlC()
        with ctrl_c.installed():
            ctrl_c_soon()
            await ctrl_c.cancellable(work())

    with pytest.raises(Interrupted):
        asyncio.run(session())
    assert cleaned_up == [True]


def test_closing_a_cut_off_run_is_never_cut_and_asks_to_quit_after():
    async def session() -> tuple[bool, bool]:
        ctrl_c = CtrlC()
        with ctrl_c.installed():
            with ctrl_c.shield():
                ctrl_c_soon()
                await asyncio.sleep(0.4)  # the closing goes on
                finished = True
            return finished, ctrl_c.quit

    assert asyncio.run(session()) == (True, True)


def test_with_nothing_to_cut_off_the_session_task_is_cancelled():
    async def session() -> bool:
        ctrl_c = CtrlC()
        with ctrl_c.installed():
            ctrl_c_soon()
            try:
                await asyncio.sleep(10)  # the banner being read, say
            except asyncio.CancelledError:
                return ctrl_c.main_cancelled
        return False

    assert asyncio.run(session()) is True


def test_the_previous_handler_is_back_afterwards():
    before = signal.getsignal(signal.SIGINT)

    async def session() -> None:
        with CtrlC().installed():
            assert signal.getsignal(signal.SIGINT) is not before

    asyncio.run(session())
    assert signal.getsignal(signal.SIGINT) is before
