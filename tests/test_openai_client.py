"""llama-server's OpenAI-compatible API over an oscar2 cache, through the `openai` Python client.

The model is SmolLM2 converted with its zoo rotations (oscar-convert --rotations zoo), served
with -ctk oscar2 -ctv oscar2 and the default 16-bit windows (64 sink + 256 recent tokens). Each
prompt is a ~450-token article plus a question, so the answer attends over cells of the 2-bit
tier (those past the sinks and before the recent window).

Concurrent answers can equal single-client ones exactly only where each token's attention does
not depend on what the server batched with it (see tests/test_server_concurrency.py): ubatches
of fewer than 64 tokens (-ub 32: the CPU flash-attention kernel's row-by-row path for every
query), a stream per slot (-no-kvu: a sequence's cells in position order from 0, as alone), no
prompt cache (each request computes its prompt from cell 0) and one thread. Under these settings
the answers of several clients at once over -np 4 must be those of the same requests sent one
at a time, and a streamed answer must be the non-streamed one.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from oscar import cli
from server import llama_server

MAX_TOKENS = 24
SINK, RECENT = 64, 256  # llama.cpp's default windows (the zoo entry carries no others)
SERVER_ARGS = ("-ctk", "oscar2", "-ctv", "oscar2", "-fa", "on", "-np", "4", "-c", "4096",
               "-ub", "32", "-no-kvu", "-t", "1", "-tb", "1")
N_PROMPTS = 4
NO_CACHE = {"cache_prompt": False}


@pytest.fixture(scope="module")
def smollm2_oscar(smollm2, tmp_path_factory):
    out = tmp_path_factory.mktemp("openai") / "smollm2-oscar.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", "zoo", "-o", str(out), "-q"]) == 0
    return out


def _messages(wiki_slice, i: int) -> list[dict]:
    text = wiki_slice.read_text(errors="ignore")[i * 12000:i * 12000 + 1700]
    return [{"role": "system", "content": "You answer questions about the text the user gives."},
            {"role": "user", "content": f"{text}\n\nWhat is this text about? Answer in one sentence."}]


def test_openai_client_chat_stream_and_concurrent_clients(bin_dir, smollm2_oscar, wiki_slice, tmp_path):
    from openai import OpenAI

    log = tmp_path / "server.log"
    with llama_server(bin_dir, smollm2_oscar, *SERVER_ARGS, log=log) as url:
        started = log.read_text(errors="replace")
        assert "oscar: K and V in oscar2" in started and f"{SINK} sink + {RECENT} recent" in started, \
            "the server did not start with an oscar2 cache and the default windows"

        def client() -> OpenAI:
            return OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)

        def ask(c: OpenAI, i: int):
            return c.chat.completions.create(model="smollm2", messages=_messages(wiki_slice, i), temperature=0,
                                             max_tokens=MAX_TOKENS, extra_body=NO_CACHE)

        # chat completions, one client, one request at a time: the references
        c = client()
        t0 = time.time()
        single = [ask(c, i) for i in range(N_PROMPTS)]
        t_single = time.time() - t0
        for r in single:
            assert r.object == "chat.completion" and len(r.choices) == 1
            ch = r.choices[0]
            assert ch.message.role == "assistant" and ch.message.content.strip(), r
            assert ch.finish_reason in ("stop", "length")
            assert r.usage.completion_tokens >= 1 and r.usage.completion_tokens <= MAX_TOKENS
            # the answer reads the 2-bit tier: the prompt's cells go past both 16-bit windows
            assert r.usage.prompt_tokens > SINK + RECENT + 64, r.usage
        texts = [r.choices[0].message.content for r in single]
        assert len(set(texts)) == N_PROMPTS, f"distinct texts gave equal answers: {texts}"

        # streaming: the deltas put together are the non-streamed answer
        stream = c.chat.completions.create(model="smollm2", messages=_messages(wiki_slice, 0), temperature=0,
                                           max_tokens=MAX_TOKENS, stream=True,
                                           stream_options={"include_usage": True}, extra_body=NO_CACHE)
        deltas, finish, usage = [], None, None
        for chunk in stream:
            assert chunk.object == "chat.completion.chunk"
            if chunk.usage is not None:
                usage = chunk.usage
            for ch in chunk.choices:
                deltas.append(ch.delta.content or "")
                finish = ch.finish_reason or finish
        assert sum(1 for d in deltas if d) > 1, "the answer did not come in several chunks"
        assert "".join(deltas) == texts[0]
        assert finish == single[0].choices[0].finish_reason
        assert usage is not None and usage.completion_tokens == single[0].usage.completion_tokens

        # N_PROMPTS clients at once, each with its own connection, over the 4 slots
        got: list[str | None] = [None] * N_PROMPTS
        errors: list[BaseException] = []
        barrier = threading.Barrier(N_PROMPTS)

        def run(i: int) -> None:
            try:
                mine = client()
                barrier.wait()
                got[i] = ask(mine, i).choices[0].message.content
            except BaseException as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        busy = []  # slots processing at once, sampled from /slots while the clients wait

        def watch() -> None:
            while any(t.is_alive() for t in threads):
                with urllib.request.urlopen(url + "/slots", timeout=10) as r:
                    busy.append(sum(1 for s in json.loads(r.read()) if s.get("is_processing")))
                time.sleep(0.2)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(N_PROMPTS)]
        t0 = time.time()
        for t in threads:
            t.start()
        watch()
        for t in threads:
            t.join()
        t_conc = time.time() - t0
        assert not errors, errors
    print(f"{N_PROMPTS} requests one at a time {t_single:.1f} s, at once {t_conc:.1f} s, "
          f"slots busy at once: up to {max(busy, default=0)}, prompts of "
          f"{[r.usage.prompt_tokens for r in single]} tokens")
    assert max(busy, default=0) >= 2, "the server never ran two requests side by side"
    diff = [(i, a, b) for i, (a, b) in enumerate(zip(texts, got)) if a != b]
    assert not diff, f"concurrent answers differ from single-client ones: {diff}"
