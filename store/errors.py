"""What a store raises that a person must hear about; the message is the one line they see."""


class StoreError(Exception):
    """The store cannot be opened or used (missing folder, damaged, foreign, locked or newer
    file). Nothing in it was changed."""


class ThreadBusy(Exception):
    """The thread is open in another live process; the message names that process."""
