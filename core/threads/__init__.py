"""A thread as stored and read: its messages, its name rule, the views of its state, the
write ledger, the audit rows and the events a turn streams."""
