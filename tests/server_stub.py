"""The MCP server's process as fsagent starts it under test: a stand-in command that asks the
worker's launcher (tests/launcher.py) to fork the real server, then lives exactly as long.

`core.tools.server_process` runs this script instead of `python -m mcp_servers.filesystem`
when FSAGENT_TEST_SERVER_LAUNCHER names a launcher's socket (tests/conftest.py sets it for
`Workspace.run` only, and only when this file exists next to the code). The server itself is
the real one, forked from a process that has its libraries imported (the SDK's import is
1.3 CPU s of the 1.9 s a piped session costs): it gets this process's stdin, stdout and
stderr, the folder, environment and arguments fsagent gave it. This script imports the
standard library's smallest modules only, so it costs a few hundredths of a second.

Signals fsagent sends (stop_server's terminate) are passed on to the server, and this
process exits as the server did: with its code, or by its signal.

A fork has the launcher's credentials, not fsagent's: a test that runs fsagent with fewer
rights (tests/core/test_fail_closed.py, under `setpriv`) would get a server that can read
what fsagent may not. So when this process's user, groups, capabilities, no_new_privs or
seccomp differ from the launcher's (its pid from the socket's peer credentials), it becomes
the real `python -m mcp_servers.filesystem` instead.
"""

import json
import os
import signal
import socket
import sys

HOOK = "FSAGENT_TEST_SERVER_LAUNCHER"


# What a forked server inherits from the launcher rather than from fsagent.
CREDENTIALS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
               "NoNewPrivs", "Seccomp")  # fmt: skip


def credentials(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/status") as status:
        return [line for line in status if line.split(":")[0] in CREDENTIALS]


def main() -> None:
    path, *args = sys.argv[1:]
    env = dict(os.environ)
    env.pop(HOOK, None)  # the server sees the environment fsagent gave it, without the hook
    request = {"kind": "server", "argv": args, "env": env, "cwd": os.getcwd()}
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    peer = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    launcher = int.from_bytes(peer[:4], sys.byteorder)
    if credentials(launcher) != credentials("self"):
        connection.close()
        os.execv(sys.executable, [sys.executable, *args])
    socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
    # The server holds the pipes now: fsagent sees its stdout end when the server's does.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    answers = connection.makefile("r")
    pid = int(answers.readline())
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda received, _: os.kill(pid, received))
    status = int(answers.readline())
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
