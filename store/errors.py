"""What a store tells a person: the errors it raises (the message is the one line they see),
and how a missing store is said."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Missing:
    """A location that holds no store yet, in the words the commands that only read use."""

    note: str  # "the file does not exist yet": why a listing is empty
    sentence: str  # "threads.db does not exist": why a named thread is not there
    no_store: str  # the whole line, for a command that needs the store to be there


class StoreError(Exception):
    """The store cannot be opened or used (missing folder, damaged, foreign, locked or newer
    file). Nothing in it was changed."""


class ThreadBusy(Exception):
    """The thread is open in another live process; the message names that process."""
