"""Metal kernels checked without a Mac (metal-emu/).

1. Syntax and types: ggml's flash-attention Metal sources (upstream's, and ours for oscar2)
   compile as C++ against metal-emu's MSL-subset header, every kernel instantiation included.
2. Execution: the emulator runs each threadgroup's threads as fibers with real barriers and
   simd-group exchange. It is validated on upstream's own flash-attention vec kernels (f16,
   q8_0, q4_1, q4_0 K/V; split over workgroups with upstream's reduce kernel), which are known
   to be right on Apple GPUs, against a float64 numpy reference of softmax(scale*QK^T + mask)V.
   Each case also runs under three schedules (forward, reverse, shuffled): a kernel free of
   races gives the same bytes under all of them.
3. OSCAR's oscar2 kernels (the fork's kernels/oscar2.h, fa_vec_oscar2.metal, oscar2.metal; or the
   folder OSCAR_METAL_SRC names): they type-check, their cache write gives the bytes of the numpy
   twin (py/oscar/core/quant.py, the clip of py/oscar/calib/clip.py), their flash attention over oscar2 K/V
   (beside oscar2, f16, q8_0 or q4_0 on the other side) and the 16-bit windows matches a float64
   two-tier reference on test-backend-ops' oscar2 cases, and a mutant of them (a flipped sign, an
   off-by-one clip rank) fails.
4. The oscar3 keys of a precision plan, in the same library: the cache write gives the bytes of
   an oscar3 numpy twin written here (itself checked against the CPU's quantize_row_oscar3_ref),
   and flash attention with K oscar3 beside V oscar2 or f16 matches the float64 reference on
   test-backend-ops' oscar3 cases; a mutant (a high bit dropped) fails.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EMU = ROOT / "metal-emu"
KERNELS = ROOT / "llama.cpp" / "ggml" / "src" / "ggml-metal" / "kernels"

UPSTREAM_FA_FILES = ["fa_vec_f16.metal", "fa_vec_q8_0.metal", "fa_vec_q4_1.metal", "fa_vec_q4_0.metal",
                     "fa_vec_f32.metal", "fa_aux.metal", "fa_f16.metal", "fa_q8_0.metal"]


def mslcc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EMU / "mslcc.py"), *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def have_clang() -> None:
    if not shutil.which("clang++"):
        pytest.fail("clang++ is missing: apt-get install clang (scripts/test-deps.sh installs it)")
    if not KERNELS.is_dir():
        pytest.fail(f"{KERNELS} is missing: run `make build` (scripts/fetch-llama.sh) first")


# ---------------------------------------------------------------------------------------------
# 1. syntax and type check


def test_upstream_fa_sources_type_check(have_clang) -> None:
    r = mslcc("check", str(KERNELS), *[str(KERNELS / f) for f in UPSTREAM_FA_FILES])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok ") == len(UPSTREAM_FA_FILES)


def test_type_check_catches_a_missing_conversion(have_clang, tmp_path: Path) -> None:
    """MSL refuses float4 -> half4 without a cast; so must the header (the check can fail)."""
    src = (KERNELS / "fa_vec_common.metal").read_text()
    bad = src.replace("sq4[qq*PK4 + i] = (q4_t) q4[i];", "sq4[qq*PK4 + i] = q4[i];")
    assert bad != src
    kern = tmp_path / "src" / "ggml-metal" / "kernels"
    shutil.copytree(KERNELS, kern)
    shutil.copy(KERNELS.parent / "ggml-metal-impl.h", kern.parent)
    shutil.copy(KERNELS.parent.parent / "ggml-common.h", kern.parent.parent)
    (kern / "fa_vec_common.metal").write_text(bad)
    r = mslcc("check", str(kern), str(kern / "fa_vec_f16.metal"))
    assert r.returncode == 1
    assert "fa_vec_common.metal" in r.stdout and "error" in r.stdout


# ---------------------------------------------------------------------------------------------
# 2. the emulator on upstream's flash-attention vec kernels


@pytest.fixture(scope="module")
def fa_vec_exe(have_clang, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("emu") / "fa_vec"
    r = mslcc("build", str(KERNELS), str(out), str(EMU / "launchers" / "fa_vec.cpp"), "-O1")
    assert r.returncode == 0, r.stderr
    return out


def f16_bytes(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).view(np.uint8).reshape(x.shape[:-1] + (-1,))


def quant_q8_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x: [..., D] f32 -> (block bytes [..., D/32*34], dequantised values [..., D])."""
    b = x.reshape(-1, 32).astype(np.float32)
    d = (np.abs(b).max(axis=1) / 127).astype(np.float16)
    df = d.astype(np.float32)
    q = np.rint(b / np.where(df > 0, df, 1)[:, None]).clip(-127, 127).astype(np.int8)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1)
    deq = q.astype(np.float32) * df[:, None]
    return raw.reshape(x.shape[:-1] + (-1,)), deq.reshape(x.shape)


def quant_q4_1(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = x.reshape(-1, 32).astype(np.float32)
    mn, mx = b.min(axis=1), b.max(axis=1)
    d = ((mx - mn) / 15).astype(np.float16)
    m = mn.astype(np.float16)
    df, mf = d.astype(np.float32), m.astype(np.float32)
    q = np.rint((b - mf[:, None]) / np.where(df > 0, df, 1)[:, None]).clip(0, 15).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << 4)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), m.view(np.uint8).reshape(-1, 2), qs], axis=1)
    deq = mf[:, None] + q.astype(np.float32) * df[:, None]
    return raw.reshape(x.shape[:-1] + (-1,)), deq.reshape(x.shape)


def quant_q4_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = x.reshape(-1, 32).astype(np.float32)
    amax_i = np.abs(b).argmax(axis=1)
    mxv = b[np.arange(b.shape[0]), amax_i]
    d = (mxv / -8).astype(np.float16)
    df = d.astype(np.float32)
    q = (np.rint(b / np.where(df != 0, df, 1)[:, None]) + 8).clip(0, 15).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << 4)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), qs], axis=1)
    deq = (q.astype(np.float32) - 8) * df[:, None]
    return raw.reshape(x.shape[:-1] + (-1,)), deq.reshape(x.shape)


def encode(kind: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes the kernel reads, values those bytes stand for) for x [..., D]."""
    if kind == "f16":
        return f16_bytes(x), x.astype(np.float16).astype(np.float32)
    return {"q8_0": quant_q8_0, "q4_1": quant_q4_1, "q4_0": quant_q4_0}[kind](x)


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float,
                  softcap: float = 0.0, sinks: np.ndarray | None = None) -> np.ndarray:
    """float64 reference. q [nq, nh, DK], k [nkvh, nkv, DK], v [nkvh, nkv, DV], mask [nq, nkv]
    -> out [nq, nh, DV] (ggml's dst layout)."""
    nq, nh, _ = q.shape
    nkvh = k.shape[0]
    out = np.zeros((nq, nh, v.shape[2]))
    for h in range(nh):
        g = h // (nh // nkvh)
        s = q[:, h, :].astype(np.float64) @ k[g].astype(np.float64).T * scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        if mask is not None:
            s = s + mask.astype(np.float64)
        mx = s.max(axis=1, keepdims=True)
        if sinks is not None:
            mx = np.maximum(mx, sinks[h])
        p = np.exp(s - mx)
        den = p.sum(axis=1, keepdims=True)
        if sinks is not None:
            den = den + np.exp(sinks[h] - mx)
        out[:, h, :] = (p @ v[g].astype(np.float64)) / den
    return out


def run_fa_vec(exe: Path, tmp: Path, kt: str, vt: str, dk: int, dv: int, ne: int, qpt: int, nq: int, nh: int,
               nkvh: int, nkv: int, nsg: int, nwg: int, seed: int, softcap: float = 0.0, sinks: bool = False,
               order: int = 0, data: dict | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Runs one case; returns (emulator output, float64 reference, the data used)."""
    if data is None:
        rng = np.random.default_rng(seed)
        q = rng.standard_normal((nq, nh, dk)).astype(np.float32)
        k = rng.standard_normal((nkvh, nkv, dk)).astype(np.float32)
        v = rng.standard_normal((nkvh, nkv, dv)).astype(np.float32)
        mask = np.zeros((nq, nkv), np.float32)
        mask[:, rng.random(nkv) < 0.2] = -np.inf       # some cells masked for every query
        mask[0, nkv // 2:] = -np.inf                     # a causal-like tail for query 0
        mask[:, :nkv // 4] += rng.standard_normal((nq, nkv // 4)).astype(np.float32)
        sk = rng.standard_normal(nh).astype(np.float32) if sinks else None
        kb, kval = encode(kt, k)
        vb, vval = encode(vt, v)
        data = dict(q=q, kb=kb, vb=vb, kval=kval, vval=vval, mask=mask, sinks=sk)
    d = data
    (tmp / "q.bin").write_bytes(np.ascontiguousarray(d["q"].transpose(1, 0, 2)).astype(np.float32).tobytes())
    (tmp / "k.bin").write_bytes(np.ascontiguousarray(d["kb"]).tobytes())
    (tmp / "v.bin").write_bytes(np.ascontiguousarray(d["vb"]).tobytes())
    (tmp / "mask.bin").write_bytes(d["mask"].astype(np.float16).tobytes())
    if d["sinks"] is not None:
        (tmp / "sinks.bin").write_bytes(d["sinks"].tobytes())
    scale = 1.0 / np.sqrt(dk)
    args = [str(exe), f"k={kt}", f"v={vt}", f"dk={dk}", f"dv={dv}", f"ne={ne}", f"q={qpt}", f"nq={nq}",
            f"nh={nh}", f"nkvh={nkvh}", f"nkv={nkv}", f"nsg={nsg}", f"nwg={nwg}", "mask=1",
            f"sinks={int(d['sinks'] is not None)}", f"scale={float(scale)!r}", f"softcap={float(softcap)!r}",
            f"order={order}", f"seed={seed}", f"dir={tmp}"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    out = np.fromfile(tmp / "out.bin", dtype=np.float32).reshape(nq, nh, dv)
    # the kernel holds Q in half (q4_t = half4): the reference takes the same Q
    qh = d["q"].astype(np.float16).astype(np.float32)
    ref = attention_ref(qh, d["kval"], d["vval"], d["mask"], scale, softcap, d["sinks"])
    return out, ref, d


UPSTREAM_CASES = [
    # kt, vt, dk, dv, ne, q, nq, nh, nkvh, nkv, nsg, nwg
    ("f16",  "f16",  128, 128, 1, 1, 1, 4, 2, 256, 2, 1),
    ("f16",  "f16",   64,  64, 2, 1, 2, 8, 1, 128, 1, 1),
    ("f16",  "f16",  256, 256, 1, 1, 1, 2, 2, 128, 4, 1),
    ("f16",  "f16",  128, 128, 4, 2, 3, 4, 4, 160, 1, 1),
    ("f16",  "f16",  128, 128, 2, 4, 5, 2, 1,  96, 2, 1),
    ("f16",  "f16",  128, 128, 1, 1, 1, 4, 1, 512, 1, 32),
    ("q8_0", "q8_0", 128, 128, 1, 1, 1, 8, 2, 256, 2, 1),
    ("q8_0", "q8_0",  64,  64, 2, 1, 2, 4, 4, 192, 1, 32),
    ("q8_0", "q8_0", 256, 256, 1, 1, 1, 2, 1,  64, 1, 1),
    ("q4_1", "q4_1", 128, 128, 1, 1, 1, 4, 2, 256, 2, 1),
    ("q4_1", "q4_1",  64,  64, 2, 1, 1, 4, 1, 128, 1, 32),
    ("q4_0", "q4_0", 128, 128, 1, 1, 2, 4, 2, 128, 1, 1),
]


@pytest.mark.parametrize("case", UPSTREAM_CASES, ids=lambda c: f"{c[0]}-d{c[2]}-ne{c[4]}-q{c[5]}-nq{c[6]}-gqa{c[7]//c[8]}-nsg{c[10]}-nwg{c[11]}")
def test_upstream_fa_vec_matches_reference(fa_vec_exe: Path, tmp_path: Path, case) -> None:
    kt, vt, dk, dv, ne, qpt, nq, nh, nkvh, nkv, nsg, nwg = case
    out, ref, _ = run_fa_vec(fa_vec_exe, tmp_path, kt, vt, dk, dv, ne, qpt, nq, nh, nkvh, nkv, nsg, nwg, seed=dk + nkv)
    err = np.abs(out - ref).max()
    nmse = ((out - ref) ** 2).sum() / (ref ** 2).sum()
    assert np.isfinite(out).all()
    assert err < 3e-3 and nmse < 1e-5, f"max |err| {err:.3g}, nmse {nmse:.3g}"


def test_upstream_fa_vec_softcap_and_sinks(fa_vec_exe: Path, tmp_path: Path) -> None:
    out, ref, _ = run_fa_vec(fa_vec_exe, tmp_path, "f16", "f16", 128, 128, 1, 1, 2, 4, 2, 128, 2, 1,
                             seed=7, softcap=5.0, sinks=True)
    assert np.abs(out - ref).max() < 3e-3


def test_reference_is_sensitive(fa_vec_exe: Path, tmp_path: Path) -> None:
    """The comparison can fail: the same output against a reference with one visible cell's K moved
    towards the query."""
    out, ref, d = run_fa_vec(fa_vec_exe, tmp_path, "f16", "f16", 128, 128, 1, 1, 1, 4, 2, 256, 2, 1, seed=3)
    qh = d["q"].astype(np.float16).astype(np.float32)
    kval = d["kval"].copy()
    j = int(np.flatnonzero(np.isfinite(d["mask"][0]))[0])
    kval[0, j] += 0.5 * qh[0, 0]
    ref2 = attention_ref(qh, kval, d["vval"], d["mask"], 1 / np.sqrt(128))
    assert np.abs(out - ref).max() < 3e-3
    assert np.abs(out - ref2).max() > 1e-2


@pytest.mark.parametrize("case", [UPSTREAM_CASES[0], UPSTREAM_CASES[3], UPSTREAM_CASES[5]], ids=["nsg2", "q2ne4", "nwg32"])
def test_upstream_fa_vec_same_bytes_under_every_schedule(fa_vec_exe: Path, tmp_path: Path, case) -> None:
    kt, vt, dk, dv, ne, qpt, nq, nh, nkvh, nkv, nsg, nwg = case
    outs = []
    data = None
    for order in (0, 1, 2):
        out, _, data = run_fa_vec(fa_vec_exe, tmp_path, kt, vt, dk, dv, ne, qpt, nq, nh, nkvh, nkv, nsg, nwg,
                                  seed=11, order=order, data=data)
        outs.append(out.tobytes())
    assert outs[0] == outs[1] == outs[2]


# ---------------------------------------------------------------------------------------------
# 3. OSCAR's oscar2 kernels (kernels/oscar2.h, fa_vec_oscar2.metal, oscar2.metal in the fork):
#    the 2-bit cache write with the calibrated clip and flash attention over oscar2 K/V (mixed
#    with f16, q8_0 and q4_0, the types of a precision plan) and the 16-bit windows, on the cases of test-backend-ops -p oscar2,
#    against an independent reference: the numpy twin of the format (py/oscar/core/quant.py), the clip
#    of py/oscar/calib/clip.py and a float64 attention over the dequantised cache and the windows.
#
#    The sources are read from the fork tree (llama.cpp/ggml/src/ggml-metal/kernels); OSCAR_METAL_SRC
#    names another kernels folder (a work tree of the patch before it is in the series).

import os  # noqa: E402

sys.path.insert(0, str(ROOT / "py"))
from oscar.calib import clip as oscar_clip  # noqa: E402
from oscar.core import quant as oscar_quant  # noqa: E402

OSCAR2_KERNELS = Path(os.environ.get("OSCAR_METAL_SRC", str(KERNELS)))
OSCAR2_FILES = ["fa_vec_oscar2.metal", "oscar2.metal"]
# the kernel variants the emulator's dispatch table holds (launchers/oscar2.cpp, OSCAR2_EMU_VARIANTS;
# without it, all 54): the ones the cases below run. The oscar3 keys: all 12 of fa_vec_oscar2.metal
OSCAR2_VARIANTS = [("oscar2", "oscar2", 64, 1), ("oscar2", "oscar2", 128, 1), ("oscar2", "oscar2", 256, 1),
                   ("oscar2", "oscar2", 128, 4), ("oscar2", "f16", 128, 1), ("f16", "oscar2", 64, 1),
                   ("oscar2", "q8_0", 256, 1), ("q8_0", "oscar2", 128, 1), ("oscar2", "q4_0", 64, 1),
                   ("q4_0", "oscar2", 128, 1), ("q4_0", "oscar2", 256, 4)] + \
                  [("oscar3", vt, d, q) for vt in ("oscar2", "f16") for d in (64, 128, 256) for q in (1, 4)]


@pytest.fixture(scope="module")
def have_oscar2_sources(have_clang) -> Path:
    missing = [f for f in OSCAR2_FILES + ["oscar2.h"] if not (OSCAR2_KERNELS / f).exists()]
    if missing:
        pytest.fail(f"{OSCAR2_KERNELS} lacks {', '.join(missing)}: the fork needs the ggml-metal oscar2 patch "
                    "(ggml-patches/, scripts/fetch-llama.sh), or OSCAR_METAL_SRC=<its kernels folder>")
    return OSCAR2_KERNELS


def oscar2_variant_flag(variants) -> str:
    return "-DOSCAR2_EMU_VARIANTS=" + ",".join(f"VAR({k},{v},{d},{2 if d == 64 else 1},{q})" for k, v, d, q in variants)


def build_oscar2_exe(kernels: Path, out: Path, variants=OSCAR2_VARIANTS) -> subprocess.CompletedProcess:
    return mslcc("build", str(kernels), str(out), str(EMU / "launchers" / "oscar2.cpp"), "-O0",
                 oscar2_variant_flag(variants))


# deliberate errors, each of which a test must catch: a sign flipped in the oscar2 dequantiser
# (flash attention) and the clip threshold's rank off by one (cache write); for oscar3 the high
# bit of the codes dropped, in the dequantiser and in the cache write's qh
MUTANTS = [("oscar2.h", "    reg = (type4) (m + d*float4(c));\n}\n\n// 4 values (il*4 .. il*4 + 3, il in 0..15) of an oscar3",
            "    reg = (type4) (m - d*float4(c));\n}\n\n// 4 values (il*4 .. il*4 + 3, il in 0..15) of an oscar3"),
           ("oscar2.h", "if (lt <= k && k < le) {", "if (lt <= k + 1 && k + 1 < le) {"),
           ("oscar2.h", "const uchar4 c = ((q >> sh) & 3) | (((uchar4(h) >> uchar4(0, 1, 2, 3)) & 1) << 2);",
            "const uchar4 c = ((q >> sh) & 3) | (((uchar4(h) >> uchar4(0, 1, 2, 3)) & 0) << 2);"),
           ("oscar2.h", "const uint h1 = simd_or((c1 >> 2) << tiisg);", "const uint h1 = simd_or((c1 >> 3) << tiisg);")]


@pytest.fixture(scope="module")
def oscar2_builds(have_oscar2_sources, tmp_path_factory) -> dict:
    """The emulator of the oscar2 kernels and, built beside it (two compilers at once), a mutant."""
    root = tmp_path_factory.mktemp("emu")
    mk = copy_kernels(have_oscar2_sources, root / "mutant-src")
    for f, a, b in MUTANTS:
        src = (mk / f).read_text()
        assert src.count(a) == 1, f"mutation site {a!r} not found in {f}"
        (mk / f).write_text(src.replace(a, b))
    pre = os.environ.get("OSCAR_METAL_EMU_EXE")  # a build kept from an earlier run (development)
    jobs = {}
    if not pre:
        jobs["exe"] = (have_oscar2_sources, OSCAR2_VARIANTS)
    jobs["mutant"] = (mk, [("oscar2", "oscar2", 64, 1), ("oscar3", "f16", 64, 1)])
    procs = {name: subprocess.Popen([sys.executable, str(EMU / "mslcc.py"), "build", str(k), str(root / name),
                                     str(EMU / "launchers" / "oscar2.cpp"), "-O0", oscar2_variant_flag(v)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, (k, v) in jobs.items()}
    out = {"exe": Path(pre)} if pre else {}
    for name, p in procs.items():
        _, err = p.communicate()
        assert p.returncode == 0, f"{name}: {err}"
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def oscar2_exe(oscar2_builds) -> Path:
    return oscar2_builds["exe"]


OSCAR3_BLOCK_BYTES = 28  # block_oscar3: d, m (f16), qs[16], qh[8]


def quant_oscar3(x: np.ndarray) -> np.ndarray:
    """oscar3 blocks ([x.size // 64, 28] uint8) of float32 values, in numpy, step for step as
    ggml's quantize_row_oscar3_ref: saturate to the f16 range, min and max with NaN skipped,
    d = (max - min)/7 and m = min stored as f16, codes rint((x - m)*(1/d)) clamped to 0..7 against
    the stored d and m (NaN codes 0). The low two bits of the code of element j + 16k in bits
    2k..2k+1 of qs[j], the high bit of element i in bit i of the little-endian word qh."""
    xb = np.clip(np.asarray(x, np.float32).reshape(-1, 64), -oscar_quant.F16_MAX, oscar_quant.F16_MAX)
    mn = np.where(np.isnan(xb), np.float32(np.inf), xb).min(axis=1)
    mx = np.where(np.isnan(xb), np.float32(-np.inf), xb).max(axis=1)
    all_nan = mn > mx
    mn[all_nan] = 0
    mx[all_nan] = 0
    d16 = ((mx - mn) / np.float32(7)).astype(np.float16)
    m16 = mn.astype(np.float16)
    df, mf = d16.astype(np.float32), m16.astype(np.float32)
    idv = (np.float32(1) / np.where(df > 0, df, np.float32(1))) * (df > 0)
    with np.errstate(invalid="ignore"):
        v = (xb - mf[:, None]) * idv[:, None].astype(np.float32)
    v = np.where(v > 0, v, np.float32(0))  # NaN -> 0
    v = np.where(v < 7, v, np.float32(7))
    c = np.rint(v).astype(np.uint8)        # half to even
    lo = c & 3
    out = np.empty((xb.shape[0], OSCAR3_BLOCK_BYTES), np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = m16.view(np.uint8).reshape(-1, 2)
    out[:, 4:20] = lo[:, 0:16] | (lo[:, 16:32] << 2) | (lo[:, 32:48] << 4) | (lo[:, 48:64] << 6)
    out[:, 20:28] = np.packbits(c >> 2, axis=1, bitorder="little")
    return out


def dequant_oscar3(blocks: np.ndarray) -> np.ndarray:
    """Values of oscar3 blocks ([n, 28] uint8) as a flat float32 array: m + d*c in float32."""
    b = np.ascontiguousarray(np.asarray(blocks, np.uint8).reshape(-1, OSCAR3_BLOCK_BYTES))
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = b[:, 2:4].copy().view(np.float16).astype(np.float32)
    lo = np.concatenate([(b[:, 4:20] >> (2 * k)) & 3 for k in range(4)], axis=1)
    hi = np.unpackbits(b[:, 20:28], axis=1, bitorder="little")
    return (m + d * (lo | (hi << 2)).astype(np.float32)).reshape(-1).astype(np.float32)


def encode_kv(kind: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes the kernel reads, values they stand for) for x [..., D], oscar2 through py/oscar/core/quant.py,
    oscar3 through quant_oscar3."""
    if kind == "oscar2":
        raw = oscar_quant.quantize(x).reshape(x.shape[:-1] + (-1,))
        return raw, oscar_quant.dequantize(raw).reshape(x.shape)
    if kind == "oscar3":
        raw = quant_oscar3(x).reshape(x.shape[:-1] + (-1,))
        return raw, dequant_oscar3(raw).reshape(x.shape)
    return encode(kind, x)


def windows_info(n_kv: int, n_info: int, cell, slot, pos) -> np.ndarray:
    """ggml_flash_attn_ext_windows_info in numpy: [4, n_info] int32."""
    info = np.zeros((4, n_info), np.int32)
    order = np.argsort(np.asarray(cell), kind="stable")
    cell, slot, pos = (np.asarray(a, np.int32)[order] for a in (cell, slot, pos))
    n_grp = (n_kv + 31) // 32
    counts = np.bincount(cell // 32, minlength=n_grp)[:n_grp]
    info[0, 1:n_grp + 1] = np.cumsum(counts)
    info[1, :len(cell)], info[2, :len(cell)], info[3, :len(cell)] = cell, slot, pos
    return info


def oscar2_fa_case(kt: str, vt: str, d: int, nq: int, nh: int, nkvh: int, nkv: int, ns: int = 1, seed: int = 0,
                   win: bool = False, khot: bool = True, vhot: bool = True, n_sink: int = 8, n_recent: int = 64,
                   shuffled: bool = True, sinks: bool = False) -> dict:
    """Data as test-backend-ops builds it (test_flash_attn_ext / test_flash_attn_ext_windows)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-2 if win else -1, 2 if win else 1, (ns, nh, nq, d)).astype(np.float32)
    k = rng.uniform(-1, 1, (ns, nkvh, nkv, d)).astype(np.float32)
    v = rng.uniform(-1, 1, (ns, nkvh, nkv, d)).astype(np.float32)
    kb, kval = encode_kv(kt, k)
    vb, vval = encode_kv(vt, v)
    mask = np.zeros((ns, nq, nkv), np.float32)
    data = dict(kt=kt, vt=vt, d=d, nq=nq, nh=nh, nkvh=nkvh, nkv=nkv, ns=ns, q=q, kb=kb, vb=vb, kval=kval, vval=vval,
                win=win, khot=win and khot, vhot=win and vhot, n_sink=n_sink, n_recent=n_recent,
                sinks=rng.standard_normal(nh).astype(np.float32) if sinks else None)
    if not win:
        mask[:] = rng.uniform(-1, 1, mask.shape)
        mask[:, :, rng.random(nkv) < 0.1] = -np.inf
        data["mask"] = mask
        return data
    n_slot = n_sink + n_recent + nq + 3
    n_info = max((nkv + 31) // 32 + 1, n_slot)
    infos, qpos, cell_slot, cell_pos = [], [], [], []
    for s in range(ns):
        pos = rng.permutation(nkv).astype(np.int32) if shuffled else np.arange(nkv, dtype=np.int32)
        slots = rng.permutation(n_slot)
        w0 = nkv - n_recent - nq
        e_cell, e_pos = [], []
        for c in range(nkv):
            stale = (rng.integers(16) == 0) if shuffled else pos[c] >= w0 - 3
            if (pos[c] < n_sink or pos[c] >= w0 or stale) and len(e_cell) < n_slot:
                e_cell.append(c)
                e_pos.append(pos[c])
        e_slot = slots[:len(e_cell)]
        infos.append(windows_info(nkv, n_info, e_cell, e_slot, e_pos))
        cs = np.full(nkv, -1)
        cs[e_cell] = e_slot
        cell_slot.append(cs)
        cell_pos.append(pos)
        t = nkv - nq + np.arange(nq)
        qpos.append(t.astype(np.int32))
        mask[s] = np.where(pos[None, :] <= t[:, None], 0.0, -np.inf)
    data.update(mask=mask, n_slot=n_slot, n_info=n_info, info=np.stack(infos), qpos=np.stack(qpos),
                cell_slot=np.stack(cell_slot), cell_pos=np.stack(cell_pos),
                khot_val=rng.uniform(-1, 1, (ns, nkvh, n_slot, d)).astype(np.float16),
                vhot_val=rng.uniform(-1, 1, (ns, nkvh, n_slot, d)).astype(np.float16))
    return data


def oscar2_fa_reference(d: dict) -> np.ndarray:
    """float64 attention with each (query, cell) read from its tier (ggml_fa_in_window) -> [ns, nq, nh, D]."""
    ns, nh, nq, D = d["q"].shape
    nkvh, nkv = d["nkvh"], d["nkv"]
    out = np.zeros((ns, nq, nh, D))
    qh = d["q"].astype(np.float16).astype(np.float64)  # the kernel holds Q in half
    for s in range(ns):
        for h in range(nh):
            g = h // (nh // nkvh)
            K = np.broadcast_to(d["kval"][s, g].astype(np.float64), (nq, nkv, D)).copy()
            V = np.broadcast_to(d["vval"][s, g].astype(np.float64), (nq, nkv, D)).copy()
            if d["win"]:
                slot, pos = d["cell_slot"][s], d["cell_pos"][s]
                hot = (slot[None, :] >= 0) & ((pos[None, :] < d["n_sink"]) |
                                              (pos[None, :] > d["qpos"][s][:, None] - d["n_recent"]))
                qi, ci = np.nonzero(hot)
                if d["khot"]:
                    K[qi, ci] = d["khot_val"][s, g, slot[ci]].astype(np.float64)
                if d["vhot"]:
                    V[qi, ci] = d["vhot_val"][s, g, slot[ci]].astype(np.float64)
            sc = np.einsum("qd,qcd->qc", qh[s, h], K) / np.sqrt(D) + d["mask"][s].astype(np.float16).astype(np.float64)
            mx = sc.max(axis=1, keepdims=True)
            if d["sinks"] is not None:
                mx = np.maximum(mx, d["sinks"][h])
            p = np.exp(sc - mx)
            den = p.sum(axis=1, keepdims=True)
            if d["sinks"] is not None:
                den = den + np.exp(d["sinks"][h] - mx)
            out[s, :, h] = np.einsum("qc,qcd->qd", p, V) / den
    return out


def run_oscar2_fa(exe: Path, tmp: Path, d: dict, q: int = 1, nsg: int = 1, nwg: int = 1, perm: bool = False,
                  order: int = 0) -> np.ndarray:
    ns, nkvh, nkv = d["ns"], d["nkvh"], d["nkv"]

    def rows(b: np.ndarray) -> bytes:  # [ns, nkvh, cells, bytes] -> the launcher's layout
        return np.ascontiguousarray(b.transpose(0, 2, 1, 3) if perm else b).tobytes()

    (tmp / "q.bin").write_bytes(d["q"].tobytes())
    (tmp / "k.bin").write_bytes(rows(d["kb"]))
    (tmp / "v.bin").write_bytes(rows(d["vb"]))
    (tmp / "mask.bin").write_bytes(d["mask"].astype(np.float16).tobytes())
    if d["sinks"] is not None:
        (tmp / "sinks.bin").write_bytes(d["sinks"].tobytes())
    args = [str(exe), "mode=fa", f"k={d['kt']}", f"v={d['vt']}", f"d={d['d']}", f"q={q}", f"nq={d['nq']}",
            f"nh={d['nh']}", f"nkvh={nkvh}", f"nkv={nkv}", f"ns={ns}", f"nsg={nsg}", f"nwg={nwg}", "mask=1",
            f"sinks={int(d['sinks'] is not None)}", f"perm={int(perm)}", f"order={order}", f"dir={tmp}",
            f"scale={float(1.0 / np.sqrt(d['d']))!r}", f"win={int(d['win'])}"]
    if d["win"]:
        (tmp / "kvinfo.bin").write_bytes(d["info"].tobytes())
        (tmp / "qpos.bin").write_bytes(d["qpos"].tobytes())
        hb = lambda x: rows(x.view(np.uint8).reshape(x.shape[:-1] + (-1,)))  # noqa: E731
        (tmp / "khot.bin").write_bytes(hb(d["khot_val"]))
        (tmp / "vhot.bin").write_bytes(hb(d["vhot_val"]))
        args += [f"khot={int(d['khot'])}", f"vhot={int(d['vhot'])}", f"nslot={d['n_slot']}",
                 f"ninfo={d['n_info']}", f"nsink={d['n_sink']}", f"nrecent={d['n_recent']}"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return np.fromfile(tmp / "out.bin", dtype=np.float32).reshape(ns, d["nq"], d["nh"], d["d"])


def nmse(out: np.ndarray, ref: np.ndarray) -> float:
    return float(((out - ref) ** 2).sum() / (ref ** 2).sum())


def test_oscar2_sources_type_check(have_oscar2_sources) -> None:
    k = have_oscar2_sources
    r = mslcc("check", str(k), *[str(k / f) for f in OSCAR2_FILES])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok   fa_vec_oscar2.metal: 54 kernel instantiations" in r.stdout
    assert "ok   oscar2.metal: 4 kernel instantiations" in r.stdout


def copy_kernels(src: Path, dst_root: Path) -> Path:
    """A copy of a kernels folder with ggml-metal-impl.h and ggml-common.h where mslcc finds them."""
    kern = dst_root / "src" / "ggml-metal" / "kernels"
    shutil.copytree(src, kern)
    shutil.copy(src.parent / "ggml-metal-impl.h", kern.parent)
    shutil.copy(src.parent.parent / "ggml-common.h", kern.parent.parent)
    return kern


def test_oscar2_type_check_catches_a_missing_conversion(have_oscar2_sources, tmp_path: Path) -> None:
    kern = copy_kernels(have_oscar2_sources, tmp_path)
    src = (kern / "fa_vec_oscar2.metal").read_text()
    bad = src.replace("mh = (k4_t) pkh[i];", "mh = pkh[i];")
    assert bad != src
    (kern / "fa_vec_oscar2.metal").write_text(bad)
    r = mslcc("check", str(kern), str(kern / "fa_vec_oscar2.metal"))
    assert r.returncode == 1 and "fa_vec_oscar2.metal" in r.stdout and "error" in r.stdout


# --- the cache write: bytes equal to the numpy twin's --------------------------------------------

def set_rows_reference(src: np.ndarray, idx: np.ndarray, dst: np.ndarray, n_seg: int, r: float,
                       kind: str = "oscar2") -> np.ndarray:
    """src [ne03, ne02, ne01, ne00] f32, idx [ne12, ne11, ne01], dst [ne03, ne02, ne1, ne00/64*20] bytes
    (oscar3: ne00/64*28, never clipped)."""
    quantize = quant_oscar3 if kind == "oscar3" else oscar_quant.quantize
    out = dst.copy()
    ne03, ne02, ne01, ne00 = src.shape
    for i3 in range(ne03):
        for i2 in range(ne02):
            for i1 in range(ne01):
                x = src[i3, i2, i1]
                if n_seg:
                    x = oscar_clip.clip_rows(x.reshape(-1, n_seg), r).reshape(-1)
                out[i3, i2, int(idx[i3 % idx.shape[0], i2 % idx.shape[1], i1])] = quantize(x).reshape(-1)
    return out


def run_set_rows(exe: Path, tmp: Path, src: np.ndarray, idx: np.ndarray, ne1: int, n_seg: int, r: float,
                 seed: int = 0, kind: str = "oscar2") -> tuple[np.ndarray, np.ndarray]:
    ne03, ne02, ne01, ne00 = src.shape
    rng = np.random.default_rng(seed)
    rb = ne00 // 64 * (OSCAR3_BLOCK_BYTES if kind == "oscar3" else oscar_quant.BLOCK_BYTES)
    dst = rng.integers(0, 256, (ne03, ne02, ne1, rb), dtype=np.uint8)  # rows not written keep these
    (tmp / "src.bin").write_bytes(src.astype(np.float32).tobytes())
    (tmp / "idx.bin").write_bytes(idx.tobytes())
    (tmp / "dst.bin").write_bytes(dst.tobytes())
    k = oscar_clip.clip_index(r, n_seg) if n_seg else 0
    args = [str(exe), "mode=set_rows", f"type={kind}", f"ne00={ne00}", f"ne01={ne01}", f"ne02={ne02}", f"ne03={ne03}", f"ne1={ne1}",
            f"ne11={idx.shape[1]}", f"ne12={idx.shape[0]}", f"idx={'i64' if idx.dtype == np.int64 else 'i32'}",
            f"nseg={n_seg}", f"clipk={k}", f"dir={tmp}"]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    out = np.fromfile(tmp / "out.bin", dtype=np.uint8).reshape(dst.shape)
    return out, set_rows_reference(src, idx, dst, n_seg, r, kind)


# (hs, row = hs*mult, source rows, ne02, ne03, destination rows, index type, clip ratio or None):
# test_set_rows, test_set_rows_clip and test_set_rows_oscar2_kv of test-backend-ops -p oscar2
SET_ROWS_CASES = [(hs, m, nr, ne2, ne3, ne1, it, ratio)
                  for hs in (64, 128, 256)
                  for (m, nr, ne2, ne3, ne1, it, ratio) in [(3, 5, 1, 2, 11, np.int64, None), (1, 3, 2, 1, 7, np.int32, None),
                                                            (4, 6, 1, 2, 9, np.int64, 0.5), (4, 6, 1, 2, 9, np.int64, 0.9),
                                                            (4, 6, 1, 2, 9, np.int64, 0.97), (4, 5, 1, 1, 19, np.int64, 0.75)]]


def set_rows_data(hs: int, m: int, nr: int, ne2: int, ne3: int, ne1: int, it, seed: int):
    rng = np.random.default_rng(seed)
    src = rng.uniform(-1, 1, (ne3, ne2, nr, hs * m)).astype(np.float32)
    src[0, 0, 0, :64] = np.round(src[0, 0, 0, :64] * 4) / 4            # ties in |x| and on the grid
    src[-1, -1, -1, 3] = np.nan                                        # NaN: skipped, coded 0
    src[-1, -1, -1, 70 % (hs * m)] = 1e6                               # saturated to the f16 range
    src[0, -1, nr // 2, :] = 0.25                                      # a constant block: d = 0
    idx = np.stack([np.stack([rng.permutation(ne1)[:nr] for _ in range(ne2)]) for _ in range(ne3)]).astype(it)
    return src, idx


@pytest.mark.parametrize("case", SET_ROWS_CASES, ids=lambda c: f"hs{c[0]}x{c[1]}-r{c[2]}-{np.dtype(c[6]).name}-clip{c[7]}")
def test_oscar2_set_rows_bytes_match_the_numpy_twin(oscar2_exe: Path, tmp_path: Path, case) -> None:
    hs, m, nr, ne2, ne3, ne1, it, ratio = case
    src, idx = set_rows_data(hs, m, nr, ne2, ne3, ne1, it, seed=hs * m + nr)
    out, ref = run_set_rows(oscar2_exe, tmp_path, src, idx, ne1, hs if ratio else 0, ratio or 1.0)
    bad = np.argwhere((out != ref).any(axis=-1))
    assert bad.size == 0, f"{len(bad)} rows differ, first {bad[:3].tolist()}"


# --- flash attention: test-backend-ops' oscar2 cases against the float64 two-tier reference -------

# (K, V, D, queries, q heads, KV heads, cells, streams, options); each case's kernel (K, V, D, Q)
# is one of OSCAR2_VARIANTS. Cells are fewer than test-backend-ops' 4k-64k (the emulator runs a
# thread at a time), never a multiple of 32 where the windows are on (the partial last chunk)
FA_CASES = [
    ("oscar2", "oscar2",  64, 1, 2, 2, 512, 1, {}),
    ("oscar2", "oscar2",  64, 5, 8, 1, 512, 1, {}),                        # GQA 8
    ("oscar2", "oscar2", 128, 1, 6, 2, 512, 1, {}),                        # GQA 3
    ("oscar2", "oscar2", 128, 33, 2, 1, 256, 1, {"q": 4}),                 # prompt batch, 4 queries a threadgroup
    ("oscar2", "oscar2", 256, 2, 4, 1, 512, 1, {"nsg": 2}),
    ("oscar2", "oscar2", 128, 1, 4, 2, 1024, 1, {"nwg": 32, "nsg": 2}),    # split over workgroups + reduce
    ("oscar2", "oscar2", 128, 1, 4, 2, 512, 2, {"sinks": True}),           # sinks, 2 streams
    ("oscar2", "f16",   128, 4, 8, 2, 256, 1, {}),
    ("f16",    "oscar2", 64, 4, 8, 2, 256, 1, {"perm": True}),
    ("oscar2", "q8_0",  256, 1, 8, 2, 256, 1, {}),
    ("q8_0",   "oscar2", 128, 4, 8, 2, 256, 1, {}),
    # q4_0 beside oscar2: the layers a precision plan stores in q4_0 on one side
    ("oscar2", "q4_0",   64, 4, 8, 2, 256, 1, {}),
    ("q4_0",   "oscar2", 128, 4, 8, 2, 256, 1, {}),
    ("q4_0",   "oscar2", 128, 1, 4, 2, 1024, 1, {"nwg": 32, "nsg": 2}),    # decode, split over workgroups
    ("q4_0",   "oscar2", 256, 9, 4, 1, 256, 1, {"q": 4, "perm": True}),     # prompt batch, permuted views
    # test_flash_attn_ext_windows: 8 sinks + 64 recent, pool values unrelated to K/V
    ("oscar2", "oscar2",  64, 1, 2, 2, 700, 1, {"win": True}),
    ("oscar2", "oscar2",  64, 8, 6, 2, 700, 1, {"win": True}),             # GQA 3
    ("oscar2", "oscar2", 128, 3, 8, 2, 700, 1, {"win": True, "perm": True}),
    ("oscar2", "oscar2", 128, 9, 4, 2, 700, 1, {"win": True, "q": 4}),     # queries of one threadgroup in different windows
    ("oscar2", "oscar2", 128, 2, 4, 2, 700, 2, {"win": True}),             # 2 streams
    ("oscar2", "oscar2", 128, 3, 4, 2, 700, 1, {"win": True, "shuffled": False}),  # cells in position order
    ("oscar2", "oscar2", 256, 3, 4, 2, 700, 1, {"win": True, "nsg": 2, "nwg": 32}),
    ("oscar2", "oscar2", 128, 3, 8, 2, 700, 1, {"win": True, "vhot": False, "n_sink": 0, "n_recent": 32}),  # K window only
    ("q8_0",   "oscar2", 128, 3, 8, 2, 700, 1, {"win": True, "khot": False, "n_sink": 4, "n_recent": 0}),  # V sinks only
    ("q4_0",   "oscar2", 128, 3, 8, 2, 700, 1, {"win": True, "khot": False}),  # a plan's q4_0 K layer: V windows only
    ("oscar2", "q4_0",    64, 3, 8, 2, 700, 1, {"win": True, "vhot": False}),  # and its mirror: K windows only
]

RUN_OPTS = ("q", "nsg", "nwg", "perm")


def fa_case_id(c) -> str:
    kt, vt, d, nq, nh, nkvh, nkv, ns, o = c
    return f"{kt}-{vt}-d{d}-nq{nq}-gqa{nh // nkvh}-kv{nkv}-ns{ns}" + "".join(f"-{k}{int(v)}" for k, v in o.items())


def check_fa_case(exe: Path, tmp_path: Path, case) -> None:
    kt, vt, d, nq, nh, nkvh, nkv, ns, o = case
    opts = {k: v for k, v in o.items() if k not in RUN_OPTS}
    data = oscar2_fa_case(kt, vt, d, nq, nh, nkvh, nkv, ns, seed=d + nq + nkv, **opts)
    out = run_oscar2_fa(exe, tmp_path, data, **{k: v for k, v in o.items() if k in RUN_OPTS})
    ref = oscar2_fa_reference(data)
    assert np.isfinite(out).all()
    # test-backend-ops allows NMSE 5e-5 for oscar2; the kernel uses the dequantised values in
    # float as the CPU does, so here only float32 sums and the half Q separate the two
    err, e = np.abs(out - ref).max(), nmse(out, ref)
    assert err < 1e-5 and e < 1e-10, f"max |err| {err:.3g}, nmse {e:.3g}"
    if data["win"]:  # the windows decide the result: the 2-bit tier alone is far off
        plain = dict(data, win=False, khot=False, vhot=False)
        assert nmse(out, oscar2_fa_reference(plain)) > 1e-3


@pytest.mark.parametrize("case", FA_CASES, ids=fa_case_id)
def test_oscar2_fa_matches_the_two_tier_reference(oscar2_exe: Path, tmp_path: Path, case) -> None:
    check_fa_case(oscar2_exe, tmp_path, case)


def test_oscar2_fa_same_bytes_under_every_schedule(oscar2_exe: Path, tmp_path: Path) -> None:
    data = oscar2_fa_case("oscar2", "oscar2", 64, 5, 2, 1, 700, 1, seed=5, win=True)
    outs = [run_oscar2_fa(oscar2_exe, tmp_path, data, q=1, nsg=2, order=order).tobytes() for order in (0, 1, 2)]
    assert outs[0] == outs[1] == outs[2]


def test_oscar2_emulator_catches_a_wrong_kernel(oscar2_builds, tmp_path: Path) -> None:
    """The mutant (a sign flipped in the dequantiser, the clip rank off by one) fails both checks."""
    exe, mut = oscar2_builds["exe"], oscar2_builds["mutant"]
    data = oscar2_fa_case("oscar2", "oscar2", 64, 1, 2, 2, 512, seed=3)
    ref = oscar2_fa_reference(data)
    assert nmse(run_oscar2_fa(exe, tmp_path, data), ref) < 1e-10
    assert nmse(run_oscar2_fa(mut, tmp_path, data), ref) > 1e-3
    src, idx = set_rows_data(128, 4, 6, 1, 2, 9, np.int64, seed=1)
    out, ref_b = run_set_rows(exe, tmp_path, src, idx, 9, 128, 0.9)
    assert (out == ref_b).all()
    out, ref_b = run_set_rows(mut, tmp_path, src, idx, 9, 128, 0.9)
    assert (out != ref_b).any(axis=-1).mean() > 0.5


# ---------------------------------------------------------------------------------------------
# 4. the oscar3 keys of a precision plan (kernels/oscar2.h: dequantize_oscar3_t4,
#    oscar3_quantize_block; oscar2.metal: kernel_set_rows_oscar3; the oscar3 instantiations of
#    fa_vec_oscar2.metal), on test-backend-ops' oscar3 cases

GGML_BASE = ROOT / "build" / "bin" / "libggml-base.so"


@pytest.fixture(scope="module")
def cpu_quantize_oscar3(tmp_path_factory):
    """The CPU's quantize_row_oscar3_ref from the build's libggml-base (a copy, so that a rebuild
    meanwhile does not touch it)."""
    import ctypes

    if not GGML_BASE.exists():
        pytest.fail(f"{GGML_BASE} is missing: run `make build` first")
    lib_path = tmp_path_factory.mktemp("ggml") / "libggml-base.so"
    shutil.copy(GGML_BASE.resolve(), lib_path)
    lib = ctypes.CDLL(str(lib_path))
    fn = lib.quantize_row_oscar3_ref
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None

    def quantize(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32).reshape(-1)
        out = np.zeros((x.size // 64, OSCAR3_BLOCK_BYTES), np.uint8)
        fn(x.ctypes.data, out.ctypes.data, x.size)
        return out

    return quantize


def oscar3_twin_data(seed: int) -> np.ndarray:
    """Blocks of 64 that reach every branch of the quantiser: scales from subnormal f16 steps to
    the f16 limit, values on the grid and half-way between (ties), NaN, infinities, constants."""
    rng = np.random.default_rng(seed)
    blocks = [rng.uniform(-1, 1, (64, 64)) * 10.0 ** rng.uniform(-7, 4.5, (64, 1)),
              rng.standard_normal((64, 64)),
              np.round(rng.uniform(-1, 1, (32, 64)) * 14) / 4,       # ties in (x - m)/d
              rng.integers(0, 8, (32, 64)) * 0.125 - 0.5,              # exactly on the grid
              np.full((4, 64), 0.25), np.zeros((2, 64))]
    x = np.concatenate(blocks).astype(np.float32)
    x[0, 5] = np.nan
    x[1, :] = np.nan
    x[2, 7], x[3, 9] = np.inf, -np.inf
    x[4, 11] = 1e6
    x[5, 0:32] = np.nan
    return x


def test_oscar3_twin_matches_the_cpu_reference(cpu_quantize_oscar3) -> None:
    """The numpy twin of this file gives the bytes of the CPU's quantize_row_oscar3_ref, and its
    dequantiser the CPU's values (so that the references below are the CPU's)."""
    x = oscar3_twin_data(seed=1)
    ours, cpu = quant_oscar3(x), cpu_quantize_oscar3(x)
    bad = np.flatnonzero((ours != cpu).any(axis=1))
    assert bad.size == 0, f"{bad.size} blocks differ, first {bad[:3].tolist()}"
    codes = (dequant_oscar3(cpu).reshape(-1, 64) - cpu[:, 2:4].copy().view(np.float16).astype(np.float32))
    assert len(np.unique(cpu[:, 20:28])) > 100  # the high bits are exercised
    assert np.isfinite(codes).all()


@pytest.mark.parametrize("case", [c for c in SET_ROWS_CASES if c[7] is None],
                         ids=lambda c: f"hs{c[0]}x{c[1]}-r{c[2]}-{np.dtype(c[6]).name}")
def test_oscar3_set_rows_bytes_match_the_twin_and_the_cpu(oscar2_exe: Path, tmp_path: Path, cpu_quantize_oscar3,
                                                          case) -> None:
    """test_set_rows f32 -> oscar3 of test-backend-ops (i64 and i32 indices, broadcast index rows)."""
    hs, m, nr, ne2, ne3, ne1, it, _ = case
    src, idx = set_rows_data(hs, m, nr, ne2, ne3, ne1, it, seed=hs * m + nr + 3)
    out, ref = run_set_rows(oscar2_exe, tmp_path, src, idx, ne1, 0, 1.0, kind="oscar3")
    bad = np.argwhere((out != ref).any(axis=-1))
    assert bad.size == 0, f"{len(bad)} rows differ, first {bad[:3].tolist()}"
    for i3 in range(ne3):  # the written rows, against the CPU directly
        for i2 in range(ne2):
            for i1 in range(nr):
                row = int(idx[i3 % idx.shape[0], i2 % idx.shape[1], i1])
                assert (out[i3, i2, row] == cpu_quantize_oscar3(src[i3, i2, i1]).reshape(-1)).all()


def test_oscar3_set_rows_covers_every_code(oscar2_exe: Path, tmp_path: Path, cpu_quantize_oscar3) -> None:
    """The twin's edge data (ties, NaN, infinities, tiny and huge scales) through the kernel."""
    x = oscar3_twin_data(seed=2)  # [n, 64]
    src = x.reshape(1, 1, -1, 128)
    idx = np.arange(src.shape[2], dtype=np.int64)[::-1].copy().reshape(1, 1, -1)
    out, ref = run_set_rows(oscar2_exe, tmp_path, src, idx, src.shape[2], 0, 1.0, kind="oscar3")
    assert (out == ref).all()
    assert (out[0, 0, ::-1].reshape(-1, OSCAR3_BLOCK_BYTES) == cpu_quantize_oscar3(x)).all()


def oscar3_fa_run_opts(nb: int, nkv: int) -> dict:
    """The dispatch of ggml_metal_op_flash_attn_ext_oscar2: 1 query a threadgroup for one query,
    else 4; 32 workgroups for up to 32 queries; simd-groups as the cells ask (C = 32 a chunk)."""
    nwg = 32 if nb <= 32 else 1
    nsg = 1
    while 2 * nwg * nsg * 32 < nkv and nsg < 4:
        nsg *= 2
    return {"q": 1 if nb == 1 else 4, "nwg": nwg, "nsg": nsg}


# test-backend-ops' oscar3 flash-attention cases, each as the host dispatches it, with fewer
# queries and cells where the emulator (a thread at a time) would take minutes:
# test_flash_attn_ext (2 KV heads, GQA 4, 256 cells; 1 and 4 queries, and 33 for the 64-query
# batch: more than 32, so one workgroup of 4 simd-groups as there) with V oscar2 and f16; the
# 16k-cell decode at 2k cells and 2 KV heads; test_flash_attn_ext_windows (700 cells, 8 sinks +
# 64 recent, windows on V only, permuted cache views; its 40 and 200 queries as 33)
OSCAR3_FA_CASES = [
    ("oscar3", vt, d, nb, 8, 2, 256, 1, oscar3_fa_run_opts(nb, 256))
    for vt in ("oscar2", "f16") for d in (64, 128, 256) for nb in (1, 4)
] + [
    ("oscar3", vt, d, 33, 8, 2, 256, 1, oscar3_fa_run_opts(33, 256)) for vt, d in (("oscar2", 64), ("f16", 128))
] + [
    ("oscar3", "oscar2", d, 1, 8, 2, 2048, 1, oscar3_fa_run_opts(1, 2048)) for d in (64, 256)
] + [
    ("oscar3", "oscar2", d, nb, 8, 2, 700, 1, {"win": True, "khot": False, "perm": True, **oscar3_fa_run_opts(nb, 700)})
    for d in (64, 128, 256) for nb in (1, 3, 8)
] + [
    ("oscar3", "oscar2", 64, 33, 8, 2, 700, 1, {"win": True, "khot": False, "perm": True, **oscar3_fa_run_opts(33, 700)}),
]


@pytest.mark.parametrize("case", OSCAR3_FA_CASES, ids=fa_case_id)
def test_oscar3_fa_matches_the_two_tier_reference(oscar2_exe: Path, tmp_path: Path, case) -> None:
    check_fa_case(oscar2_exe, tmp_path, case)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_oscar3_fa_jump(oscar2_exe: Path, tmp_path: Path, d: int) -> None:
    """test_flash_attn_ext_jump: Q all ones, each K row constant (an oscar3 block with d = 0) with a
    score of 0 or 7.5 by cell (c % 512 < 128), V uniform in [-50, 150], so the running maximum jumps
    within and between the chunks."""
    nkvh, gqa, nkv = 2, 4, 2048
    rng = np.random.default_rng(d)
    data = oscar2_fa_case("oscar3", "oscar2", d, 1, nkvh * gqa, nkvh, nkv, seed=d)
    score = np.where(np.arange(nkv) % 512 < 128, 0.0, 7.5).astype(np.float32)
    k = np.broadcast_to((score / np.sqrt(np.float32(d)))[None, None, :, None], (1, nkvh, nkv, d))
    v = rng.uniform(-50, 150, (1, nkvh, nkv, d)).astype(np.float32)
    kb, kval = encode_kv("oscar3", np.ascontiguousarray(k, np.float32))
    vb, vval = encode_kv("oscar2", v)
    data.update(q=np.ones_like(data["q"]), kb=kb, kval=kval, vb=vb, vval=vval, mask=np.zeros_like(data["mask"]))
    out = run_oscar2_fa(oscar2_exe, tmp_path, data, **oscar3_fa_run_opts(1, nkv))
    ref = oscar2_fa_reference(data)
    assert np.isfinite(out).all()
    assert nmse(out, ref) < 1e-10 and np.abs(out - ref).max() < 2e-3


def test_oscar3_emulator_catches_a_wrong_kernel(oscar2_builds, tmp_path: Path) -> None:
    """The mutant (the high bit of the codes dropped, in the dequantiser and in the cache write of
    elements 32..63) fails both checks."""
    exe, mut = oscar2_builds["exe"], oscar2_builds["mutant"]
    data = oscar2_fa_case("oscar3", "f16", 64, 1, 2, 2, 512, seed=3)
    ref = oscar2_fa_reference(data)
    assert nmse(run_oscar2_fa(exe, tmp_path, data), ref) < 1e-10
    assert nmse(run_oscar2_fa(mut, tmp_path, data), ref) > 1e-3
    src, idx = set_rows_data(128, 3, 5, 1, 2, 11, np.int64, seed=1)
    out, ref_b = run_set_rows(exe, tmp_path, src, idx, 11, 0, 1.0, kind="oscar3")
    assert (out == ref_b).all()
    out, ref_b = run_set_rows(mut, tmp_path, src, idx, 11, 0, 1.0, kind="oscar3")
    written = np.zeros(out.shape[:3], bool)
    for i3 in range(2):
        written[i3, 0, idx[i3, 0]] = True
    assert (out != ref_b).any(axis=-1)[written].mean() > 0.5
