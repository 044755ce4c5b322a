"""oscar-bench and oscar-synth: the KV memory model against llama.cpp's own accounting and by
hand, a tiny real sweep (table, JSON, PNG), a failing depth that becomes a row, the bare-machine
import path, and synthetic models with q4_0 weights."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oscar
from oscar.bench import bench, synthetic
from oscar.core import kvmem, paths
from oscar.eval.perplexity import KVConfig

SMOL = kvmem.KVGeometry(n_layer=30, n_head_kv=3, head_dim_k=64, head_dim_v=64)


# ----------------------------------------------------------------------------- memory model

@pytest.mark.parametrize("k,v,sink,recent", [("oscar2", "oscar2", 64, 256), ("q4_0", "oscar2", 0, 0),
                                             ("oscar2", "f16", 16, 32), ("q8_0", "oscar2", 64, 256)])
def test_kv_model_matches_llama_cpp(smollm2, k, v, sink, recent):
    """MiB of each tier as llama.cpp reports them at start (llama_oscar_kv_describe) equal the model."""
    ctx = 1024
    llm = oscar.load(smollm2, kv_k=k, kv_v=v, kv_sink=sink, kv_recent=recent, n_ctx=ctx)
    got = kvmem.parse_oscar_line(oscar.describe(llm))
    b = kvmem.kv_bytes(SMOL, ctx, k, v, sink, recent)
    o2 = sum(kvmem.kv_bytes(SMOL, ctx, t, t, 0, 0)["main"] / 2 for t in (k, v) if t == "oscar2")
    other = sum(kvmem.kv_bytes(SMOL, ctx, t, t, 0, 0)["main"] / 2 for t in (k, v) if t != "oscar2")
    assert got["oscar2"] == pytest.approx(o2 / 2**20, abs=0.006)
    assert got["pool"] == pytest.approx(b["pool"] / 2**20, abs=0.006)
    assert got["other"] == pytest.approx(other / 2**20, abs=0.006)
    assert b["total"] == pytest.approx(o2 + other + b["pool"])
    values = kvmem.cells(ctx) * SMOL.n_layer * SMOL.n_head_kv * (SMOL.head_dim_k + SMOL.head_dim_v)
    assert got["bits"] == pytest.approx(8 * b["total"] / values, abs=0.006)


def test_kv_model_by_hand():
    # SmolLM2 at 4096: f16 23040 bytes/token (30 layers x 3 heads x 128 values x 2 bytes), 90 MiB
    assert kvmem.kv_bytes(SMOL, 4096, "f16", "f16")["total"] == 23040 * 4096
    # oscar2: 2.5 bits -> 3600 bytes/token; pool 64+256+64+1 = 385 slots x 30 x 3 x 128 x 2 bytes
    b = kvmem.kv_bytes(SMOL, 4096, "oscar2", "oscar2", 64, 256)
    assert b["main"] == 3600 * 4096 and b["pool"] == 385 * 30 * 3 * 128 * 2
    assert kvmem.kv_bytes(SMOL, 100, "oscar2", "oscar2", 64, 256)["pool"] == 257 * 30 * 3 * 128 * 2  # capped at cells
    assert kvmem.cells(1) == 256 and kvmem.cells(4097) == 4352
    assert kvmem.bits_per_value(SMOL, 4096, "oscar2", "oscar2", 0, 0) == 2.5
    with pytest.raises(ValueError, match="known: f32"):
        kvmem.bits("q3_k")


def test_max_context_by_hand():
    g = kvmem.KVGeometry(n_layer=1, n_head_kv=1, head_dim_k=64, head_dim_v=64)
    budget = 256_000
    assert kvmem.max_context(g, budget, "f16", "f16") == 768            # 256 B/token -> 1000 -> 3 x 256
    assert kvmem.max_context(g, budget, "oscar2", "oscar2", 0, 0) == 6400   # 40 B/token -> 6400 = 25 x 256
    # windows 16/32: pool (48 + 64 + 1) x 128 x 2 B = 28928 B, leaves 227072 B -> 5676 -> 5632
    assert kvmem.max_context(g, budget, "oscar2", "oscar2", 16, 32) == 5632
    assert kvmem.max_context(g, 100, "f16", "f16") == 0


# GPU memory per cell on the H200, Qwen3-8B geometry, llama-bench filling 512 and 66048 cells
# (the difference of the two runs' peak MiB, over the 65536 cells between them)
H200_BYTES_PER_CELL = {"f16": 148480, "q8_0": 82624, "q4_0": 45760, "oscar2": 29184}


def test_prompt_scratch_against_the_h200():
    g = kvmem.KVGeometry(n_layer=36, n_head_kv=8, head_dim_k=128, head_dim_v=128)
    # by hand: the mask 512 x 2 B; F16 copies of one layer's K and V, 8 x 128 x 2 B each
    assert kvmem.prompt_scratch_per_cell(g, "f16", "f16") == 1024
    assert kvmem.prompt_scratch_per_cell(g, "q4_0", "q4_0") == 1024 + 4096
    assert kvmem.prompt_scratch_per_cell(g, "q8_0", "f16") == 1024 + 2048
    assert kvmem.prompt_scratch_per_cell(g, "oscar2", "oscar2") == 1024 + 4096 + 1024
    assert kvmem.prompt_scratch_per_cell(g, "f16", "oscar2") == 1024 + 4096 + 1024  # the expansion takes both sides
    for t, measured in H200_BYTES_PER_CELL.items():
        model = kvmem.kv_bytes(g, kvmem.CELL_PAD, t, t, 0, 0)["main"] / kvmem.CELL_PAD + kvmem.prompt_scratch_per_cell(g, t, t)
        if t in ("f16", "oscar2"):
            assert model == measured, t
        else:  # upstream's quantized types: the model counts 832 B more per cell than was measured
            assert measured <= model <= 1.02 * measured, t
    with pytest.raises(ValueError, match="unknown KV cache type"):
        kvmem.prompt_scratch_per_cell(g, "q3_k", "f16")


def test_max_context_with_scratch_by_hand():
    g = kvmem.KVGeometry(n_layer=1, n_head_kv=1, head_dim_k=64, head_dim_v=64)
    # f16: 256 B/token + 744 extra = 1000 B/token -> 256 tokens of 256_000 B (not 512: 512 000 B)
    assert kvmem.max_context(g, 256_000, "f16", "f16", extra_per_cell=744) == 256
    assert kvmem.max_context(g, 256_000, "f16", "f16", extra_per_cell=0) == 768
    # oscar2 without windows: 40 + 24 = 64 B/token -> 4000 -> 3840 (15 x 256)
    assert kvmem.max_context(g, 256_000, "oscar2", "oscar2", 0, 0, extra_per_cell=24) == 3840


def test_windows_in_force():
    facts = {"sink_tokens": 32, "recent_tokens": None}
    assert bench.windows(KVConfig.parse("oscar2"), facts) == (32, 256)
    assert bench.windows(KVConfig.parse("oscar2:sink=0,recent=8"), facts) == (0, 8)


def test_geometry_from_gguf(smollm2):
    g, facts = bench.read_geometry(smollm2)
    assert g == SMOL and facts["arch"] == "llama" and facts["context_length"] == 8192


# ----------------------------------------------------------------------------- real sweeps

def test_tiny_sweep_table_json_png(smollm2, bin_dir, tmp_path):
    out = tmp_path / "b"
    rc = bench.main([str(smollm2), "--kv", "f16,oscar2", "-d", "0,64", "-p", "16", "-n", "4", "-r", "1",
                     "-t", "2", "--out", str(out), "-q"])
    assert rc == 0
    data = json.loads((out / "bench.json").read_text())
    rows = data["rows"]
    assert [(r["kv"], r["depth"]) for r in rows] == [("f16", 0), ("f16", 64), ("oscar2", 0), ("oscar2", 64)]
    for r in rows:
        assert r["status"] == "ok" and r["pp_ts"] > 0 and r["tg_ts"] > 0
        b = kvmem.kv_bytes(SMOL, r["depth"] + 16 + 4, r["type_k"], r["type_v"], 64, 256)
        assert r["kv_mib"] == pytest.approx(b["total"] / 2**20)
    assert data["meta"]["llama_bench"]["build_commit"] and data["meta"]["machine"]["cores"] >= 1
    md = (out / "bench.md").read_text()
    assert "| oscar2 | 64 |" in md and "largest context in 24 GiB" in md
    png = (out / "bench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


BLOCKER = """
import sys
class _Bare:
    '''A GPU machine with numpy only: refuse the packages oscar-bench must not need.'''
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {'torch', 'transformers', 'llama_cpp', 'matplotlib', 'tqdm', 'scipy'}:
            raise ImportError('not on this machine: ' + name)
sys.meta_path.insert(0, _Bare())
"""


def test_bare_machine_run_with_a_failing_depth(smollm2, bin_dir, tmp_path):
    """`PYTHONPATH=py:llama.cpp/gguf-py python -m oscar.bench.bench` with torch, transformers, the
    bindings, tqdm and matplotlib unavailable, and --bin-dir given; a depth whose KV cache cannot
    be allocated (100M tokens, ~2 TiB in f16) is a failed row and the sweep continues."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(paths.ROOT / "py"),
                                                       str(paths.ROOT / "llama.cpp" / "gguf-py")]))
    out = tmp_path / "bare"
    p = subprocess.run([sys.executable, "-m", "oscar.bench.bench", str(smollm2), "--kv", "q4_0", "-d", "0,100000000,32",
                        "-p", "0", "-n", "4", "-r", "1", "-t", "2", "-ngl", "99", "--bin-dir", str(bin_dir),
                        "--out", str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "no PNG" in p.stderr
    rows = json.loads((out / "bench.json").read_text())["rows"]
    assert [r["depth"] for r in rows] == [0, 100000000, 32]
    assert rows[0]["status"] == "ok" and rows[2]["status"] == "ok" and rows[2]["tg_ts"] > 0
    assert rows[1]["status"].startswith("failed: llama-bench exit") and "context" in rows[1]["status"]
    md = (out / "bench.md").read_text()
    assert "failed: llama-bench exit" in md
    assert "tg4 tok/s" in md and "pp0" not in md  # -p 0: no prompt column
    assert not (out / "bench.png").exists()


def test_report_from_recorded_jsonl(smollm2, bin_dir, tmp_path):
    """--from-jsonl: llama-bench results made elsewhere (here: llama-bench run directly) give the
    same rows without running anything; KV types, depths, -p and -n come from the files."""
    rec = tmp_path / "rec.jsonl"
    for kv in ("q8_0", "oscar2"):
        p = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(smollm2), "-ctk", kv, "-ctv", kv, "-fa", "1",
                            "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-d", "0,32", "-o", "jsonl"],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        with open(rec, "a") as f:
            f.write(p.stdout)
    want = {(j["type_k"], j["n_depth"], "pp" if j["n_gen"] == 0 else "tg"): j["avg_ts"]
            for j in map(json.loads, rec.read_text().splitlines()) if j}
    out = tmp_path / "rep"
    rc = bench.main([str(smollm2), "--from-jsonl", str(rec), "--bin-dir", str(tmp_path / "nowhere"),
                     "--out", str(out), "-q"])
    assert rc == 0
    data = json.loads((out / "bench.json").read_text())
    rows = data["rows"]
    assert [(r["kv"], r["depth"]) for r in rows] == [("q8_0", 0), ("q8_0", 32), ("oscar2", 0), ("oscar2", 32)]
    for r in rows:
        assert r["status"] == "ok"
        assert r["pp_ts"] == want[(r["type_k"], r["depth"], "pp")] and r["tg_ts"] == want[(r["type_k"], r["depth"], "tg")]
        b = kvmem.kv_bytes(SMOL, r["depth"] + 16 + 4, r["type_k"], r["type_v"], 64, 256)
        assert r["kv_mib"] == pytest.approx(b["total"] / 2**20)
    assert data["meta"]["llama_bench"]["recorded"] == [str(rec)] and data["meta"]["llama_bench"]["binary"] is None
    for x in data["fits"]:  # the largest contexts, without and with CUDA's prompt-batch buffers
        t = x["kv"]
        budget = 24 * 2**30 - smollm2.stat().st_size
        assert x["max_context"] == kvmem.max_context(SMOL, budget, t, t, 64, 256)
        assert x["max_context_cuda"] == kvmem.max_context(SMOL, budget, t, t, 64, 256, kvmem.prompt_scratch_per_cell(SMOL, t, t))
        assert 0 < x["max_context_cuda"] < x["max_context"]
    assert "largest context with them" in (out / "bench.md").read_text()
    # a depth asked for but not recorded is a row that says so
    rc = bench.main([str(smollm2), "--from-jsonl", str(rec), "--kv", "oscar2", "-d", "0,64", "--out", str(out), "-q"])
    rows = json.loads((out / "bench.json").read_text())["rows"]
    assert rc == 0 and [r["status"] for r in rows] == ["ok", "not run"]


def test_from_jsonl_bad_input(smollm2, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("llama-bench printed nothing\n")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type_k": "f16", \n')
    other = tmp_path / "other.jsonl"
    other.write_text('{"model": "x"}\n')
    for f, needle in [(empty, "no llama-bench results"), (broken, "broken.jsonl:1: not a JSON line"),
                      (other, "other.jsonl:1: not a llama-bench result"), (tmp_path / "none.jsonl", "cannot read")]:
        p = subprocess.run([sys.executable, "-m", "oscar.bench.bench", str(smollm2), "--from-jsonl", str(f)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1 and "Traceback" not in p.stderr and needle in p.stderr, p.stderr


def test_bench_bad_input(smollm2, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "oscar.bench.bench", *args], capture_output=True, text=True,
                              timeout=120)
    for args, needle in [((str(tmp_path / "no.gguf"),), "does not exist"),
                         ((str(smollm2), "--bin-dir", str(tmp_path)), "point --bin-dir"),
                         ((str(smollm2), "--kv", "q3_k"), "unknown KV cache type 'q3_k'"),
                         ((str(smollm2), "-p", "0", "-n", "0"), "at least one of them")]:
        p = run(*args)
        assert p.returncode == 1 and "Traceback" not in p.stderr and needle in p.stderr, p.stderr
    p = run(str(smollm2), "-d", "0,-5")
    assert p.returncode == 2 and "depths of 0 or more" in p.stderr


# ----------------------------------------------------------------------------- oscar-synth

def test_synth_q4_0_weights_load_and_run(tmp_path):
    import gguf
    out = tmp_path / "tiny.gguf"
    assert synthetic.main(["tiny-hd64", "--weights", "q4_0", "--ctx", "1024", "-o", str(out)]) == 0
    r = gguf.GGUFReader(str(out))
    types = {t.name: t.tensor_type for t in r.tensors}
    assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.Q4_0
    assert types["blk.1.ffn_down.weight"] == gguf.GGMLQuantizationType.Q4_0
    assert int(r.fields["llama.context_length"].contents()) == 1024
    t = next(t for t in r.tensors if t.name == "blk.0.ffn_up.weight")
    w = gguf.quants.dequantize(t.data, t.tensor_type)
    assert w.shape == (256, 128) and abs(w.std() * np.sqrt(128) - 1) < 0.1   # N(0, 1/cols), 4-bit rounded
    llm = oscar.load(out, kv="oscar2", n_ctx=256, kv_sink=0, kv_recent=0)
    assert llm.create_completion("abc", max_tokens=2, temperature=0.0)["usage"]["completion_tokens"] >= 1
    assert synthetic.main(["tiny-hd64", "-o", str(out)]) == 1   # refuses to overwrite


def test_synth_oscar_rotations_and_clips(tmp_path):
    """--oscar embeds what a conversion embeds: an orthogonal R_K and R_V per layer, clip
    ratios and windows in the metadata; llama.cpp then takes the calibrated path with oscar2
    and leaves an f16 cache unrotated (the same logits as the model without them)."""
    import gguf
    from oscar.core import gguf_io
    plain, rot = tmp_path / "plain.gguf", tmp_path / "rot.gguf"
    assert synthetic.main(["tiny-hd64", "--weights", "f32", "--ctx", "512", "-o", str(plain)]) == 0
    assert synthetic.main(["tiny-hd64", "--weights", "f32", "--ctx", "512", "--oscar", "-o", str(rot)]) == 0
    r = gguf.GGUFReader(str(rot))
    tensors = {t.name: t for t in r.tensors}
    for il in range(2):
        for fmt in (gguf_io.ROT_K, gguf_io.ROT_V):
            m = np.asarray(tensors[fmt.format(il)].data, dtype=np.float64).reshape(64, 64)
            assert np.abs(m @ m.T - np.eye(64)).max() < 1e-5
    assert not np.allclose(tensors["blk.0.attn_k_oscar_rot"].data, tensors["blk.1.attn_k_oscar_rot"].data)
    assert list(r.fields["oscar.clip_k"].contents()) == pytest.approx([synthetic.SYNTH_CLIP] * 2)
    assert int(r.fields["oscar.recent_tokens"].contents()) == 256
    # same weights with and without: f16 caches give equal logits, oscar2 runs
    outs = {}
    for name, path in (("plain", plain), ("rot", rot)):
        llm = oscar.load(path, kv="f16", n_ctx=256, logits_all=True)
        llm.eval(llm.tokenize(b"the quick brown fox"))
        outs[name] = np.array(llm.scores[: llm.n_tokens])
    assert np.array_equal(outs["plain"], outs["rot"])
    llm = oscar.load(rot, kv="oscar2", n_ctx=256, kv_sink=0, kv_recent=0)
    assert llm.create_completion("abc", max_tokens=2, temperature=0.0)["usage"]["completion_tokens"] >= 1


def test_synth_fold_v(tmp_path, capsys):
    """--oscar --fold-v writes the model of oscar-convert --fold-v (no V rotations, the folded
    flag), which llama.cpp runs without a V rotation; --fold-v alone is refused."""
    import gguf
    from oscar.core import gguf_io
    out = tmp_path / "fold.gguf"
    assert synthetic.main(["tiny-hd64", "--weights", "f32", "--ctx", "512", "--oscar", "--fold-v", "-o", str(out)]) == 0
    r = gguf.GGUFReader(str(out))
    names = {t.name for t in r.tensors}
    assert gguf_io.ROT_K.format(0) in names and gguf_io.ROT_V.format(0) not in names
    assert bool(r.fields["oscar.v_rotation_folded"].contents()) is True
    llm = oscar.load(out, kv="oscar2", n_ctx=256, kv_sink=0, kv_recent=0)
    assert llm.create_completion("abc", max_tokens=2, temperature=0.0)["usage"]["completion_tokens"] >= 1
    assert synthetic.main(["tiny-hd64", "--fold-v", "-o", str(tmp_path / "x.gguf")]) == 1
    assert "--fold-v needs --oscar" in capsys.readouterr().err


def _decode_log(model, capfd) -> str:
    """Decode a sentence through the bindings on ``model`` under -ctk/-ctv oscar2 (small windows,
    so that the 2-bit tier is read); the logits must be finite. Returns llama.cpp's log."""
    capfd.readouterr()
    llm = oscar.load(model, kv="oscar2", n_ctx=256, kv_sink=4, kv_recent=8, logits_all=True, verbose=True)
    llm.eval(llm.tokenize(b"the quick brown fox jumps over the lazy dog"))
    assert np.isfinite(np.array(llm.scores[: llm.n_tokens])).all()
    del llm
    return capfd.readouterr().err


def test_synth_centre_and_plan(tmp_path, capfd):
    """--centre and --k-q4_0-layers write what a calibrated conversion with a plan carries: a
    finite (Hkv, D) mean per layer and side, which llama.cpp applies to an oscar2 cache only
    (f16 logits equal those of the same model without means, oscar2 logits do not), and
    per-layer cache types that it applies under -ctk oscar2 -ctv oscar2 (its start-up line
    counts the q4_0 K layer); a layer outside the model, or either option without --oscar,
    is refused and writes nothing."""
    import gguf
    from oscar.core import gguf_io
    base, centred, out = tmp_path / "base.gguf", tmp_path / "centred.gguf", tmp_path / "plan.gguf"
    common = ["tiny-hd64", "--weights", "f32", "--ctx", "512", "--oscar"]
    assert synthetic.main(common + ["-o", str(base)]) == 0
    assert synthetic.main(common + ["--centre", "-o", str(centred)]) == 0
    assert synthetic.main(common + ["--centre", "--k-q4_0-layers", "1", "-o", str(out)]) == 0
    r = gguf.GGUFReader(str(out))
    tensors = {t.name: t for t in r.tensors}
    for il in range(2):
        for fmt in (gguf_io.MEAN_K, gguf_io.MEAN_V):
            m = np.asarray(tensors[fmt.format(il)].data)
            assert m.size == 64 and np.isfinite(m).all() and np.abs(m).max() > 0
    field = r.fields["oscar.cache_type_k"]
    assert [str(bytes(field.parts[i]), "utf-8") for i in field.data] == ["oscar2", "q4_0"]
    logits = {}
    for name, path in (("base", base), ("centred", centred)):
        for kv in ("f16", "oscar2"):
            llm = oscar.load(path, kv=kv, n_ctx=256, kv_sink=0, kv_recent=0, logits_all=True)
            llm.eval(llm.tokenize(b"the quick brown fox jumps over the lazy dog"))
            logits[name, kv] = np.array(llm.scores[: llm.n_tokens])
            del llm
    capfd.readouterr()
    llm = oscar.load(out, kv="oscar2", n_ctx=256, kv_sink=0, kv_recent=0, verbose=True)
    err = capfd.readouterr().err
    assert "K q4_0 in 1 of 2 layers" in err, err[-2000:]
    del llm
    assert np.array_equal(logits["base", "f16"], logits["centred", "f16"])
    assert not np.allclose(logits["base", "oscar2"], logits["centred", "oscar2"])
    assert synthetic.main(["tiny-hd64", "--oscar", "--k-q4_0-layers", "2", "-o", str(tmp_path / "x.gguf")]) == 1
    assert synthetic.main(["tiny-hd64", "--centre", "-o", str(tmp_path / "y.gguf")]) == 1
    assert synthetic.main(["tiny-hd64", "--oscar", "--k-q4_0-layers", "1", "--k-q8_0-layers", "1",
                           "-o", str(tmp_path / "z.gguf")]) == 1
    assert not any((tmp_path / n).exists() for n in ("x.gguf", "y.gguf", "z.gguf"))
    # q8_0 keys beside q4_0 ones, as a plan that raises some keys two steps writes them
    q8 = tmp_path / "q8.gguf"
    assert synthetic.main(common + ["--k-q4_0-layers", "0", "--k-q8_0-layers", "1", "-o", str(q8)]) == 0
    field = gguf.GGUFReader(str(q8)).fields["oscar.cache_type_k"]
    assert [str(bytes(field.parts[i]), "utf-8") for i in field.data] == ["q4_0", "q8_0"]
    # 3-bit keys: llama.cpp stores them as its plan says and decodes through them
    k3 = tmp_path / "k3.gguf"
    assert synthetic.main(common + ["--k-oscar3-layers", "0", "-o", str(k3)]) == 0
    err = _decode_log(k3, capfd)
    assert "K oscar3 in 1 of 2 layers" in err, err[-2000:]
    assert synthetic.main(common + ["--k-oscar3-layers", "0", "--k-q8_0-layers", "0", "-o", str(tmp_path / "w.gguf")]) == 1
    assert not (tmp_path / "w.gguf").exists()
    # a plan under 2.7 bits: oscar2s sides, a raised key beside an oscar2s value
    low = tmp_path / "low.gguf"
    assert synthetic.main(common + ["--oscar2s-layers", "0,1", "--k-oscar3-layers", "1", "-o", str(low)]) == 0
    kinds = {k: gguf.GGUFReader(str(low)).fields[f"oscar.cache_type_{k}"] for k in "kv"}
    assert {k: [str(bytes(f.parts[i]), "utf-8") for i in f.data] for k, f in kinds.items()} == \
        {"k": ["oscar2s", "oscar3"], "v": ["oscar2s", "oscar2s"]}
    err = _decode_log(low, capfd)
    assert "precision plan: oscar2s for K in 1 and V in 2 of 2 layers, K oscar3 in 1 of 2 layers" in err, err[-2000:]
    assert synthetic.main(["tiny-hd64", "--oscar", "--oscar2s-layers", "2", "-o", str(tmp_path / "u.gguf")]) == 1
    assert not (tmp_path / "u.gguf").exists()


# ----------------------------------------------------------------------------- equal memory

from oscar.bench import equalmem  # noqa: E402


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 7, 24, 100, 127, 128, 129, 255, 256])
@pytest.mark.parametrize("guess", [1, 5, 24, 128, 256])
def test_largest_batch_against_brute_force(limit, guess):
    """The search finds what trying every batch finds, whatever the guess, and tries each batch once."""
    calls = []

    def fits(b):
        calls.append(b)
        return b <= limit

    brute = max([b for b in range(1, 257) if b <= limit], default=0)
    got, tried = equalmem.largest_batch(fits, guess)
    assert got == brute
    assert len(calls) == len(set(calls)) == len(tried)
    assert all(tried[b] == (b <= limit) for b in tried)
    if 1 <= limit < 256 and guess == limit:
        assert sorted(calls) == [limit, limit + 1]   # a right guess costs two tries
    assert len(calls) <= 18


def test_largest_batch_cap():
    got, tried = equalmem.largest_batch(lambda b: True, 3, max_seq=10)
    assert got == 10 and max(tried) == 10


def test_guess_and_step_bytes_by_hand():
    g = kvmem.KVGeometry(n_layer=36, n_head_kv=8, head_dim_k=128, head_dim_v=128)
    # f16: 36 x 8 x 256 x 2 B = 147456 B per token; 32768 + 32 tokens -> 33024 cells
    assert equalmem.seq_kv_bytes(g, 32800, "f16", "f16", 64, 256) == 147456 * 33024
    assert equalmem.guess_batch(147456 * 33024 * 24.5, 147456 * 33024) == 24
    assert equalmem.guess_batch(1e15, 1.0) == 256 and equalmem.guess_batch(-5, 1.0) == 1
    with pytest.raises(ValueError):
        equalmem.guess_batch(1.0, 0.0)
    # a step at depth 32768 + 16 (cells padded to 33024): oscar2 40 B per head and side,
    # plus the window rows (64 + 256 cells x 2 sides x 128 halves) per layer and head
    sb = equalmem.step_bytes(g, 4.5e9, 10, 32768, 32, "oscar2", "oscar2", 64, 256)
    per_seq = 33024 * 36 * 8 * 80 + 320 * 36 * 8 * 2 * 128 * 2
    assert sb["kv"] == 10 * per_seq and sb["total"] == 4.5e9 + 10 * per_seq
    assert equalmem.step_bytes(g, 0, 1, 100, 2, "oscar2", "oscar2", 0, 0)["kv"] == 256 * 36 * 8 * 80
    assert equalmem.step_bytes(g, 0, 2, 100, 2, "q8_0", "f16", 64, 256)["kv"] == 2 * 256 * 36 * 8 * (136 + 256)


def test_batched_jsonl_and_table():
    line = ('{"n_kv_max": 1056, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 1, "is_pp_shared": 1, "n_gpu_layers": 99, '
            '"n_threads": 2, "n_threads_batch": 2, "pp": 512, "tg": 16, "pl": 2, "n_kv": 1056, "t_pp": 0.5, '
            '"speed_pp": 1024.0, "t_tg": 0.8, "speed_tg": 40.0, "t": 1.3, "speed": 418.4}')
    res = equalmem.parse_batched_jsonl("llama_context: stuff\n" + line + "\n|  PP | table |\n")
    assert len(res) == 1 and res[0].pl == 2 and res[0].tg == 16 and res[0].speed_tg == 40.0
    rows = [{"kv": "f16", "batch": 2, "kv_gib": 1.0, "step_ms": 50.0, "tok_s": 40.0, "step_bytes": 1e11, "status": "ok"},
            {"kv": "oscar2", "batch": 8, "kv_gib": 1.0, "step_ms": 100.0, "tok_s": 80.0, "step_bytes": 2e11, "status": "ok"},
            {"kv": "q4_0", "batch": 0, "status": "not even one sequence of 9 tokens fits"}]
    t = equalmem.table_rows(rows)
    assert t[0][5] == "1.00" and t[0][7] == "2.00"          # 1e11 B in 50 ms = 2 TB/s
    assert t[1][5] == "2.00" and t[1][6] == "200.0" and t[1][7] == "2.00"
    assert t[2][-1].startswith("not even") and t[2][4] == "-"


def test_equal_memory_real_run(bin_dir, tmp_path):
    """A real --equal-memory run on the CPU (tiny synthetic model, batches capped at 3): every
    batch up to the cap fits, the largest is measured, the table and JSON agree with the run."""
    model = tmp_path / "tiny.gguf"
    assert synthetic.main(["tiny-hd64", "--weights", "q4_0", "--ctx", "1024", "-o", str(model)]) == 0
    out = tmp_path / "eq"
    rc = bench.main([str(model), "--equal-memory", "96", "-n", "4", "--kv", "f16,oscar2", "--max-batch", "3",
                     "--mem-gib", "0.001", "-t", "2", "--bin-dir", str(bin_dir), "--out", str(out), "-q"])
    assert rc == 0
    j = json.loads((out / "eqmem.json").read_text())
    assert [r["kv"] for r in j["rows"]] == ["f16", "oscar2"]
    for r in j["rows"]:
        assert r["status"] == "ok" and r["batch"] == 3 and r["guess"] == 1
        assert r["tried"] == {"1": True, "2": True, "3": True} and r["refused"] == {}
        assert r["tok_s"] > 0 and r["step_ms"] > 0
        g = kvmem.KVGeometry(2, 1, 64, 64)
        sb = equalmem.step_bytes(g, j["meta"]["weights_bytes"], 3, 96, 4, r["type_k"], r["type_v"], 64, 256)
        assert r["step_bytes"] == pytest.approx(sb["total"])
    assert "| oscar2 | 3 |" in (out / "eqmem.md").read_text()


def test_equal_memory_bad_input(smollm2, tmp_path, capsys):
    assert bench.main([str(smollm2), "--equal-memory", "0"]) == 1
    assert "give a context of 1 or more" in capsys.readouterr().err
    assert bench.main([str(smollm2), "--equal-memory", "64", "--from-jsonl", "x.jsonl"]) == 1
    assert "leave out --from-jsonl" in capsys.readouterr().err
    assert bench.main([str(smollm2), "--equal-memory", "64", "--max-batch", "300"]) == 1
    assert "--max-batch 300" in capsys.readouterr().err
    assert bench.main([str(smollm2), "--equal-memory", "64", "--bin-dir", str(tmp_path)]) == 1
    assert "llama-batched-bench does not exist" in capsys.readouterr().err


def test_synth_key_weighting(tmp_path, capfd):
    """--key-weighting writes a calibration's key weighting: R_K = W R (not orthogonal) and
    attn_q_oscar_rot = W^-1 R with R_Q R_K^T = I per layer; llama.cpp loads it ("keys
    weighted") and q.k is unchanged: an f16 cache rotated anyway (LLAMA_OSCAR_ROT_16BIT) gives
    the logits of the model without rotations up to float rounding; without --oscar it is refused."""
    import gguf
    from oscar.core import gguf_io
    plain, kw = tmp_path / "plain.gguf", tmp_path / "kw.gguf"
    assert synthetic.main(["tiny-hd64", "--weights", "f32", "--ctx", "512", "-o", str(plain)]) == 0
    assert synthetic.main(["tiny-hd64", "--weights", "f32", "--ctx", "512", "--oscar", "--key-weighting",
                           "-o", str(kw)]) == 0
    tensors = {t.name: t for t in gguf.GGUFReader(str(kw)).tensors}
    for il in range(2):
        rk = np.asarray(tensors[gguf_io.ROT_K.format(il)].data, dtype=np.float64).reshape(64, 64)
        rq = np.asarray(tensors[gguf_io.ROT_Q.format(il)].data, dtype=np.float64).reshape(64, 64)
        assert np.abs(rq @ rk.T - np.eye(64)).max() < 1e-4
        assert np.abs(rk @ rk.T - np.eye(64)).max() > 0.1  # the keys' matrix is not a rotation
    script = (
        "import sys, numpy as np, oscar\n"
        "llm = oscar.load(sys.argv[1], kv='f16', n_ctx=256, logits_all=True, verbose=True)\n"
        "llm.eval(llm.tokenize(b'the quick brown fox jumps over the lazy dog'))\n"
        "np.save(sys.argv[2], np.array(llm.scores[: llm.n_tokens]))\n")
    env = {**os.environ, "LLAMA_OSCAR_ROT_16BIT": "1"}
    outs = {}
    for name, path in (("plain", plain), ("kw", kw)):
        p = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / f"{name}.npy")],
                           capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        outs[name] = np.load(tmp_path / f"{name}.npy")
        if name == "kw":
            assert "keys weighted" in p.stderr, p.stderr[-2000:]
    assert np.abs(outs["kw"] - outs["plain"]).max() < 1e-3 * np.abs(outs["plain"]).max()
    assert synthetic.main(["tiny-hd64", "--key-weighting", "-o", str(tmp_path / "x.gguf")]) == 1
    assert not (tmp_path / "x.gguf").exists()
