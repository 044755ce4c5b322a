"""Metal kernels checked without a Mac (metal-emu/).

1. Syntax and types: ggml's flash-attention Metal sources (upstream's, and ours for oscar2)
   compile as C++ against metal-emu's MSL-subset header, every kernel instantiation included.
2. Execution: the emulator runs each threadgroup's threads as fibers with real barriers and
   simd-group exchange. It is validated on upstream's own flash-attention vec kernels (f16,
   q8_0, q4_1, q4_0 K/V; split over workgroups with upstream's reduce kernel), which are known
   to be right on Apple GPUs, against a float64 numpy reference of softmax(scale*QK^T + mask)V.
   Each case also runs under three schedules (forward, reverse, shuffled): a kernel free of
   races gives the same bytes under all of them.
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
