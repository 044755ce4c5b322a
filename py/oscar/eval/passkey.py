"""Long-context retrieval ("passkey"): a number hidden at a chosen depth in filler text.

The prompt is an instruction, ``n`` repetitions of a filler paragraph with the key
sentence placed after ``round(depth * n)`` of them, and a question whose answer starts
with the number. The model continues greedily; a trial succeeds when the first number
in its continuation equals the key. The number of filler repetitions is the largest
that keeps the whole prompt (by the model's own tokenizer) within ``ctx - n_gen``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

INTRO = ("Somewhere in the long text below there is a secret number. Read everything, find the "
         "number and keep it in mind: you will be asked for it at the end.\n\n")
FILLER = ("The river keeps running to the sea. Birds sing before the morning light. "
          "The road goes on past the hills and the old mill. Nothing here is worth remembering. ")
NEEDLE = "The secret number is {key}. Remember it: {key} is the secret number. "
QUESTION = "\n\nWhat is the secret number mentioned in the text? The secret number is"


@dataclass
class Prompt:
    """One passkey prompt: its text, token count, and where the key sits."""
    text: str
    key: int
    n_tokens: int
    n_filler: int   # filler repetitions in all
    n_before: int   # repetitions before the key sentence


def compose(key: int, n_filler: int, n_before: int) -> str:
    """The prompt text with ``n_before`` filler paragraphs before the key and the rest after."""
    if not 0 <= n_before <= n_filler:
        raise ValueError(f"n_before ({n_before}) must be between 0 and n_filler ({n_filler})")
    return INTRO + FILLER * n_before + NEEDLE.format(key=key) + FILLER * (n_filler - n_before) + QUESTION


def build(count_tokens: Callable[[str], int], ctx: int, depth: float, key: int, n_gen: int = 8) -> Prompt:
    """The longest prompt that fits in ``ctx - n_gen`` tokens with the key at ``depth``
    (0 = right after the instruction, 1 = right before the question).

    count_tokens: number of tokens of a text as the model will see it (BOS included)."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth {depth} is not a fraction between 0 and 1")
    budget = ctx - n_gen
    fixed = count_tokens(compose(key, 0, 0))
    if fixed > budget:
        raise ValueError(f"ctx {ctx} is too short for a passkey prompt: the instruction, key and question "
                         f"alone take {fixed} tokens plus {n_gen} to answer")
    unit = max(1, count_tokens(INTRO + FILLER * 8) - count_tokens(INTRO)) / 8
    n = max(0, int((budget - fixed) / unit))
    while True:
        before = int(round(depth * n))
        text = compose(key, n, before)
        t = count_tokens(text)
        if t <= budget or n == 0:
            return Prompt(text=text, key=key, n_tokens=t, n_filler=n, n_before=before)
        n -= max(1, int((t - budget) / unit))


_NUMBER = re.compile(r"\d+")


def score(continuation: str, key: int) -> bool:
    """Whether the first run of digits in the model's continuation is exactly the key
    (``"48213."`` yes; ``"048213"``, ``"4821"`` or ``"48 213"`` no)."""
    m = _NUMBER.search(continuation)
    return m is not None and m.group() == str(key)


def keys(n: int, seed: int = 0) -> list[int]:
    """``n`` random five-digit keys (the same for every KV configuration of a run)."""
    return [int(k) for k in np.random.default_rng(seed).integers(10000, 100000, size=n)]


def summarise(kv: str, ctx: int, depth: float, outcomes: list[bool], prompt_tokens: int,
              answers: list[str]) -> dict:
    """A result row: accuracy in percent with its 95 % Wilson interval."""
    from .metrics import wilson_interval
    lo, hi = wilson_interval(sum(outcomes), len(outcomes))
    return {"kv": kv, "ctx": ctx, "depth": depth, "trials": len(outcomes), "correct": int(sum(outcomes)),
            "accuracy": 100.0 * sum(outcomes) / len(outcomes), "ci_low": 100 * lo, "ci_high": 100 * hi,
            "prompt_tokens": prompt_tokens, "answers": answers}


def run(model: str, configs: Iterable, ctxs: list[int], depths: list[float], trials: int, seed: int = 0,
        n_gen: int = 8, threads: int | None = None, progress: bool = True) -> list[dict]:
    """Greedy passkey retrieval through the bindings for every (configuration, ctx, depth).

    configs: :class:`oscar.eval.perplexity.KVConfig` objects (their ``--kv-sink``/``--kv-recent``
    flags and environment apply). Returns one :func:`summarise` row per cell."""
    from ..core.progress import tqdm
    from ..core import llama

    configs = list(configs)
    ks = keys(trials, seed)
    rows = []
    bar = tqdm(total=len(configs) * len(ctxs) * len(depths) * trials, desc="passkey", unit="trial",
               disable=not progress)
    for cfg in configs:
        opts = dict(zip(cfg.args[::2], cfg.args[1::2]))
        saved = {k: os.environ.get(k) for k in cfg.env}
        os.environ.update(cfg.env)
        try:
            for ctx in ctxs:
                llm = llama.load(model, kv_k=cfg.k, kv_v=cfg.v, n_ctx=ctx, n_threads=threads,
                                 kv_sink=int(opts["--kv-sink"]) if "--kv-sink" in opts else None,
                                 kv_recent=int(opts["--kv-recent"]) if "--kv-recent" in opts else None)

                def count(text: str) -> int:
                    return len(llm.tokenize(text.encode(), add_bos=True, special=False))

                for depth in depths:
                    outcomes, answers, n_tok = [], [], 0
                    for key in ks:
                        p = build(count, ctx, depth, key, n_gen)
                        n_tok = p.n_tokens
                        out = llm.create_completion(p.text, max_tokens=n_gen, temperature=0.0, top_k=1)
                        text = out["choices"][0]["text"]
                        outcomes.append(score(text, key))
                        answers.append(text.strip())
                        bar.update()
                    rows.append(summarise(cfg.name, ctx, depth, outcomes, n_tok, answers))
                del llm
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    bar.close()
    return rows
