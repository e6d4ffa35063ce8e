"""Which model fsagent talks to and how much context it budgets for, from the real CLI against
each stand-in server flavour."""

from __future__ import annotations

from conftest import Workspace
from fake_llm import FakeLLM, FakeModel, text

EMBED = FakeModel("text-embedding-nomic-embed-text-v1.5", type="embeddings", max_context=2048)
QWEN = FakeModel("qwen2.5-7b-instruct", state="not-loaded", max_context=32768)
LLAMA = FakeModel("llama-3.2-3b-instruct", context=4096, max_context=131072)


def test_the_loaded_chat_model_not_the_embedding_listed_first(workspace: Workspace):
    with FakeLLM([text("Hi.")], models=[EMBED, QWEN, LLAMA], flavour="lmstudio") as llm:
        result = workspace.run(llm.base_url, "hello\n", "--read-only")
        verbose = workspace.run(llm.base_url, "", "--read-only", "--verbose")
        [request] = llm.requests

    assert result.returncode == 0, result.stderr
    assert request["model"] == "llama-3.2-3b-instruct"
    line = next(line for line in result.stdout.splitlines() if line.startswith("model "))
    assert line.startswith("model llama-3.2-3b-instruct, context 4096; replies up to 512")
    assert not llm.is_loaded(QWEN.id)  # nothing else was loaded by asking
    # --verbose says which source won.
    assert "model llama-3.2-3b-instruct, context 4096 (from LM Studio (loaded));" in verbose.stdout


def test_a_smaller_context_length_wins_over_the_servers(workspace: Workspace):
    with FakeLLM([], models=[LLAMA], flavour="llamacpp") as llm:
        llamacpp = workspace.run(llm.base_url, "", "--verbose", "--context-length", "2048")

    assert (
        "context 2048 (from --context-length (llama.cpp /props: 4096)); replies up to 256"
        in llamacpp.stdout
    )


def test_with_nothing_loaded_one_line_lists_what_is_downloaded(workspace: Workspace):
    with FakeLLM([], models=[EMBED, QWEN], flavour="lmstudio") as llm:
        result = workspace.run(llm.base_url, "hello\n")
        assert llm.requests == []

    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("fsagent: LM Studio at ")
    assert "no chat model loaded (downloaded: qwen2.5-7b-instruct)" in line
    assert "`lms load qwen2.5-7b-instruct`" in line and "--model" in line
    assert "you>" not in result.stdout


def test_an_unknown_model_is_one_line_listing_the_ones_there_are(workspace: Workspace):
    with FakeLLM([], models=[EMBED, QWEN, LLAMA], flavour="lmstudio") as llm:
        lmstudio = workspace.run(llm.base_url, "hello\n", "--model", "gpt-4o")
    with FakeLLM([], models=["fake-model", "nomic-embed-text"]) as llm:
        other = workspace.run(llm.base_url, "hello\n", "--model", "gpt-4o")

    for result in (lmstudio, other):
        assert result.returncode == 2
        [line] = result.stderr.splitlines()
        assert line.startswith("fsagent: --model gpt-4o: ")
        assert "Traceback" not in result.stderr
    assert "qwen2.5-7b-instruct, llama-3.2-3b-instruct" in lmstudio.stderr
    assert EMBED.id not in lmstudio.stderr
    assert "it has: fake-model" in other.stderr and "nomic" not in other.stderr


def test_other_servers_skip_embedding_ids_and_take_the_context_from_the_environment(
    workspace: Workspace,
):
    models = ["nomic-embed-text-v1.5", "mistral-7b"]
    with FakeLLM([text("Hi."), text("Hi.")], models=models) as llm:
        told = workspace.run(
            llm.base_url,
            "hello\n",
            "--read-only",
            "--verbose",
            env={"FSAGENT_CONTEXT_LENGTH": "6000"},
        )
        unknown = workspace.run(llm.base_url, "hello\n", "--read-only", thread="u")
        requests = llm.requests

    assert told.returncode == 0, told.stderr
    assert [r["model"] for r in requests] == ["mistral-7b"] * 2
    assert "model mistral-7b, context 6000 (from FSAGENT_CONTEXT_LENGTH)" in told.stdout
    # Nothing says the context: said so, and replies are still bounded.
    assert unknown.returncode == 0, unknown.stderr
    assert "model mistral-7b, context unknown" in unknown.stdout
    assert "--context-length" in unknown.stdout
    # An eighth of the context told (6000), and 1024 when nothing says it.
    assert [r["max_tokens"] for r in requests] == [750, 1024]


def test_bad_context_and_reply_limits_are_one_line_and_exit_2(workspace: Workspace):
    with FakeLLM([], models=[LLAMA], flavour="llamacpp") as llm:
        too_long = workspace.run(llm.base_url, "", "--max-tokens", "4096")
        not_a_number = workspace.run(llm.base_url, "", "--context-length", "lots")
        bad_env = workspace.run(llm.base_url, "", env={"FSAGENT_CONTEXT_LENGTH": "-5"})

    assert too_long.returncode == 2
    assert too_long.stderr.strip().splitlines() == [
        "fsagent: --max-tokens 4096: the model's context is 4096 tokens (llama.cpp /props), "
        "which leaves no room for a request; pass a smaller --max-tokens"
    ]
    assert not_a_number.returncode == 2 and "--context-length: 'lots' is not" in not_a_number.stderr
    assert bad_env.returncode == 2
    assert bad_env.stderr.strip().splitlines() == [
        "fsagent: FSAGENT_CONTEXT_LENGTH: '-5' is not a whole number of tokens above 0"
    ]
