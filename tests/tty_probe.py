"""What a process started on a terminal has of it, for tests/terminal/test_forked_terminal.py:
the same script exec'd on a pty and forked there by the test launcher must say the same.

`python tty_probe.py REPORT` writes, as one JSON object into the file REPORT, what the
process has: whether its descriptors 0-2 and its Python streams are a terminal, and the same
one; whether that terminal is its controlling one, with its process group in the foreground
and itself the session's leader; how the interpreter built its standard streams; its signal
dispositions and mask, umask, folder, argv, environment and open descriptors. Then it reads a
line from the terminal, writes it as read into REPORT.line, and exits with the number typed;
Ctrl-C there (SIGINT, from the terminal's line discipline) goes uncaught, as in any script.
At its end, a thread that is no daemon and an atexit handler each add a line to REPORT.end
(the interpreter waits for the one and runs the other).
"""

import atexit
import json
import os
import signal
import sys
import threading

WATCHED = ("SIGINT", "SIGTERM", "SIGPIPE", "SIGXFSZ", "SIGCHLD", "SIGHUP", "SIGQUIT", "SIGTSTP",
           "SIGTTIN", "SIGTTOU", "SIGUSR1", "SIGALRM")  # fmt: skip


def disposition(number: int) -> str:
    handler = signal.getsignal(number)
    if handler is signal.default_int_handler:
        return "default_int_handler"
    if isinstance(handler, signal.Handlers):
        return handler.name
    return "a handler"


def stream(name: str) -> dict[str, object]:
    value = getattr(sys, name)
    return {
        "isatty": value.isatty(),
        "fileno": value.fileno(),
        "encoding": value.encoding,
        "errors": value.errors,
        "line_buffering": value.line_buffering,
        "write_through": value.write_through,
        "dunder is it": getattr(sys, f"__{name}__") is value,
    }


def controlling_terminal() -> bool:
    """Whether this process's controlling terminal (the kernel's tty_nr) is the one on 0, and
    /dev/tty, which names it, opens."""
    with open("/proc/self/stat") as stat:
        tty_nr = int(stat.read().rsplit(")", 1)[1].split()[4])
    major, minor = (tty_nr >> 8) & 0xFFF, (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return os.makedev(major, minor) == os.fstat(0).st_rdev


def umask() -> str:
    with open("/proc/self/status") as status:
        return next(line.split()[1] for line in status if line.startswith("Umask:"))


def report() -> dict[str, object]:
    return {
        "descriptors are terminals": [os.isatty(fd) for fd in (0, 1, 2)],
        "one terminal": len({os.ttyname(fd) for fd in (0, 1, 2)}) == 1,
        "controlling terminal": controlling_terminal(),
        "session leader": os.getsid(0) == os.getpid(),
        "group leader": os.getpgrp() == os.getpid(),
        "foreground": os.tcgetpgrp(0) == os.getpgrp(),
        "streams": {name: stream(name) for name in ("stdin", "stdout", "stderr")},
        "signals": {name: disposition(getattr(signal, name)) for name in WATCHED},
        "blocked": sorted(int(n) for n in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "umask": umask(),
        "cwd": os.getcwd(),
        "argv": sys.argv,
        "path[0]": sys.path[0],
        "environment": dict(os.environ),
        "open descriptors": [fd for fd in range(256) if is_open(fd)],
        "threads": threading.active_count(),
        "__name__": __name__,
    }


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def at_the_end(path: str, what: str) -> None:
    with open(path, "a") as out:
        out.write(what + "\n")


def after_main(path: str) -> None:
    """A thread that is no daemon: it goes on once the main thread is done, and the
    interpreter waits for it before it exits."""
    threading.main_thread().join()
    at_the_end(path, "a thread that is no daemon finished")


def main() -> None:
    state = report()  # before anything is opened here
    with open(sys.argv[1], "w") as out:
        json.dump(state, out)
    end = sys.argv[1] + ".end"
    atexit.register(at_the_end, end, "atexit ran")
    threading.Thread(target=after_main, args=(end,)).start()
    print("probe> ", end="", flush=True)
    line = sys.stdin.readline()
    with open(sys.argv[1] + ".line", "w") as out:
        json.dump(line, out)  # as the stream gave it ("\r" kept or not)
    sys.exit(int(line))


if __name__ == "__main__":
    main()
