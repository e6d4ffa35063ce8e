"""What the flags, the FSAGENT_* variables and the config file say, checked and typed: `Settings`
(flag > env > config file > default) and `fsagent serve`'s `ServeSettings`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from core.errors import StartupError
from store.location import normalise

if TYPE_CHECKING:
    pass


DEFAULT_BASE_URL = "http://localhost:1234/v1"
DEFAULT_SERVE_HOST = "127.0.0.1"
DEFAULT_SERVE_PORT = 8765
ApproveMode = Literal["ask", "yes", "no"]
APPROVE_MODES: tuple[ApproveMode, ...] = ("ask", "yes", "no")
# As core.context.constrained has them; here so --help imports nothing of the model's.
ConstrainMode = Literal["auto", "on", "off"]
CONSTRAIN_MODES: tuple[ConstrainMode, ...] = ("auto", "on", "off")


@dataclass(frozen=True)
class Settings:
    """What the flags and FSAGENT_* variables say, checked and typed."""

    base_url: str = DEFAULT_BASE_URL
    model: str | None = None  # None: the loaded chat model (core.context.models.discover)
    roots: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd(),))
    roots_given: bool = False  # --root was given; else a thread acts in its own roots
    other_root: bool = False  # act in --root although the thread was started in others
    db: str = field(default_factory=lambda: str(Path.cwd() / "threads.db"))  # path or URL
    db_note: str = ""  # said once on stderr: a ./threads.db found here, and how to move it
    thread: str = "default"
    verbose: bool = False
    read_only: bool = False
    require_kernel_sandbox: bool = False  # refuse a server the kernel does not hold (Landlock)
    strict: bool = False
    transcript: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    approve: ApproveMode = "ask"  # who decides writes no rule decides
    policy: Path | None = None  # None: fsagent.toml in the first root, if any
    plain: bool = False  # plain text in and out on a terminal too: no escape code at all

    context_length: int | None = None  # None: what the server says
    context_flag: str = "--context-length"  # how the person gave it, for messages
    max_tokens: int | None = None  # None: fits the budget (core.context.budget.default_max_tokens)
    hide_reasoning: bool = False
    text_calls: bool = True  # read tool calls a model wrote as text (core.context.text_calls)
    constrain_calls: ConstrainMode = "auto"  # calls fit a JSON schema (core.context.constrained)
    prompt: str | None = None  # -p: one turn, printed, then exit
    mcp_config: Path | None = None  # --mcp-config: other servers in {"mcpServers": ...}
    accept_project_servers: bool = False  # start (and remember) a project's servers
    instructions: bool = True  # send the person's AGENTS.md (core.context.instructions)


@dataclass(frozen=True)
class ServeSettings:
    """`fsagent serve`'s own flags, and FSAGENT_ADMIN_TOKEN."""

    host: str = DEFAULT_SERVE_HOST
    port: int = DEFAULT_SERVE_PORT
    admin_token: str | None = None  # None: the admin API is off (403)
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens above 0")
    return value


def context_from_env(environ: Mapping[str, str]) -> int | None:
    text = environ.get("FSAGENT_CONTEXT_LENGTH", "").strip()
    if not text:
        return None
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as error:
        raise StartupError(f"FSAGENT_CONTEXT_LENGTH: {error}") from None


def constrain_mode(value: str) -> ConstrainMode:
    """--constrain-calls, or FSAGENT_CONSTRAIN_CALLS, which argparse does not check."""
    for mode in CONSTRAIN_MODES:
        if value.strip().lower() == mode:
            return mode
    raise StartupError(
        f"FSAGENT_CONSTRAIN_CALLS: {value!r} is not auto, on or off; set one of them or unset it"
    )


def settings_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Settings:
    """The settings: each from its flag, else its FSAGENT_* variable, else the config file
    (core.user_config), else the default."""
    from core.user_config import load_config
    from store.location import choose_location

    environ = os.environ if environ is None else environ
    config = load_config(environ)
    config_name = str(config.path)
    context_length, context_flag = args.context_length, "--context-length"
    if context_length is None:
        context_length, context_flag = context_from_env(environ), "FSAGENT_CONTEXT_LENGTH"
    base_url, base_from = args.base_url, "--base-url"
    if base_url is None and environ.get("FSAGENT_BASE_URL"):
        base_url, base_from = environ["FSAGENT_BASE_URL"], "FSAGENT_BASE_URL"
    if base_url is None and config.get("base_url"):
        base_url, base_from = config.get("base_url"), f"{config_name}: base_url"
    db = choose_location(args.db, environ, config.get("db"), f"{config_name}: db")
    return Settings(
        base_url=api_base_url(base_url or DEFAULT_BASE_URL, base_from),
        model=args.model or environ.get("FSAGENT_MODEL") or config.get("model"),
        roots=tuple(Path(root).expanduser() for root in (args.root or [Path.cwd()])),
        roots_given=bool(args.root),
        other_root=args.other_root,
        db=normalise(db.location),
        db_note=db.note,
        thread=args.thread or "default",
        verbose=args.verbose,
        read_only=args.read_only,
        require_kernel_sandbox=args.require_kernel_sandbox,
        strict=args.strict,
        transcript=args.transcript,
        record=args.record,
        replay=args.replay,
        approve=args.approve or config.get("approve") or "ask",
        policy=Path(args.policy).expanduser() if args.policy else None,
        plain=args.plain,
        context_length=context_length,
        context_flag=context_flag,
        max_tokens=args.max_tokens or config.get("max_tokens"),
        hide_reasoning=args.hide_reasoning,
        text_calls=not args.no_text_calls,
        constrain_calls=constrain_mode(
            args.constrain_calls or environ.get("FSAGENT_CONSTRAIN_CALLS") or "auto"
        ),
        prompt=args.prompt,
        mcp_config=Path(args.mcp_config).expanduser() if args.mcp_config else None,
        accept_project_servers=args.accept_project_servers,
        instructions=not args.no_instructions,
    )


def api_base_url(given: str, where: str = "--base-url") -> str:
    """The OpenAI-compatible base a server answers at. Without a scheme
    (`localhost:5599`), http:// is meant: these servers serve plain http on the loopback. A
    bare host and port (`http://localhost:11434`, as Ollama's docs give it) gets `/v1`, where
    LM Studio, llama.cpp and Ollama all serve chat completions. What is no http(s) URL of a
    host is refused, named."""
    from urllib.parse import urlsplit

    url = given.strip()
    if "://" not in url:
        url = f"http://{url}"
    url = url.rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise StartupError(
            f"{where} {given!r}: not a model server's URL; pass one like {DEFAULT_BASE_URL}"
        )
    if not parts.path:
        return f"{url}/v1"
    return url


def serve_settings_from_args(args: argparse.Namespace) -> ServeSettings:
    return ServeSettings(
        host=args.host,
        port=args.port,
        # A blank token is none: no bearer header could match it (the header is stripped).
        admin_token=os.environ.get("FSAGENT_ADMIN_TOKEN", "").strip() or None,
        allowed_hosts=tuple(args.allowed_hosts or ()),
        cors_origins=tuple(origin.rstrip("/") for origin in args.cors_origins or ()),
    )
