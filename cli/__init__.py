"""The command line's rooms: its settings, its options, the launch every front-end shares,
and one module per command (`fsagent approve` lives in `cli/approve.py`). `agent.py` is their
table of contents: the parser's shape and which module runs each command.
"""
