"""The HTTP front-end (`fsagent serve`): the chat and admin APIs over the same core as the
terminal, and the inbox page. It imports the core, never the terminal."""
