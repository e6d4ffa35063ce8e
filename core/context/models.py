"""Which model to talk to, and how many tokens of context it has, as the server tells it.

`discover()` asks the server behind an OpenAI-style base URL (`http://host:1234/v1`), trying
in turn what each kind of server answers:

1. LM Studio's native list, `/api/v0/models` (LM Studio 0.3.6 and later), then its 0.4 list
   `/api/v1/models`: every downloaded model with its type, whether it is loaded, and the
   context it was loaded with.
2. llama.cpp's `/props`, whose `default_generation_settings.n_ctx` is the context of one slot,
   which is what one request gets.
3. Ollama's `/api/version`; then `/api/ps` (each loaded model's allocated context_length)
   or `/api/show` (a Modelfile's num_ctx). Ollama never refuses an over-long prompt, it cuts
   it silently, so its context must be known before the first request.
4. The OpenAI list `/v1/models`, which names models and nothing more (llama.cpp adds `meta`).

A server that does not have a path answers 404 (llama.cpp, most others) or, LM Studio's way,
200 with `{"error": "Unexpected endpoint or method. ..."}`; so an answer counts only when its
body has the shape that server gives, never for its status alone.

Choosing the model:

- No `--model`: the loaded chat model (type llm or vlm); the first listed if several are
  loaded. Never an embedding model, never one that is only downloaded. LM Studio with none
  loaded is a `ModelChoiceError` naming what is downloaded and how to load it.
- Other servers: the first id of the OpenAI list that is not an embedding model (ids with
  "embed" in them, e.g. `text-embedding-nomic-embed-text-v1.5`).
- `--model NAME` the server does not have: a `ModelChoiceError` listing the ones it has.
- `--model NAME` that LM Studio has downloaded but not loaded: accepted. LM Studio loads a
  model on its first request (just-in-time loading, on by default) with that model's default
  load settings, which no API reports; its stock default context is 4096 tokens. So the
  context is taken as min(4096, the model's max_context_length), said as such in
  `context_source`, unless `--context-length` gives one (the server said nothing certain).

The context length:

- What the server reports for the model as loaded is the truth: LM Studio's
  loaded_context_length (or loaded_instances[].config.context_length), llama.cpp's n_ctx.
  A trained maximum (max_context_length, n_ctx_train) is not: servers load far less.
- `--context-length N` (or FSAGENT_CONTEXT_LENGTH) fills in when the server says nothing.
  When both speak, the smaller wins: a larger N than the server's would overflow it, and a
  smaller one is a person deliberately keeping requests short.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import httpx

from core.context.tls import verify_for

# A local server answers at once or not at all; a probe for a path it lacks must not stall
# start-up. Connecting gets less time than reading: a refused port fails at once anyway.
_TIMEOUT = httpx.Timeout(5.0, connect=2.0)

# LM Studio's stock context for a model loaded without saved settings.
LMSTUDIO_DEFAULT_CONTEXT = 4096

CHAT_TYPES = ("llm", "vlm")


@dataclass(frozen=True)
class ModelChoice:
    """The model to send requests to and the context it runs in.

    context_source says where context_length came from, in words fit for a status line:
    "LM Studio (loaded)", "llama.cpp /props", "--context-length", "unknown", ...
    server is "lmstudio", "llamacpp", "ollama" or "openai" (any other OpenAI-compatible
    server). no_tools says why the server says the model has no tool support, when it does
    (LM Studio's capabilities, llama.cpp's chat template caps): --constrain-calls auto then
    constrains its calls from the first request (core.context.constrained).
    """

    name: str
    context_length: int | None
    context_source: str
    server: str
    no_tools: str | None = None


SERVER_NAMES = {"lmstudio": "LM Studio", "llamacpp": "llama.cpp", "ollama": "Ollama"}
START_HINTS = {
    "lmstudio": "start LM Studio's local server (Developer tab > Start Server)",
    "llamacpp": "start llama-server again",
    "ollama": "start Ollama again (ollama serve)",
    "": "start your model server (LM Studio's local server, llama-server or ollama serve)",
}
# The kind of server each base URL was found to be (discover), so that a later error names
# the server in use; a URL nothing has answered at yet is "the model server".
_found: dict[str, str] = {}


def server_name(base_url: str) -> str:
    """ "LM Studio", "llama.cpp", "Ollama", or "the model server" (another kind, or not known)."""
    return SERVER_NAMES.get(_found.get(base_url.rstrip("/"), ""), "the model server")


def unreachable_message(base_url: str) -> str:
    """The one line for a server that does not answer (ServerUnreachable, or a connection
    lost later)."""
    kind = _found.get(base_url.rstrip("/"), "")
    hint = START_HINTS.get(kind, START_HINTS[""])
    return f"cannot reach {server_name(base_url)} at {base_url}: {hint} or pass --base-url"


class ModelChoiceError(Exception):
    """The server is there but offers no model we can use; the message is one line."""


class ServerUnreachable(Exception):
    """Nothing answers at the base URL as an OpenAI-compatible server would."""

    def __init__(self, base_url: str) -> None:
        super().__init__(f"no OpenAI-compatible server answers at {base_url}")
        self.base_url = base_url


@dataclass(frozen=True)
class _Listed:
    """One model as a server lists it; context is the loaded one, when known."""

    id: str
    type: str = "llm"
    loaded: bool = True
    context: int | None = None
    max_context: int | None = None
    tools: bool | None = None  # whether the server says it supports tool use; None: unsaid

    @property
    def is_chat(self) -> bool:
        return self.type in CHAT_TYPES


async def discover(
    base_url: str,
    requested: str | None,
    context_override: int | None,
    client: httpx.AsyncClient | None = None,
    *,
    override_name: str = "--context-length",
) -> ModelChoice:
    """Ask the server which model to use and with how much context (see the module doc).

    override_name is how context_override is named in context_source, e.g.
    "FSAGENT_CONTEXT_LENGTH" when it came from the environment.
    Raises ServerUnreachable, or ModelChoiceError with a one-line message.
    """
    base = base_url.rstrip("/")
    root = base.removesuffix("/v1")
    if client is None:
        async with httpx.AsyncClient(timeout=_TIMEOUT, verify=verify_for(base)) as own:
            choice = await _discover(own, base, root, requested, context_override, override_name)
    else:
        choice = await _discover(client, base, root, requested, context_override, override_name)
    _found[base] = choice.server
    return choice


async def _discover(
    client: httpx.AsyncClient,
    base: str,
    root: str,
    requested: str | None,
    override: int | None,
    override_name: str,
) -> ModelChoice:
    def settle(name: str, server: str, context: int | None, source: str) -> ModelChoice:
        return _settle(name, server, context, source, override, override_name)

    lmstudio = await _lmstudio_models(client, base, root)
    if lmstudio is not None:
        chosen = _choose_lmstudio(lmstudio, requested, base)
        no_tools = (
            f"LM Studio lists {chosen.id} without tool use" if chosen.tools is False else None
        )
        if chosen.loaded:
            found = settle(chosen.id, "lmstudio", chosen.context, "LM Studio (loaded)")
            return replace(found, no_tools=no_tools)
        if override is not None:  # LM Studio said nothing certain: the flag decides
            return ModelChoice(chosen.id, override, override_name, "lmstudio", no_tools)
        guess = min(LMSTUDIO_DEFAULT_CONTEXT, chosen.max_context or LMSTUDIO_DEFAULT_CONTEXT)
        source = "LM Studio's default for a model it loads on first use"
        return ModelChoice(chosen.id, guess, source, "lmstudio", no_tools)
    if await _is_ollama(client, base, root):
        return await _ollama_choice(client, base, root, requested, override, override_name)
    props = await _get_json(client, base, f"{root}/props")
    n_ctx = _llamacpp_n_ctx(props)
    chosen = _choose_listed(await _openai_models(client, base), requested, base)
    if n_ctx is not None:
        found = settle(chosen.id, "llamacpp", n_ctx, "llama.cpp /props")
        if _llamacpp_tools(props) is False:
            found = replace(
                found, no_tools=f"llama.cpp's chat template for {chosen.id} has no tools"
            )
        return found
    if chosen.context is not None:  # a llama.cpp whose /props did not answer as expected
        return settle(chosen.id, "llamacpp", chosen.context, "llama.cpp /v1/models meta")
    return settle(chosen.id, "openai", None, "unknown")


# -- Ollama ----------------------------------------------------------------------------------

# Ollama's own default context for a model loaded without num_ctx: 4k under 24 GiB of VRAM,
# more above (docs/context-length.mdx); no API says which tier a machine is in.
OLLAMA_DEFAULT_CONTEXT = 4096


async def _is_ollama(client: httpx.AsyncClient, base: str, root: str) -> bool:
    """Ollama answers `GET /api/version` with `{"version": "0.12.3"}` (docs.ollama.com/api)."""
    body = await _get_json(client, base, f"{root}/api/version")
    return isinstance(body, dict) and isinstance(body.get("version"), str)


async def _ollama_choice(
    client: httpx.AsyncClient,
    base: str,
    root: str,
    requested: str | None,
    override: int | None,
    override_name: str,
) -> ModelChoice:
    """The model, and the context Ollama runs it in: it cuts an over-long prompt silently
    instead of refusing it (ollama/ollama#3839), so the budget must know the context.

    `/api/ps` says each loaded model's allocated `context_length`; for a model not loaded
    yet, `/api/show` says its Modelfile's num_ctx if it sets one, else Ollama's default
    (capped by the model's trained maximum) is the best guess."""
    listed = await _openai_models(client, base)
    running = await _ollama_running(client, base, root)
    if requested is None:
        loaded = [m for m in listed if m.is_chat and m.id in running]
        chosen = loaded[0] if loaded else _choose_listed(listed, None, base)
    else:
        chosen = _choose_listed(listed, requested, base)
    if running.get(chosen.id):
        return _settle(
            chosen.id, "ollama", running[chosen.id], "Ollama /api/ps", override, override_name
        )
    num_ctx, trained = await _ollama_show(client, base, root, chosen.id)
    if num_ctx is not None:
        return _settle(
            chosen.id, "ollama", num_ctx, "Ollama /api/show num_ctx", override, override_name
        )
    if override is not None:
        return ModelChoice(chosen.id, override, override_name, "ollama")
    guess = min(OLLAMA_DEFAULT_CONTEXT, trained or OLLAMA_DEFAULT_CONTEXT)
    return ModelChoice(chosen.id, guess, "Ollama's default for a model it loads", "ollama")


async def _ollama_running(client: httpx.AsyncClient, base: str, root: str) -> dict[str, int]:
    """{model name: allocated context} of the models Ollama has loaded."""
    body = await _get_json(client, base, f"{root}/api/ps")
    found: dict[str, int] = {}
    for entry in _records(body.get("models") if isinstance(body, dict) else None) or []:
        context = _int(entry.get("context_length"))
        for key in ("name", "model"):
            if isinstance(entry.get(key), str) and context:
                found[entry[key]] = context
    return found


async def _ollama_show(
    client: httpx.AsyncClient, base: str, root: str, name: str
) -> tuple[int | None, int | None]:
    """(the Modelfile's num_ctx, the trained maximum) from `POST /api/show`."""
    try:
        response = await client.post(f"{root}/api/show", json={"model": name})
    except httpx.TransportError as error:
        raise ServerUnreachable(base) from error
    try:
        body = response.json() if response.status_code == 200 else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return None, None
    num_ctx = None
    parameters = body.get("parameters")
    for line in parameters.splitlines() if isinstance(parameters, str) else []:
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            num_ctx = int(value.strip())
    info = body.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next(
            (_int(v) for k, v in info.items() if k.endswith(".context_length") and _int(v)), None
        )
    return num_ctx, trained


def _settle(
    name: str,
    server: str,
    context: int | None,
    source: str,
    override: int | None,
    override_name: str,
) -> ModelChoice:
    """Weigh what the server reports against --context-length: the smaller is the safe one."""
    if context is None:
        if override is not None:
            return ModelChoice(name, override, override_name, server)
        return ModelChoice(name, None, "unknown", server)
    if override is not None and override < context:
        return ModelChoice(name, override, f"{override_name} ({source}: {context})", server)
    if override is not None and override > context:
        source = f"{source}; {override_name} {override} is more than it has"
    return ModelChoice(name, context, source, server)


# -- asking ------------------------------------------------------------------------------


async def _get_json(client: httpx.AsyncClient, base: str, url: str) -> Any:
    """The JSON a GET answers with status 200, or None; a dead server raises."""
    try:
        response = await client.get(url)
    except httpx.TransportError as error:
        raise ServerUnreachable(base) from error
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _records(value: Any) -> list[dict[str, Any]] | None:
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, dict)]


async def _lmstudio_models(client: httpx.AsyncClient, base: str, root: str) -> list[_Listed] | None:
    """LM Studio's downloaded models, or None when the server is not LM Studio."""
    body = await _get_json(client, base, f"{root}/api/v0/models")
    data = _records(body.get("data")) if isinstance(body, dict) else None
    # A v0 entry always says its type and state; an OpenAI list at this path would not.
    if data is not None and all("state" in m and "type" in m for m in data):
        return [
            _Listed(
                id=str(m.get("id")),
                type=str(m.get("type")),
                loaded=m.get("state") == "loaded",
                context=_int(m.get("loaded_context_length")),
                max_context=_int(m.get("max_context_length")),
                # LM Studio 0.3.16+ lists what a model can do ("tool_use"); before, nothing.
                tools=(
                    "tool_use" in m["capabilities"]
                    if isinstance(m.get("capabilities"), list)
                    else None
                ),
            )
            for m in data
        ]
    body = await _get_json(client, base, f"{root}/api/v1/models")
    models = _records(body.get("models")) if isinstance(body, dict) else None
    if models is not None and all("key" in m and "loaded_instances" in m for m in models):
        return [_v1_listed(m) for m in models]
    return None


def _v1_listed(entry: dict[str, Any]) -> _Listed:
    instances = _records(entry.get("loaded_instances")) or []
    contexts = [_int((i.get("config") or {}).get("context_length")) for i in instances]
    known = [c for c in contexts if c is not None]
    # The 0.4 list says "embedding" where v0 says "embeddings"; vision sits in capabilities.
    kind = str(entry.get("type"))
    if kind == "llm" and (entry.get("capabilities") or {}).get("vision"):
        kind = "vlm"
    capabilities = entry.get("capabilities")
    trained = capabilities.get("trained_for_tool_use") if isinstance(capabilities, dict) else None
    return _Listed(
        id=str(entry.get("key")),
        type=kind,
        loaded=bool(instances),
        # Several instances may run with different contexts: the smallest is the safe one.
        context=min(known) if known else None,
        max_context=_int(entry.get("max_context_length")),
        tools=trained if isinstance(trained, bool) else None,
    )


def _llamacpp_tools(props: Any) -> bool | None:
    """Whether llama.cpp's chat template for the model renders tools (`/props`
    chat_template_caps.supports_tools, in builds since 2025); None when it does not say."""
    caps = props.get("chat_template_caps") if isinstance(props, dict) else None
    value = caps.get("supports_tools") if isinstance(caps, dict) else None
    return value if isinstance(value, bool) else None


def _llamacpp_n_ctx(props: Any) -> int | None:
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    return _int(settings.get("n_ctx")) if isinstance(settings, dict) else None


async def _openai_models(client: httpx.AsyncClient, base: str) -> list[_Listed]:
    body = await _get_json(client, base, f"{base}/models")
    data = _records(body.get("data")) if isinstance(body, dict) else None
    if data is None:
        # Something answers, but not with a model list: not the server we are looking for.
        raise ServerUnreachable(base)
    listed = []
    for entry in data:
        name = str(entry.get("id"))
        meta = entry.get("meta")
        context = _int(meta.get("n_ctx")) if isinstance(meta, dict) else None
        kind = "embeddings" if is_embedding_id(name) else "llm"
        listed.append(_Listed(id=name, type=kind, context=context))
    return listed


def is_embedding_id(name: str) -> bool:
    """An id that names an embedding model, for servers that do not say a model's type."""
    return "embed" in name.lower()


# -- choosing ----------------------------------------------------------------------------


def _names(models: list[_Listed]) -> str:
    return ", ".join(m.id for m in models) if models else "none"


def _choose_lmstudio(models: list[_Listed], requested: str | None, base: str) -> _Listed:
    chat = [m for m in models if m.is_chat]
    if requested is not None:
        found = next((m for m in models if m.id == requested), None)
        if found is None or not found.is_chat:
            what = "an embedding model" if found is not None else "not a model it has"
            raise ModelChoiceError(
                f"--model {requested}: {what} at LM Studio ({base}); "
                f"its chat models: {_names(chat)}"
            )
        return found  # loaded or not: LM Studio loads it on the first request
    loaded = [m for m in chat if m.loaded]
    if loaded:
        return loaded[0]
    if not chat:
        raise ModelChoiceError(
            f"LM Studio at {base} has no chat model downloaded: "
            "download one in LM Studio, or pass --model NAME"
        )
    raise ModelChoiceError(
        f"LM Studio at {base} has no chat model loaded (downloaded: {_names(chat)}): "
        f"load one with `lms load {chat[0].id}`, or pass --model NAME"
    )


def _choose_listed(models: list[_Listed], requested: str | None, base: str) -> _Listed:
    chat = [m for m in models if m.is_chat]
    if requested is not None:
        found = next((m for m in models if m.id == requested), None)
        if found is None:
            raise ModelChoiceError(
                f"--model {requested}: the server at {base} has no such model; "
                f"it has: {_names(chat)}"
            )
        return found
    if not chat:
        raise ModelChoiceError(
            f"the server at {base} lists no chat model: load one, or pass --model NAME"
        )
    return chat[0]


HEALTH_SECONDS = 5.0


async def server_problem(base_url: str) -> str | None:
    """Why LM Studio cannot be reached at `base_url` now; None when it lists its models
    (`fsagent serve`'s /healthz)."""
    try:
        async with httpx.AsyncClient(timeout=HEALTH_SECONDS, verify=verify_for(base_url)) as client:
            response = await client.get(f"{base_url}/models")
            response.raise_for_status()
            response.json()
    except (httpx.HTTPError, ValueError):
        return unreachable_message(base_url)
    return None
