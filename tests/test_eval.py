"""oscar-eval: metric code against hand-computed values, llama-perplexity's numbers against
numpy on logits from the bindings, bad input, and the passkey prompt and scoring."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

import oscar
from oscar.core import kvmem, paths
from oscar.eval import evaluate, metrics, passkey
from oscar.eval import perplexity as pp

LN = math.log


# ----------------------------------------------------------------------------- metrics by hand

def test_log_softmax_and_nll_by_hand():
    lp = metrics.log_softmax(np.array([[0.0, LN(3)], [5.0, 5.0]]))
    assert np.allclose(np.exp(lp), [[0.25, 0.75], [0.5, 0.5]])
    # NLL of token 1 then token 0: -ln 0.75, -ln 0.5
    assert np.allclose(metrics.token_nll(np.array([[0.0, LN(3)], [5.0, 5.0]]), [1, 0]), [-LN(0.75), LN(2)])


def test_kld_by_hand():
    base = np.log([[0.5, 0.5], [0.2, 0.8]])
    test = np.log([[0.25, 0.75], [0.2, 0.8]]) + 7.0  # a constant shift changes no probability
    # KL(base||test) = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.5 ln(4/3) for row 0; 0 for row 1
    assert np.allclose(metrics.kld_per_token(base, test), [0.5 * LN(4 / 3), 0.0], atol=1e-12)
    # not symmetric: KL(test||base) = 0.25 ln(0.5) + 0.75 ln(1.5)
    assert metrics.kld_per_token(test[:1], base[:1])[0] == pytest.approx(0.25 * LN(0.5) + 0.75 * LN(1.5))


def test_top1_mean_sem_perplexity_percentile_by_hand():
    assert metrics.top1_agree(np.array([[1, 2, 0], [3, 0, 0.]]), np.array([[0, 2, 1], [0, 0, 3.]])).tolist() == [True, False]
    m, s = metrics.mean_sem([1, 2, 3, 4])
    assert (m, s) == pytest.approx((2.5, math.sqrt(5 / 3) / 2))         # std(ddof=1) = sqrt(5/3), n = 4
    ppl, err = metrics.perplexity([LN(2), LN(8)])
    assert (ppl, err) == pytest.approx((4.0, 4 * LN(2)))               # exp(ln 4); sem = |ln8 - ln2| / 2
    assert metrics.percentile(np.arange(101.0)[::-1], 0.99) == pytest.approx(99.0)
    assert metrics.percentile([1.0, 2.0], 0.5) == pytest.approx(1.5)
    assert metrics.percentile([3.0, 1.0, 2.0], 0.25) == pytest.approx(1.5)  # position 0.5 between 1 and 2
    with pytest.raises(ValueError):
        metrics.mean_sem([])


def test_quality_row_by_hand():
    base = np.log([[0.5, 0.5], [0.9, 0.1]])
    test = np.log([[0.25, 0.75], [0.6, 0.4]])
    q = metrics.quality(base, test, targets=[1, 0])
    nll = [-LN(0.75), -LN(0.6)]
    kl = [0.5 * LN(4 / 3), 0.9 * LN(0.9 / 0.6) + 0.1 * LN(0.1 / 0.4)]
    assert q["ppl"] == pytest.approx(math.exp(sum(nll) / 2))
    assert q["ppl_err"] == pytest.approx(q["ppl"] * abs(nll[0] - nll[1]) / 2)
    assert q["kld"] == pytest.approx(sum(kl) / 2)
    assert q["kld_err"] == pytest.approx(abs(kl[0] - kl[1]) / 2)
    assert q["kld_p99"] == pytest.approx(min(kl) + 0.99 * abs(kl[0] - kl[1]))
    # row 0: argmax base is a tie (index 0) vs test's 1 -> disagree; row 1 agrees
    assert q["same_top"] == pytest.approx(50.0) and q["same_top_err"] == pytest.approx(50.0)


def test_wilson_interval_by_hand():
    lo, hi = metrics.wilson_interval(3, 3)
    z2 = 1.96 ** 2
    d = 1 + z2 / 3
    assert lo == pytest.approx((1 + z2 / 6) / d - 1.96 * math.sqrt(z2 / 36) / d) and hi == 1.0
    assert metrics.wilson_interval(0, 5)[0] == 0.0
    assert metrics.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


def test_measured_bits_from_llama_log_line():
    line = ("oscar: K and V in oscar2 (2.5 bits/value): 14.06 MiB; 16-bit windows for K and V: 64 sink + 256 "
            "recent tokens per sequence, pool of 832 slots per stream: 18.30 MiB")
    assert kvmem.measured_bits("oscar2", "oscar2", line) == pytest.approx(2.5 * 32.36 / 14.06)
    mixed = ("oscar: V in oscar2 (2.5 bits/value): 7.03 MiB; 16-bit windows for V: 64 sink + 256 recent tokens "
             "per sequence, pool of 832 slots per stream: 9.15 MiB; K in q4_0: 12.66 MiB")
    got = kvmem.parse_oscar_line(mixed)
    assert math.isnan(got.pop("bits")) and got == {"sides": "V", "oscar2": 7.03, "pool": 9.15, "other": 12.66}
    assert kvmem.measured_bits("q4_0", "oscar2", mixed) == pytest.approx((4.5 + 2.5 * 16.18 / 7.03) / 2)
    # a plan's line carries llama.cpp's own figure, which wins
    planned = ("oscar: K and V in oscar2 (2.5 bits/value): 12.00 MiB; 16-bit windows for K and V: 64 sink + 256 "
               "recent tokens per sequence, pool of 832 slots per stream: 16.00 MiB; precision plan: oscar2 for K in "
               "26 and V in 30 of 30 layers, K q8_0 in 4 of 30 layers: 2.10 MiB; 5.43 bits/value over the whole "
               "cache at 1024 cells")
    got = kvmem.parse_oscar_line(planned)
    assert got["other"] == 2.10 and got["bits"] == 5.43 and got["pool"] == 16.0
    assert kvmem.measured_bits("oscar2", "oscar2", planned) == 5.43
    off = "oscar: K and V in oscar2 (2.5 bits/value): 14.06 MiB; no 16-bit windows (sink and recent set to 0)"
    assert kvmem.measured_bits("oscar2", "oscar2", off) == 2.5
    assert kvmem.measured_bits("q8_0", "f16", "no oscar line") == (8.5 + 16) / 2


# ----------------------------------------------------------------------------- against llama-perplexity

def chunk_logits(model, kv: str, tokens: list[int], ctx: int, chunk: int) -> np.ndarray:
    """Logits [ctx, V] of one llama-perplexity chunk, via the bindings (the first token becomes BOS
    when the vocabulary adds one, as llama-perplexity does; SmolLM2's does not)."""
    llm = oscar.load(model, kv=kv, n_ctx=ctx, logits_all=True, n_batch=ctx, n_threads=2)
    lc = oscar.core.llama.bindings()
    toks = list(tokens[chunk * ctx:(chunk + 1) * ctx])
    if lc.llama_vocab_get_add_bos(lc.llama_model_get_vocab(llm.model)):
        toks[0] = llm.token_bos()
    llm.reset()
    llm.eval(toks)
    return np.array(llm.scores[:ctx], dtype=np.float64), toks


def test_eval_numbers_equal_numpy_on_bindings_logits(smollm2, wiki_slice, tmp_path):
    """oscar-eval (llama-perplexity) and metrics.quality over logits from the bindings agree on
    the same chunks: same scored positions (second half of each chunk), same definitions."""
    ctx, chunks = 128, 2
    out = tmp_path / "r.json"
    rc = evaluate.main([str(smollm2), "--text", str(wiki_slice), "--kv", "q4_0", "--ctx", str(ctx),
                        "--chunks", str(chunks), "-t", "2", "--json", str(out), "-q"])
    assert rc == 0
    rows = {r["kv"]: r for r in json.loads(out.read_text())["rows"]}
    vocab = oscar.load(smollm2, kv="f16", n_ctx=ctx, vocab_only=True)
    tokens = vocab.tokenize(wiki_slice.read_bytes(), add_bos=True, special=False)
    base, test, targets = [], [], []
    first = ctx // 2
    for c in range(chunks):
        lb, toks = chunk_logits(smollm2, "f16", tokens, ctx, c)
        lt, _ = chunk_logits(smollm2, "q4_0", tokens, ctx, c)
        base.append(lb[first:ctx - 1])
        test.append(lt[first:ctx - 1])
        targets += toks[first + 1:ctx]
    base, test = np.concatenate(base), np.concatenate(test)
    ref_f16 = metrics.perplexity(metrics.token_nll(base, targets))
    assert rows["f16"]["ppl"] == pytest.approx(ref_f16[0], rel=2e-3)
    assert rows["f16"]["ppl_err"] == pytest.approx(ref_f16[1], rel=2e-2)
    q = metrics.quality(base, test, targets)
    r = rows["q4_0"]
    assert r["ppl"] == pytest.approx(q["ppl"], rel=2e-3)
    # llama-perplexity keeps the f16 log-probabilities as 16-bit codes: small absolute error
    assert r["kld"] == pytest.approx(q["kld"], rel=0.05, abs=5e-4)
    assert r["kld_err"] == pytest.approx(q["kld_err"], rel=0.1, abs=2e-4)
    assert abs(r["same_top"] - q["same_top"]) <= 100 / len(targets) + 1e-9   # at most one token differs
    assert r["bits"] == 4.5 and rows["f16"]["bits"] == 16.0
    assert q["kld"] > 1e-3   # q4_0 does change the logits: the comparison above is not 0 == 0


# ----------------------------------------------------------------------------- bad input

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oscar.eval.evaluate", *args], capture_output=True, text=True, timeout=300)


def assert_clean_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("oscar-eval: error:"), p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr


def test_missing_files(smollm2, wiki_slice, tmp_path):
    assert_clean_error(run_cli(str(tmp_path / "no.gguf"), "--text", str(wiki_slice)), "no.gguf", "does not exist")
    assert_clean_error(run_cli(str(smollm2), "--text", str(tmp_path / "no.txt")), "no.txt", "does not exist")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    assert_clean_error(run_cli(str(junk), "--text", str(wiki_slice)), "not a GGUF file")


def test_unknown_kv_type_lists_the_known_ones(smollm2, wiki_slice):
    p = run_cli(str(smollm2), "--text", str(wiki_slice), "--kv", "q4_0,q3_k/oscar2")
    assert_clean_error(p, "'q3_k'", "not known to this build")
    # the list is the build's own (llama-perplexity --help), oscar2 included
    known = p.stderr.split("known:")[1].split(",")
    assert {"f16", "q8_0", "q4_0", "oscar2"} <= {k.strip() for k in known}


def test_ctx_longer_than_the_model(smollm2, wiki_slice):
    assert_clean_error(run_cli(str(smollm2), "--text", str(wiki_slice), "--ctx", "16384"),
                       "--ctx 16384", "8192 tokens", "use --ctx 8192 or less")


def test_too_few_scored_tokens(smollm2, wiki_slice):
    # 2 chunks of 64 score 2 x 31 tokens: llama-perplexity prints no KL statistics under 100
    assert_clean_error(run_cli(str(smollm2), "--text", str(wiki_slice), "--ctx", "64", "--chunks", "2"),
                       "scores only 62 tokens", "use more --chunks")


def test_text_too_short_says_how_many_tokens(smollm2, bin_dir, tmp_path):
    short = tmp_path / "short.txt"
    short.write_bytes(paths.WIKITEXT2_TEST.read_bytes()[:6000])
    p = run_cli(str(smollm2), "--text", str(short), "--ctx", "1024", "--chunks", "3")
    assert_clean_error(p, "needs 3072")
    n_ours = int(re.search(r"has (\d+) tokens", p.stderr).group(1))
    # llama-perplexity's own count of the same file (it refuses texts under 2 chunks and says why)
    lp = subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(smollm2), "-f", str(short), "-c", "1024"],
                        capture_output=True, text=True, timeout=120)
    n_theirs = int(re.search(r"tokenizes to only (\d+) tokens", lp.stdout + lp.stderr).group(1))
    assert n_ours == n_theirs
    assert f"at most {n_ours // 2 // 2 * 2}" in p.stderr   # fewer than 2 chunks: a smaller --ctx is the fix


# ----------------------------------------------------------------------------- passkey

def words(text: str) -> int:
    """A stand-in tokenizer: one token per word plus BOS."""
    return len(text.split()) + 1


def test_passkey_prompt_layout():
    t = passkey.compose(48213, n_filler=7, n_before=2)
    assert t.startswith(passkey.INTRO) and t.endswith(passkey.QUESTION)
    assert t.count(passkey.FILLER) == 7 and t.count("48213") == 2
    assert t[:t.index(passkey.NEEDLE.format(key=48213))].count(passkey.FILLER) == 2
    with pytest.raises(ValueError):
        passkey.compose(1, n_filler=3, n_before=4)


@pytest.mark.parametrize("depth", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_passkey_prompt_is_the_longest_that_fits(depth):
    ctx, n_gen, key = 400, 8, 31337
    p = passkey.build(words, ctx, depth, key, n_gen)
    # hand count: fixed part, then one filler paragraph's words per repetition
    fixed = words(passkey.compose(key, 0, 0))
    unit = len(passkey.FILLER.split())
    assert p.n_filler == (ctx - n_gen - fixed) // unit
    assert p.n_tokens == fixed + unit * p.n_filler <= ctx - n_gen
    assert p.n_before == round(depth * p.n_filler)
    assert p.text == passkey.compose(key, p.n_filler, p.n_before)


def test_passkey_bad_settings():
    with pytest.raises(ValueError, match="between 0 and 1"):
        passkey.build(words, 400, 1.5, 1)
    with pytest.raises(ValueError, match="too short"):
        passkey.build(words, 40, 0.5, 1)


def test_passkey_scoring():
    assert passkey.score(" 48213. Remember", 48213)
    assert passkey.score("The secret number is 48213", 48213)
    assert not passkey.score(" 048213", 48213)
    assert not passkey.score(" 4821 3", 48213)
    assert not passkey.score(" 12345, not 48213", 48213)   # only the first number counts
    assert not passkey.score(" I do not know.", 48213)
    ks = passkey.keys(20, seed=3)
    assert ks == passkey.keys(20, seed=3) and all(10000 <= k < 100000 for k in ks) and len(set(ks)) > 15
    row = passkey.summarise("f16", 256, 0.5, [True, False, True, True], 240, ["a"] * 4)
    assert row["accuracy"] == 75.0 and row["correct"] == 3 and row["trials"] == 4
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(100 * x for x in metrics.wilson_interval(3, 4)))


def test_passkey_real_run_small_context(smollm2):
    """Greedy retrieval through the bindings at ctx 256: the prompt fits its context by the
    model's own tokenizer, and SmolLM2 with an f16 cache does retrieve the key there."""
    rows = passkey.run(str(smollm2), [pp.KVConfig.parse("f16")], [256], [0.5], trials=1, seed=1, threads=2,
                       progress=False)
    (r,) = rows
    assert r["trials"] == 1 and 200 < r["prompt_tokens"] <= 256 - 8
    assert r["correct"] == 1, r["answers"]
    assert str(passkey.keys(1, seed=1)[0]) in r["answers"][0]


def test_reference_logits_are_written_then_reused(smollm2, wiki_slice, tmp_path):
    """--reference FILE: the first run writes the f16 logits there; a second run skips the f16
    run, takes the f16 row from llama-perplexity's PPL(base) and gets the same numbers."""
    ref = tmp_path / "f16.logits"
    args = [str(smollm2), "--text", str(wiki_slice), "--kv", "q4_0", "--ctx", "128", "--chunks", "2", "-t", "2",
            "--reference", str(ref), "-q"]
    assert evaluate.main(args + ["--json", str(tmp_path / "a.json")]) == 0
    assert ref.is_file() and ref.stat().st_size > 0
    assert evaluate.main(args + ["--json", str(tmp_path / "b.json")]) == 0
    a, b = (json.loads((tmp_path / n).read_text())["rows"] for n in ("a.json", "b.json"))
    assert [r["kv"] for r in b] == ["f16", "q4_0"]
    assert b[0]["ppl"] == pytest.approx(a[0]["ppl"], rel=1e-5) and b[0]["ppl_err"] == pytest.approx(a[0]["ppl_err"], rel=1e-3)
    assert b[1]["kld"] == pytest.approx(a[1]["kld"], rel=1e-6) and b[1]["ppl"] == pytest.approx(a[1]["ppl"], rel=1e-6)
