"""The server's tool names, in a module with no imports, so a client can know which tools
write without loading the server; and the names under which it reports its kernel sandbox and
what its start's recovery put right."""

READ_TOOL_NAMES: frozenset[str] = frozenset(
    {
        "list_allowed_roots",
        "list_directory",
        "list_directory_with_sizes",
        "directory_tree",
        "read_file",
        "read_multiple_files",
        "get_file_info",
        "file_hash",
        "search_files",
        "grep",
        "diff_files",
    }
)
# Reads nothing a person would ask for: what a write call would touch, and its state, for
# the agent's review. Registered only beside the write tools.
PLAN_TOOL_NAME = "plan"
WRITE_TOOL_NAMES: frozenset[str] = frozenset(
    {"write_file", "patch_file", "make_dir", "touch", "copy", "move", "delete"}
)

# The experimental capability of `initialize` in which the server says whether the kernel
# holds it to its roots (mcp_servers/kernel_sandbox.py, Hold.report).
KERNEL_SANDBOX_CAPABILITY = "fsagent/kernel-sandbox"

# The experimental capability of `initialize` in which the server says what the recovery at its
# start put right (mcp_servers/journal.py): `{"kept": [lines], "put_back": [paths], "more": N}`,
# present only when it did anything a person should know.
RECOVERY_CAPABILITY = "fsagent/recovery"
