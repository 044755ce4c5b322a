"""llama.cpp's side of the hardening: metadata it refuses at load with one message naming the key,
the value and a fix that works, and the oscar3 cache's start-up line and describe().

SmolLM2-135M (scripts/fetch-models.sh) with OSCAR tensors written by test_rotation_llama's
write_converted; each run evaluates one chunk of 128 tokens at most.
"""
from __future__ import annotations

import subprocess

import pytest

from test_rotation_llama import N_LAYER, VERBOSE, write_converted


def _perplexity(bin_dir, model, text, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(model), "-f", str(text), "-c", "128",
                           "--chunks", "1", *extra], capture_output=True, text=True)


@pytest.fixture(scope="module")
def rotated(smollm2, tmp_path_factory):
    return write_converted(smollm2, tmp_path_factory.mktemp("load") / "rot.gguf")


@pytest.mark.parametrize("version", [0, 2, 2**32 - 1])
def test_other_oscar_version_is_refused(version, smollm2, tmp_path, wiki_slice, bin_dir):
    """oscar.version other than 1 loaded silently (its layout read as version 1's); now refused,
    naming the version found and the one this build reads."""
    p = _perplexity(bin_dir, write_converted(smollm2, tmp_path / "v.gguf", version=version), wiki_slice,
                    "-fa", "on", "-ctk", "oscar2", "-ctv", "oscar2")
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-2000:]
    assert f"oscar: metadata 'oscar.version' is {version}, and this build reads OSCAR version 1 only" in out, out[-2000:]
    assert "convert the original model again" in out


def test_window_size_past_int32_is_named_as_stored(smollm2, tmp_path, wiki_slice, bin_dir):
    """A sink of 2^32 - 1 was reported as -1; now as stored, with the allowed range and a fix."""
    p = _perplexity(bin_dir, write_converted(smollm2, tmp_path / "s.gguf", sink=2**32 - 1), wiki_slice,
                    "-fa", "on", "-ctk", "oscar2", "-ctv", "oscar2")
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert ("oscar.sink_tokens = 4294967295 is outside the allowed window sizes (0 <= n <= 2147483647 tokens)"
            in out), out[-2000:]
    assert "(-1)" not in out and "pass --kv-sink/--kv-recent with a size in that range" in out


def test_unknown_plan_type_names_a_fix_that_works(smollm2, tmp_path, wiki_slice, bin_dir):
    """A plan naming a type the plan cannot use suggested `--kv-plan off`, which the same error
    then refused (the plan is read with the model); now it names converting again. And indeed
    --kv-plan off does not get past it."""
    model = write_converted(smollm2, tmp_path / "p.gguf", plan=(["q5_0"] * N_LAYER, ["oscar2"] * N_LAYER))
    for extra in ([], ["--kv-plan", "off"]):
        p = _perplexity(bin_dir, model, wiki_slice, "-fa", "on", "-ctk", "oscar2", "-ctv", "oscar2", *extra)
        out = p.stdout + p.stderr
        assert p.returncode != 0
        assert "layer 0 names the cache type 'q5_0', which a plan cannot use" in out, out[-2000:]
        assert "run with --kv-plan off" not in out
        assert "convert the original model again with oscar-convert" in out


def test_oscar3_cache_has_its_start_up_line(rotated, wiki_slice, bin_dir):
    """-ctk oscar3 -ctv oscar3 printed no `oscar:` line: it now says what the cache stores, and
    the windows beside it, as for oscar2."""
    p = _perplexity(bin_dir, rotated, wiki_slice, "-fa", "on", "-ctk", "oscar3", "-ctv", "oscar3", *VERBOSE)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-2000:]
    line = next((l for l in out.splitlines() if "oscar: K and V in oscar3 (" in l), None)
    assert line is not None, out[-3000:]
    assert "16-bit windows for K and V: 64 sink + 256 recent tokens" in line, line


def test_oscar3_without_flash_attention_says_so(rotated, wiki_slice, bin_dir):
    """oscar3 is read by flash attention only: -fa off was "Failed to create llama_context"
    after a generic message; now it names the cache types and the fix, as for oscar2."""
    p = _perplexity(bin_dir, rotated, wiki_slice, "-fa", "off", "-ctk", "oscar3", "-ctv", "f16")
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "the OSCAR KV cache (K oscar3, V f16) needs flash attention: run with -fa on" in out, out[-2000:]


def test_describe_of_an_oscar3_cache(rotated):
    """oscar.describe() returned "" for an oscar3 cache; it returns the start-up line."""
    import oscar
    llm = oscar.load(rotated, kv="oscar3", n_ctx=256)
    try:
        d = oscar.describe(llm)
    finally:
        llm.close()
    assert d.startswith("oscar: K and V in oscar3 ("), d
