"""core.context.models.discover against the stand-in in each of its server flavours."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import httpx
import pytest

from core.context.models import ModelChoice, ModelChoiceError, ServerUnreachable, discover
from fake_llm import FakeLLM, FakeModel, text

EMBED = FakeModel("text-embedding-nomic-embed-text-v1.5", type="embeddings", max_context=2048)
QWEN = FakeModel("qwen2.5-7b-instruct", state="not-loaded", max_context=32768)
LLAMA = FakeModel("llama-3.2-3b-instruct", context=4096, max_context=131072)


def choose(llm: FakeLLM, requested: str | None = None, override: int | None = None) -> ModelChoice:
    return asyncio.run(discover(llm.base_url, requested, override))


def refusal(llm: FakeLLM, requested: str | None = None) -> str:
    with pytest.raises(ModelChoiceError) as caught:
        choose(llm, requested)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- LM Studio -----------------------------------------------------------------------------


def test_lmstudio_picks_the_loaded_chat_model_not_the_embedding_listed_first() -> None:
    with FakeLLM([], models=[EMBED, QWEN, LLAMA], flavour="lmstudio") as llm:
        choice = choose(llm)
    assert choice == ModelChoice("llama-3.2-3b-instruct", 4096, "LM Studio (loaded)", "lmstudio")


def test_lmstudio_never_picks_a_loaded_embedding_model() -> None:
    models = [FakeModel(EMBED.id, type="embeddings"), QWEN]
    with FakeLLM([], models=models, flavour="lmstudio") as llm:
        message = refusal(llm)
    assert "no chat model loaded" in message
    assert "downloaded: qwen2.5-7b-instruct" in message
    assert "lms load qwen2.5-7b-instruct" in message and "--model" in message
    assert EMBED.id not in message


def test_lmstudio_with_no_chat_model_at_all() -> None:
    with FakeLLM([], models=[EMBED], flavour="lmstudio") as llm:
        message = refusal(llm)
    assert "no chat model downloaded" in message


def test_lmstudio_unknown_model_lists_its_chat_models() -> None:
    with FakeLLM([], models=[EMBED, QWEN, LLAMA], flavour="lmstudio") as llm:
        unknown = refusal(llm, "gpt-4o")
        embedding = refusal(llm, EMBED.id)
    assert unknown.startswith("--model gpt-4o: not a model it has")
    assert "qwen2.5-7b-instruct, llama-3.2-3b-instruct" in unknown
    assert EMBED.id not in unknown.split(":", 1)[1]
    assert "an embedding model" in embedding


def test_lmstudio_not_loaded_model_gets_lmstudio_default_context() -> None:
    small = FakeModel("tiny", state="not-loaded", max_context=2048)
    with FakeLLM([text("hi")], models=[QWEN, small, LLAMA], flavour="lmstudio") as llm:
        qwen = choose(llm, "qwen2.5-7b-instruct")
        tiny = choose(llm, "tiny")
        flagged = choose(llm, "qwen2.5-7b-instruct", override=16384)
        # Once used, LM Studio has loaded it and says with what context.
        httpx.post(
            llm.base_url + "/chat/completions",
            json={"model": "qwen2.5-7b-instruct", "messages": [{"role": "user", "content": "x"}]},
        )
        after = choose(llm, "qwen2.5-7b-instruct")
    assert (qwen.name, qwen.context_length) == ("qwen2.5-7b-instruct", 4096)
    assert "loads on first use" in qwen.context_source
    assert tiny.context_length == 2048  # never more than the model can take
    assert (flagged.context_length, flagged.context_source) == (16384, "--context-length")
    assert (after.context_length, after.context_source) == (32768, "LM Studio (loaded)")


def test_a_smaller_context_flag_wins_a_larger_one_does_not() -> None:
    with FakeLLM([], models=[LLAMA], flavour="lmstudio") as llm:
        smaller = choose(llm, override=2048)
        larger = asyncio.run(
            discover(llm.base_url, None, 8192, override_name="FSAGENT_CONTEXT_LENGTH")
        )
    assert smaller.context_length == 2048
    assert smaller.context_source == "--context-length (LM Studio (loaded): 4096)"
    assert larger.context_length == 4096
    assert larger.context_source == (
        "LM Studio (loaded); FSAGENT_CONTEXT_LENGTH 8192 is more than it has"
    )


# -- llama.cpp and plain OpenAI servers ----------------------------------------------------


def test_llamacpp_context_comes_from_props() -> None:
    models = [FakeModel("qwen3-4b-q4_k_m.gguf", max_context=40960)]
    with FakeLLM([], models=models, flavour="llamacpp", context=2048) as llm:
        choice = choose(llm)
        flagged = choose(llm, override=1024)
        unknown = refusal(llm, "llama-3")
    assert choice == ModelChoice("qwen3-4b-q4_k_m.gguf", 2048, "llama.cpp /props", "llamacpp")
    assert flagged.context_length == 1024
    assert "it has: qwen3-4b-q4_k_m.gguf" in unknown


def test_openai_list_skips_embedding_ids_and_knows_no_context() -> None:
    names = ["text-embedding-nomic-embed-text-v1.5", "my-chat-model"]
    with FakeLLM([], models=names) as llm:
        plain = choose(llm)
        flagged = choose(llm, override=4096)
        named = choose(llm, "text-embedding-nomic-embed-text-v1.5")
    assert plain == ModelChoice("my-chat-model", None, "unknown", "openai")
    assert flagged == ModelChoice("my-chat-model", 4096, "--context-length", "openai")
    # Asked for by name, an id is taken at its word: only the default skips embedding ids.
    assert named.name == "text-embedding-nomic-embed-text-v1.5"


def test_openai_list_with_only_embedding_models() -> None:
    with FakeLLM([], models=["nomic-embed-text"]) as llm:
        message = refusal(llm)
    assert "lists no chat model" in message


def test_openai_unknown_model_lists_the_ones_it_has() -> None:
    with FakeLLM([], models=["a-model", "b-model"]) as llm:
        message = refusal(llm, "c-model")
    assert message.endswith("it has: a-model, b-model")


# -- servers that are not there, or not what they seem -----------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_down_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServerUnreachable) as caught:
        asyncio.run(discover(url, None, None))
    assert caught.value.base_url == url


def mock(routes: dict[str, object]) -> Callable[[], httpx.AsyncClient]:
    """A client whose server answers `routes` by path; LM Studio's 200 error for the rest."""

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in routes:
            return httpx.Response(200, json=routes[path])
        return httpx.Response(200, json={"error": f"Unexpected endpoint or method. (GET {path})"})

    return lambda: httpx.AsyncClient(transport=httpx.MockTransport(handle))


def run_with(client_factory: Callable[[], httpx.AsyncClient]) -> ModelChoice:
    async def go() -> ModelChoice:
        async with client_factory() as client:
            return await discover("http://lms:1234/v1", None, None, client)

    return asyncio.run(go())


def test_lmstudio_04_list_when_v0_is_gone() -> None:
    v1 = {
        "models": [
            {"type": "embedding", "key": "nomic-embed", "loaded_instances": []},
            {
                "type": "llm",
                "key": "gemma-3-270m-it-qat",
                "loaded_instances": [
                    {"id": "gemma-3-270m-it-qat", "config": {"context_length": 4096}},
                    {"id": "gemma-3-270m-it-qat:2", "config": {"context_length": 2048}},
                ],
                "max_context_length": 32768,
                "capabilities": {"vision": False, "trained_for_tool_use": False},
            },
        ]
    }
    choice = run_with(mock({"/api/v1/models": v1}))
    # Two instances with different contexts: the smaller is what a request may land on.
    # Not trained for tool use, as LM Studio says: --constrain-calls auto constrains its calls.
    no_tools = "LM Studio lists gemma-3-270m-it-qat without tool use"
    expected = ModelChoice("gemma-3-270m-it-qat", 2048, "LM Studio (loaded)", "lmstudio", no_tools)
    assert choice == expected


def test_an_old_lmstudio_answering_200_errors_is_read_as_a_plain_server() -> None:
    listed = {"object": "list", "data": [{"id": "some-model", "object": "model"}]}
    choice = run_with(mock({"/v1/models": listed}))
    assert choice == ModelChoice("some-model", None, "unknown", "openai")


def test_something_that_lists_no_models_is_unreachable() -> None:
    with pytest.raises(ServerUnreachable):
        run_with(mock({}))


# -- what the server says of tool support (--constrain-calls auto) ---------------------------


def test_lmstudio_and_llama_cpp_say_when_a_model_has_no_tool_support() -> None:
    small = FakeModel("gemma-3-1b", tools=False)
    with FakeLLM([], models=[small], flavour="lmstudio") as llm:
        lmstudio = choose(llm)
    with FakeLLM([], models=[small], flavour="llamacpp") as llm:
        llamacpp = choose(llm)
    with FakeLLM([], models=[LLAMA], flavour="lmstudio") as llm:
        capable = choose(llm)
    # LM Studio 0.3.16+: `capabilities` lists "tool_use"; llama.cpp's /props says whether
    # its chat template renders tools.
    assert lmstudio.no_tools == "LM Studio lists gemma-3-1b without tool use"
    assert llamacpp.no_tools == "llama.cpp's chat template for gemma-3-1b has no tools"
    assert capable.no_tools is None


def test_an_lmstudio_list_without_capabilities_says_nothing_of_tools() -> None:
    # Before 0.3.16 the list had no capabilities: nothing is known, nothing is assumed.
    v0 = {"data": [{"id": "m", "type": "llm", "state": "loaded", "loaded_context_length": 4096}]}
    assert run_with(mock({"/api/v0/models": v0})).no_tools is None
