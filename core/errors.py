"""The errors the core raises for a person to read: each message is the one line they see."""


class StartupError(Exception):
    """Something stops fsagent from starting (a bad flag, LM Studio unreachable, a bad rules
    file, a thread this version cannot resume); exit code 2."""


class UsageError(StartupError):
    """The command line asks for something that is not a thing fsagent takes (a thread name
    that breaks the rule); exit code 2, as for every usage error."""


class ThreadError(Exception):
    """A thread cannot be used as asked (unknown, not waiting); exit code 1. Nothing was
    changed."""


class ReplayMismatch(Exception):
    """A --replay run asked the model something the cassette did not record (exit code 4)."""


class ContextTooSmall(Exception):
    """Even the smallest request (system prompt, tools, summary and the latest request) does
    not fit the model's context; the message is one line with the numbers and what to do.
    Nothing was sent and the thread is as it was."""


def first_leaf(error: BaseException) -> BaseException:
    """What was raised inside the task groups that wrap it in ExceptionGroups (the MCP
    client's, LangGraph's)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
