"""oscar-convert (zoo path) end to end through llama.cpp: the converted SmolLM2 runs with an
oscar2 cache using its calibrated rotations and clip ratios, and with an f16 cache it gives
the original model's numbers exactly (the rotations apply to quantized cache sides only; with
them forced on, the Q4_1 weights' 8-bit activation quantisation leaves a small difference,
see tests/test_rotation_llama.py)."""
from __future__ import annotations

import math
import subprocess

from oscar.core import paths
from oscar.eval import perplexity as pp


def test_convert_zoo_then_perplexity(smollm2, wiki_slice, tmp_path):
    out = tmp_path / "smollm2-oscar.gguf"
    p = subprocess.run([str(paths.ROOT / ".venv" / "bin" / "oscar-convert"), "smollm2-135m", "--rotations", "zoo",
                        "-o", str(out), "-q"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    orig = pp.run(smollm2, wiki_slice, pp.KVConfig("f16", "f16"), ctx=512, chunks=2)
    conv = pp.run(out, wiki_slice, pp.KVConfig("f16", "f16"), ctx=512, chunks=2)
    # a 16-bit cache is not rotated (a rotation would change nothing there): the same numbers
    assert conv.ppl == orig.ppl, (orig.ppl, conv.ppl)
    o2 = pp.run(out, wiki_slice, pp.KVConfig.parse("oscar2:sink=0,recent=0"), ctx=512, chunks=2, extra=["-lv", "4"])
    assert math.isfinite(o2.ppl)
    assert "calibrated rotations" in o2.log
    # calibrated rotations + searched clipping beat llama.cpp's Hadamard on the same 2-bit cache
    had = pp.run(smollm2, wiki_slice, pp.KVConfig.parse("oscar2:sink=0,recent=0"), ctx=512, chunks=2)
    assert o2.ppl < had.ppl, (o2.ppl, had.ppl)
