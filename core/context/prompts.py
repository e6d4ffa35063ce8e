"""What fsagent tells the model besides the conversation: the system prompt, the router's
question, each route's note and the request for a summary.

None of it changes from one request to the next (no date, no counter), so every request of a
thread begins with the same text and the server's prompt cache holds. The route's question
and notes go after the person's latest words rather than before the conversation, for the
same reason (see core.context.context).
"""

# The tools say what the model works on; this says only what they cannot (issue 30: every
# token here is sent with every request).
SYSTEM_PROMPT = (
    "Paths are relative to the first folder. Read before you change; never retry a rejected "
    "call. Be brief."
)

# Appended to the person's latest words in the router's request only.
ROUTE_QUESTION = (
    "[fsagent: before you answer, name the kind of request in one word: filesystem (read, "
    "create or change files and folders), search (find files or text; no changes) or general "
    "(anything else).]"
)

# The same question where the fixed part is a large share of the context (a 2048 context):
# the names alone, half the length. A schema's enum (core.context.constrained) holds the
# answer to the names anyway.
ROUTE_QUESTION_SHORT = (
    "[fsagent: before you answer, name the kind of request in one word: filesystem, search "
    "or general.]"
)

# With the person's other MCP servers, each a route of its own (core.servers.routes): the same
# question with the servers named after our routes, each with its own words quoted (already
# made one line, cut and unable to end its quote). With none, the questions above, unchanged.
SERVERS_QUESTION = (
    "[fsagent: before you answer, name the kind of request in one word: filesystem (read, "
    "create or change files and folders), search (find files or text; no changes), general "
    "(anything else), or the MCP server whose tools serve it: {servers}.]"
)
SERVERS_QUESTION_SHORT = (
    "[fsagent: before you answer, name the kind of request in one word: filesystem, search, "
    "general, or an MCP server: {servers}.]"
)


def route_question(servers: list[tuple[str, str]], short: bool) -> str:
    """The router's question: `servers` are (route word, quoted description) pairs."""
    if not servers:
        return ROUTE_QUESTION_SHORT if short else ROUTE_QUESTION
    named = ", ".join(f"{name} {description}" for name, description in servers)
    return (SERVERS_QUESTION_SHORT if short else SERVERS_QUESTION).format(servers=named)


# Appended to the person's words in every request of a turn on that route, and kept there in
# later requests (so the history reads the same each time). A route with no note offers every
# tool.
ROUTE_NOTES = {
    "search": "[fsagent: this request is a search: find and read only; changes are refused.]",
}

SUMMARY_REQUEST = (
    "[fsagent: do not call a tool and do not answer the request above now. "
    "Summarise the conversation so far, including any earlier summary, for yourself: "
    "you will continue from your summary alone. {instructions}]"
)
