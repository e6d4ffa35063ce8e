"""The agent's core: what every front-end drives; it knows no terminal and no HTTP."""
