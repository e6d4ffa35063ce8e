"""The terminal front-end's parts: lines in and out, the review of a paused batch, and the
commands that work on threads from any shell. `display.py` is the session that uses them."""
