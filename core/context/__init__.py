"""Talking to the model within its context: the budget, compaction and its summary, the
model list, the replies as they stream (reasoning, cut replies, calls written as text) and
the servers' own error wordings."""
