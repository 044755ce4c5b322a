"""The simulated 2-bit KV cache inside a transformers model: what calibration scores its
candidates with, and what the research simulator (:mod:`oscar.sim`) runs.

Torch twins of the cache's quantisers (``oscar2``, ``q8_0`` and the clip bit for bit with
:mod:`oscar.core.quant` and :mod:`oscar.calib.clip`, which tests/test_sim.py holds them to; the
other cache types through ``quant.fake_as`` itself; KIVI's per-channel and per-token groups), the methods
(:class:`Method`, :data:`PRESETS`), their per-layer tensors (:func:`make_plan`), the attention
function registered with transformers' ``AttentionInterface`` (``oscar_sim``), and the scoring
of methods against the unquantised model (:func:`score_runs`: perplexity, KL divergence,
top-1 agreement). Layouts, windows and plans as :mod:`oscar.sim.simulate` describes.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from ..core import kvmem
from ..core.quant import QK, fake_as
from ..core.rotation import hadamard
from . import capture
from .clip import clip_index

SIM_ATTN = "oscar_sim"
KIVI_GROUP = 32
KIVI_RESIDUAL = 128
SINK = 64
RECENT = 256


# ============================================================================ quantisers

def f16_round(x):
    """``x`` (float32 tensor, any shape) rounded to float16 and back."""
    return x.half().float()


def oscar2_quantize(x):
    """Quantise float32 ``x`` ``[..., D]`` (D a multiple of 64) to ``oscar2`` blocks along
    the last axis, exactly as :func:`oscar.core.quant.quantize` (and ggml) do.

    Returns ``(codes, d, m)``: codes uint8 ``[..., D]`` (0..3), d and m float16
    ``[..., D/64]`` (step and minimum of each block of 64)."""
    import torch
    x = x.float()
    if x.shape[-1] % QK:
        raise ValueError(f"oscar2 needs rows that are multiples of {QK}, got {x.shape[-1]}")
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // QK, QK).clamp(-65504.0, 65504.0)
    mn = xb.amin(dim=-1)
    mx = xb.amax(dim=-1)
    d16 = ((mx - mn) / torch.tensor(3.0, dtype=torch.float32)).half()
    m16 = mn.half()
    df, mf = d16.float(), m16.float()
    idv = torch.where(df > 0, 1.0 / torch.where(df > 0, df, torch.ones_like(df)), torch.zeros_like(df))
    v = ((xb - mf[..., None]) * idv[..., None]).clamp(0.0, 3.0)
    codes = torch.round(v).to(torch.uint8)  # round half to even, like ggml's nearest_int
    return codes.reshape(x.shape), d16, m16


def oscar2_dequantize(codes, d, m):
    """Inverse of :func:`oscar2_quantize`: float32 ``[..., D]`` = ``m + d*code`` per block."""
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // QK, QK).float()
    return (m.float()[..., None] + d.float()[..., None] * c).reshape(codes.shape)


def oscar2_fake(x):
    """``oscar2`` quantise-dequantise of float32 ``x`` ``[..., D]`` (blocks along the last axis)."""
    return oscar2_dequantize(*oscar2_quantize(x))


def q8_0_fake(x):
    """ggml ``q8_0`` quantise-dequantise of ``x`` ``[..., D]`` (blocks of 32 along the last
    axis: step ``amax/127`` stored as f16, codes ``round(x/step)`` half away from zero),
    what llama.cpp's CPU kernels do to a query before its dot products with 2-bit keys."""
    import torch
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    d = xb.abs().amax(dim=-1, keepdim=True) / 127.0
    idv = torch.where(d > 0, 1.0 / torch.where(d > 0, d, torch.ones_like(d)), torch.zeros_like(d))
    y = xb * idv
    c = torch.sign(y) * torch.floor(y.abs() + 0.5)
    return (f16_round(d) * c).reshape(x.shape)


def clip_rows(x, r: float):
    """Torch twin of :func:`oscar.calib.clip.clip_rows`: clamp each row of ``x`` ``[..., D]``
    to ``[-t, t]``, t the magnitude of rank ``clip_index(r, D)`` of the row's |x|."""
    import torch
    d = x.shape[-1]
    k = clip_index(r, d)
    if k == d - 1:
        return x
    t = torch.kthvalue(x.abs(), k + 1, dim=-1, keepdim=True).values
    return torch.minimum(torch.maximum(x, -t), t)


def asym_fake(x, bits: int = 2, f16_params: bool = True):
    """Asymmetric min/max quantise-dequantise of each row of ``x`` ``[..., G]`` (a group):
    step ``s = (max - min)/(2^bits - 1)``, code ``round((x - min)/s)`` clamped to
    ``[0, 2^bits - 1]`` (0 when s = 0), value ``min + code*s``; with ``f16_params`` the
    step and the minimum are stored (rounded) as float16, as in an f16 model."""
    import torch
    mn = x.amin(dim=-1, keepdim=True)
    mx = x.amax(dim=-1, keepdim=True)
    top = float(2 ** bits - 1)
    s = (mx - mn) / top
    if f16_params:
        s, mn = f16_round(s), f16_round(mn)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    c = torch.where(s > 0, torch.round((x - mn) / safe).clamp(0.0, top), torch.zeros_like(x))
    return mn + c * s


def kivi_keys(k, group: int = KIVI_GROUP, bits: int = 2):
    """KIVI key quantisation, per channel: ``k`` ``[H, T, D]``; tokens in consecutive
    groups of ``group`` (from position 0; the last group may be shorter), each channel of
    a group quantised with its own min and step. Returns ``[H, T, D]``."""
    import torch
    h, t, d = k.shape
    full = (t // group) * group
    parts = []
    if full:
        g = k[:, :full].reshape(h, full // group, group, d).transpose(-1, -2)  # [H, T/g, D, g]
        parts.append(asym_fake(g, bits).transpose(-1, -2).reshape(h, full, d))
    if full < t:
        parts.append(asym_fake(k[:, full:].transpose(-1, -2), bits).transpose(-1, -2))
    return torch.cat(parts, dim=1)


def kivi_values(v, group: int = KIVI_GROUP, bits: int = 2):
    """KIVI value quantisation, per token: ``v`` ``[H, T, D]``, groups of ``group`` along D."""
    h, t, d = v.shape
    if d % group:
        raise ValueError(f"KIVI value group {group} does not divide head_dim {d}")
    return asym_fake(v.reshape(h, t, d // group, group), bits).reshape(h, t, d)


# ============================================================================ methods

@dataclass(frozen=True)
class Method:
    """One KV cache treatment.

    rotation: ``none`` | ``hadamard`` | ``calibrated``; k_quant / v_quant: ``none`` (exact),
    ``f16``, ``oscar2``, ``kivi``; sink / recent: the 16-bit windows of an ``oscar2`` side
    (relative to each query); clip: apply the calibrated per-layer clip ratios;
    group / residual: KIVI's. ``bits`` is the storage cost of the 2-bit tier (per value).
    """
    name: str
    rotation: str = "none"
    k_quant: str = "none"
    v_quant: str = "none"
    sink: int = 0
    recent: int = 0
    clip: bool = False
    group: int = KIVI_GROUP
    residual: int = KIVI_RESIDUAL
    centre: int = 1
    plan: int = 1

    @property
    def bits(self) -> float:
        """Bits per value of the quantised tier (both K and V): f16 16, oscar2 2.5,
        KIVI 2 + 32/group (f16 step and minimum per group)."""
        q = self.k_quant
        return {"none": 32.0, "f16": 16.0, "oscar2": 2.5, "oscar2s": 2.25}.get(q, 2.0 + 32.0 / self.group)

    def describe(self) -> str:
        """One line for the report."""
        if self.k_quant in ("none", "f16"):
            return "unquantised (float32)" if self.k_quant == "none" else "K and V rounded to float16"
        if self.k_quant == "kivi":
            return (f"K per channel / V per token, group {self.group}, f16 min+step; residual {self.residual} "
                    "tokens in 16-bit (decode semantics)")
        rot = {"none": "no rotation", "hadamard": "Hadamard", "calibrated": "calibrated rotation"}[self.rotation]
        clip = " + calibrated clip" if self.clip else ""
        win = f"windows {self.sink}/{self.recent}" if self.sink or self.recent else "no windows"
        return f"{self.k_quant} codes, {rot}{clip}, {win}"


PRESETS: dict[str, Method] = {
    "none": Method("none"),
    "f16": Method("f16", k_quant="f16", v_quant="f16"),
    "int2": Method("int2", k_quant="oscar2", v_quant="oscar2"),
    "hadamard": Method("hadamard", rotation="hadamard", k_quant="oscar2", v_quant="oscar2"),
    "kivi": Method("kivi", k_quant="kivi", v_quant="kivi"),
    "oscar": Method("oscar", rotation="calibrated", k_quant="oscar2", v_quant="oscar2", sink=SINK, recent=RECENT,
                    clip=True),
    "oscar-hadamard": Method("oscar-hadamard", rotation="hadamard", k_quant="oscar2", v_quant="oscar2", sink=SINK,
                             recent=RECENT),
    "oscar2s": Method("oscar2s", rotation="calibrated", k_quant="oscar2s", v_quant="oscar2s", sink=SINK,
                      recent=RECENT, clip=True),
}


# ============================================================================ per-layer plan

@dataclass
class Calibration:
    """Rotations and clip ratios (llama.cpp layout, float32): rot_k/rot_v ``[L, D, D]`` or
    ``[L, Hkv, D, D]`` (rot_k the keys' matrix ``R_K``); clip_k/clip_v ``[L]``; source: where
    they came from; rot_q: the queries' matrix ``R_Q`` of a key weighting, rot_k's shape
    (None: queries use rot_k)."""
    rot_k: np.ndarray
    rot_v: np.ndarray
    clip_k: np.ndarray
    clip_v: np.ndarray
    source: str
    mean_k: np.ndarray | None = None  # [L, Hkv, D] rotated centring means
    mean_v: np.ndarray | None = None
    plan_k: list | None = None        # cache type per layer (precision plan)
    plan_v: list | None = None
    rot_q: np.ndarray | None = None   # [L, ...] R_Q of a key weighting (None: rot_k)


@dataclass
class Plan:
    """What the attention function needs for one method, per layer (torch float32):
    perm ``[D]`` (llama.cpp layout of Q/K, or None), rk/rv ``[L]`` of ``[D, D]`` or
    ``[Hkv, D, D]`` (None: no rotation), rq ``[L]`` the queries' matrices (the same as rk
    unless the calibration weights its keys; empty: rk), clip_k/clip_v ``[L]`` ratios (1: none);
    llama_query: round queries as llama.cpp's CPU flash attention does (q8_0 against
    ``oscar2`` keys, f16 against 16-bit keys) instead of keeping them exact."""
    method: Method
    perm: object = None
    rk: list = field(default_factory=list)
    rv: list = field(default_factory=list)
    rq: list = field(default_factory=list)
    clip_k: list = field(default_factory=list)
    clip_v: list = field(default_factory=list)
    block: int = 256
    llama_query: bool = False
    mk: list = field(default_factory=list)  # [L] of [Hkv, D] centring means (None: none)
    mv: list = field(default_factory=list)
    kq: list = field(default_factory=list)  # [L] storage type of K / V (the method's, or the plan's)
    vq: list = field(default_factory=list)


def hadamard_blocks(d: int, n: int):
    """Block-diagonal ``[d, d]`` float32 torch matrix of normalised Hadamard blocks of size n."""
    import torch
    h = torch.from_numpy(hadamard(n).astype(np.float32))
    return torch.block_diag(*([h] * (d // n)))


def llama_hadamard_sizes(d: int) -> tuple[int, int] | None:
    """Hadamard block sizes (K, V) llama.cpp uses for a quantised cache of head size d
    (K: the largest 64*2^n dividing d; V: 64), or None when d is not a multiple of 64."""
    if d % 64:
        return None
    nk = 64
    while d % (2 * nk) == 0:
        nk *= 2
    return nk, 64


def make_plan(method: Method, n_layer: int, head_dim: int, perm: np.ndarray | None,
              calib: Calibration | None, block: int = 256, llama_query: bool = False) -> Plan:
    """Per-layer tensors for ``method`` (raises when a calibrated method has no calibration)."""
    import torch
    plan = Plan(method, torch.from_numpy(np.asarray(perm)) if perm is not None else None, block=block,
                llama_query=llama_query)
    if method.rotation == "hadamard":
        sizes = llama_hadamard_sizes(head_dim)
        if sizes is None:
            raise ValueError(f"{method.name}: head_dim {head_dim} is not a multiple of 64 (no Hadamard)")
        hk, hv = hadamard_blocks(head_dim, sizes[0]), hadamard_blocks(head_dim, sizes[1])
        plan.rk, plan.rv = [hk] * n_layer, [hv] * n_layer
    elif method.rotation == "calibrated":
        if calib is None:
            raise ValueError(f"method {method.name} needs calibrated rotations: give --rotations (a zoo .npz or an "
                             "oscar-convert-ed GGUF), or use oscar-hadamard (data-free)")
        plan.rk = [torch.from_numpy(np.ascontiguousarray(r, dtype=np.float32)) for r in calib.rot_k]
        plan.rv = [torch.from_numpy(np.ascontiguousarray(r, dtype=np.float32)) for r in calib.rot_v]
        if calib.rot_q is not None:
            plan.rq = [torch.from_numpy(np.ascontiguousarray(r, dtype=np.float32)) for r in calib.rot_q]
    else:
        plan.rk = plan.rv = [None] * n_layer
    if not plan.rq:
        plan.rq = list(plan.rk)
    if method.clip:
        if calib is None:
            raise ValueError(f"method {method.name} clips with calibrated ratios: give --rotations")
        plan.clip_k = [float(x) for x in calib.clip_k]
        plan.clip_v = [float(x) for x in calib.clip_v]
    else:
        plan.clip_k = plan.clip_v = [1.0] * n_layer
    plan.mk = plan.mv = [None] * n_layer
    plan.kq, plan.vq = [method.k_quant] * n_layer, [method.v_quant] * n_layer
    if method.rotation == "calibrated" and calib is not None:
        if method.centre and calib.mean_k is not None:
            plan.mk = [torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32)) for m in calib.mean_k]
        if method.centre and calib.mean_v is not None:
            plan.mv = [torch.from_numpy(np.ascontiguousarray(m, dtype=np.float32)) for m in calib.mean_v]
        if method.plan and calib.plan_k is not None and method.k_quant == "oscar2":
            plan.kq, plan.vq = list(calib.plan_k), list(calib.plan_v)
    return plan


# ============================================================================ attention

def rotate(x, r, n_kv: int):
    """``x`` ``[H, T, D]`` times ``r`` (``[D, D]``, or ``[Hkv, D, D]``: head h uses
    ``r[h // (H / Hkv)]``). Returns ``[H, T, D]``."""
    if r is None:
        return x
    if r.ndim == 2:
        return x @ r
    h, t, d = x.shape
    return (x.reshape(n_kv, h // n_kv, t, d) @ r[:, None]).reshape(h, t, d)


def quantize_side(x, kind: str, clip: float, method: Method, keys: bool):
    """The stored (low-precision) version of every position of ``x`` ``[Hkv, T, D]``."""
    if kind == "oscar2":
        return oscar2_fake(clip_rows(x, clip) if clip < 1.0 else x)
    if kind == "oscar2s":  # clipped as oscar2, then the scale-only code of a centred cache
        import torch
        xc = clip_rows(x, clip) if clip < 1.0 else x
        return torch.from_numpy(fake_as(xc.detach().float().numpy(), "oscar2s"))
    if kind in ("q8_0", "q4_0", "oscar3"):  # unclipped, as llama.cpp stores them
        import torch
        return torch.from_numpy(fake_as(x.detach().numpy(), kind))
    if kind == "kivi":
        return kivi_keys(x, method.group) if keys else kivi_values(x, method.group)
    if kind == "f16":
        return f16_round(x)
    return x


def low_mask(method: Method, kind: str, i, j, keys: bool):
    """Bool ``[Nq, Tk]``: True where query position ``i`` (``[Nq, 1]``) reads key/value
    position ``j`` (``[1, Tk]``) from the quantised tier; None when it always does."""
    if kind == "kivi":
        r = method.residual
        return j < (i // r) * r if keys else (i - j) > r
    if kind in kvmem.WINDOWED and (method.sink or method.recent):
        return (j >= method.sink) & ((i - j) >= method.recent)
    return None


@dataclass
class Prepared:
    """One layer's tensors as the cache holds them (torch float32, after layout change and
    rotation): q ``[Hq, T, D]``; hi_k, hi_v ``[Hkv, T, D]`` the 16-bit tier (exact for
    ``none``); lo_k, lo_v the quantised tier of every position (None: that side has none)."""
    q: object
    hi_k: object
    hi_v: object
    lo_k: object
    lo_v: object
    k_kind: str = ""  # the storage types of this layer (the method's, or its plan's)
    v_kind: str = ""


def prepare(q, k, v, layer: int, plan: Plan) -> Prepared:
    """Layout change (llama.cpp's Q/K order), rotation, 16-bit rounding, clipping and
    quantisation of one layer: q ``[Hq, T, D]``, k, v ``[Hkv, T, D]`` (Hugging Face layout)."""
    m = plan.method
    hkv = k.shape[0]
    q, k, v = q.float(), k.float(), v.float()
    if plan.perm is not None:  # llama.cpp's head layout (q.k is unchanged)
        q, k = q[..., plan.perm], k[..., plan.perm]
    rk, rv = plan.rk[layer], plan.rv[layer]
    rq = plan.rq[layer] if plan.rq else rk
    q, k, v = rotate(q, rq, hkv), rotate(k, rk, hkv), rotate(v, rv, hkv)
    if plan.mk and plan.mk[layer] is not None:  # centring (exact for attention: both tiers)
        k = k - plan.mk[layer][:, None, :]
    if plan.mv and plan.mv[layer] is not None:
        v = v - plan.mv[layer][:, None, :]
    kq = plan.kq[layer] if plan.kq else m.k_quant
    vq = plan.vq[layer] if plan.vq else m.v_quant
    return Prepared(
        q,
        f16_round(k) if kq != "none" else k,
        f16_round(v) if vq != "none" else v,
        quantize_side(k, kq, plan.clip_k[layer], m, True) if kq not in ("none", "f16") else None,
        quantize_side(v, vq, plan.clip_v[layer], m, False) if vq not in ("none", "f16") else None,
        kq, vq)


def tiered_attention(p: Prepared, method: Method, scaling: float, sliding_window: int | None = None,
                     softcap: float | None = None, block: int = 256, llama_query: bool = False):
    """Causal attention where query i reads position j from the quantised tier where
    :func:`low_mask` says so, else from the 16-bit tier. Returns ``[Hq, T, D]`` float32
    (in the rotated V space). Queries in blocks of ``block`` positions; float32 scores.
    llama_query: queries rounded to f16 against 16-bit keys and to q8_0 against oscar2, oscar2s and oscar3 keys."""
    import torch
    m = method
    k_kind, v_kind = p.k_kind or m.k_quant, p.v_kind or m.v_quant
    hq, t, d = p.q.shape
    hkv = p.hi_k.shape[0]
    g = hq // hkv
    qg = p.q.reshape(hkv, g, t, d)
    out = torch.empty(hkv, g, t, d, dtype=torch.float32)
    pos = torch.arange(t)
    for a in range(0, t, block):
        b = min(t, a + block)
        lo = 0 if sliding_window is None else max(0, a - sliding_window + 1)
        i, j = pos[a:b, None], pos[None, lo:b]
        qb = qg[:, :, a:b].reshape(hkv, g * (b - a), d)
        q_hi = f16_round(qb) if llama_query and k_kind != "none" else qb
        q_lo = q8_0_fake(qb) if llama_query and k_kind in ("oscar2", "oscar2s", "oscar3", "q8_0", "q4_0") else qb
        mk = low_mask(m, k_kind, i, j, True) if p.lo_k is not None else None
        if p.lo_k is None or mk is not None:
            s = q_hi @ p.hi_k[:, lo:b].transpose(1, 2)
        if p.lo_k is not None:
            s_lo = q_lo @ p.lo_k[:, lo:b].transpose(1, 2)
            s = s_lo if mk is None else torch.where(mk.repeat(g, 1), s_lo, s)
        s = s * scaling
        if softcap is not None:
            s = torch.tanh(s / softcap) * softcap
        allowed = j <= i
        if sliding_window is not None:
            allowed = allowed & ((i - j) < sliding_window)
        s = s.masked_fill(~allowed.repeat(g, 1), float("-inf"))
        w = torch.softmax(s, dim=-1)
        mv = low_mask(m, v_kind, i, j, False) if p.lo_v is not None else None
        if p.lo_v is not None and mv is None:
            o = w @ p.lo_v[:, lo:b]
        else:
            o = w @ p.hi_v[:, lo:b]
            if p.lo_v is not None:
                o = o + (w * mv.repeat(g, 1)) @ (p.lo_v[:, lo:b] - p.hi_v[:, lo:b])
        out[:, :, a:b] = o.reshape(hkv, g, b - a, d)
    return out.reshape(hq, t, d)


def sim_attention(q, k, v, layer: int, plan: Plan, scaling: float, sliding_window: int | None = None,
                  softcap: float | None = None):
    """One layer's attention with the plan's KV treatment: q ``[Hq, T, D]``, k, v
    ``[Hkv, T, D]`` (Hugging Face layout, post-RoPE) -> ``[Hq, T, D]`` float32 in the
    original V space (the output rotated back with ``R_Vᵀ``)."""
    p = prepare(q, k, v, layer, plan)
    out = tiered_attention(p, plan.method, scaling, sliding_window, softcap, plan.block, plan.llama_query)
    if plan.mv and plan.mv[layer] is not None:  # V's mean back (the weights sum to 1)
        hkv = k.shape[0]
        out = (out.reshape(hkv, -1, *out.shape[1:]) + plan.mv[layer][:, None, None, :]).reshape(out.shape)
    rv = plan.rv[layer]
    return out if rv is None else rotate(out, rv.transpose(-1, -2), k.shape[0])


_plan: Plan | None = None


def _sim_attention(module, query, key, value, attention_mask_, dropout=0.0, scaling=None, sliding_window=None,
                   softcap=None, **kwargs):
    """The ``oscar_sim`` attention function (transformers' AttentionInterface signature):
    ``query`` ``[1, Hq, T, D]``, ``key``/``value`` ``[1, Hkv, T, D]`` -> ``([1, T, Hq, D], None)``."""
    if _plan is None:
        raise RuntimeError("oscar_sim attention called outside simulating(...)")
    if query.shape[0] != 1:
        raise ValueError("oscar_sim runs one unpadded sequence at a time")
    if scaling is None:
        scaling = module.head_dim ** -0.5
    o = sim_attention(query[0], key[0], value[0], int(module.layer_idx), _plan, float(scaling), sliding_window,
                      softcap)
    return o.to(query.dtype).transpose(0, 1)[None].contiguous(), None


def register_attention() -> None:
    """Register ``oscar_sim`` with transformers (idempotent)."""
    from transformers import AttentionInterface
    AttentionInterface.register(SIM_ATTN, _sim_attention)
    try:
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        AttentionMaskInterface.register(SIM_ATTN, sdpa_mask)
    except ImportError:  # pragma: no cover - older transformers
        pass


@contextlib.contextmanager
def simulating(model, plan: Plan) -> Iterator[None]:
    """Within the block, ``model``'s attention runs :func:`sim_attention` with ``plan``."""
    global _plan
    register_attention()
    prev_impl = model.config._attn_implementation
    prev, _plan = _plan, plan
    model.set_attn_implementation(SIM_ATTN)
    try:
        yield
    finally:
        _plan = prev
        model.set_attn_implementation(prev_impl)



# ============================================================================ model

@dataclass
class SimModel:
    """A loaded PyTorch model and what the simulation needs to know about it."""
    model: object
    info: capture.ModelInfo
    gguf: Path
    perm: np.ndarray | None
    source: str


def calibration_of(rot, source: str) -> Calibration:
    """What the simulation reads of a :class:`oscar.calib.rotfile.Rotations` (GGUF layout): the keys'
    and queries' matrices, clips, centring means and the plan's cache types."""
    pl = rot.meta.get("plan") or {}
    return Calibration(rot.key_matrix, rot.rot_v, rot.clip_k, rot.clip_v, source, rot.mean_k, rot.mean_v,
                       pl.get("type_k"), pl.get("type_v"),
                       rot.query_matrix if rot.weight_k is not None else None)


# ============================================================================ scoring

def chunk_logprobs(model, ids: np.ndarray, plan: Plan):
    """Log-probabilities (float32 ``[ctx/2 - 1, V]``) of the scored positions of one chunk
    (``ctx/2 .. ctx-2``, predicting tokens ``ctx/2+1 .. ctx-1``) with ``plan``."""
    import torch
    ctx = len(ids)
    first = ctx // 2
    with torch.inference_mode(), simulating(model, plan):
        logits = model(input_ids=torch.from_numpy(ids)[None], use_cache=False, logits_to_keep=ctx - first).logits
    return torch.log_softmax(logits[0, :-1].float(), dim=-1)


@dataclass
class Stats:
    """Per-token values of one method over all scored tokens."""
    nll: list = field(default_factory=list)
    kld: list = field(default_factory=list)
    same_top: list = field(default_factory=list)

    def add(self, logp, ref, targets) -> None:
        """logp, ref: ``[N, V]`` log-probabilities (method, reference); targets ``[N]``."""
        import torch
        self.nll.append((-logp.gather(1, targets[:, None])[:, 0]).double().numpy())
        self.kld.append((ref.exp() * (ref - logp)).sum(-1).double().clamp_min(0).numpy())
        self.same_top.append((logp.argmax(-1) == ref.argmax(-1)).numpy())

    def summary(self) -> dict:
        """PPL, KLD and top-1 agreement with llama-perplexity's uncertainty formulas."""
        nll, kld = np.concatenate(self.nll), np.concatenate(self.kld)
        top = np.concatenate(self.same_top).astype(np.float64)
        n = len(nll)

        def mean_err(x):
            m = float(x.mean())
            var = float((x * x).mean() - m * m)
            return m, (math.sqrt(var / (n - 1)) if var > 0 and n > 10 else 0.0)

        mn, en = mean_err(nll)
        mk, ek = mean_err(kld)
        pt = float(top.mean())
        return {"tokens": n, "ppl": math.exp(mn), "ppl_err": math.exp(mn) * en, "kld": mk, "kld_err": ek,
                "kld_p99": float(np.sort(kld)[min(n - 1, int(0.99 * n))]),
                "same_top": 100 * pt, "same_top_err": 100 * math.sqrt(pt * (1 - pt) / (n - 1))}



def score_runs(sm: SimModel, chunk_ids: list[np.ndarray], runs: dict[str, tuple[Method, Calibration | None]],
               block: int = 256, progress: bool = True, llama_query: bool = False,
               desc: str = "oscar-sim") -> dict[str, dict]:
    """Score each named ``(method, calibration)`` pair on every chunk against the unquantised
    model, one reference pass per chunk for all of them. Returns ``{name: summary}``."""
    import torch
    from ..core.progress import tqdm
    info = sm.info
    ref_plan = make_plan(PRESETS["none"], info.n_layer, info.head_dim, sm.perm, None, block)
    plans = {name: make_plan(m, info.n_layer, info.head_dim, sm.perm, calib, block, llama_query)
             for name, (m, calib) in runs.items()}
    stats = {name: Stats() for name in runs}
    bar = tqdm(total=len(chunk_ids) * (len(runs) + 1), desc=desc, unit="run", disable=not progress)
    for ids in chunk_ids:
        first = len(ids) // 2
        targets = torch.from_numpy(ids[first + 1:])
        bar.set_postfix_str("reference")
        ref = chunk_logprobs(sm.model, ids, ref_plan)
        bar.update()
        for name, plan in plans.items():
            bar.set_postfix_str(name)
            stats[name].add(chunk_logprobs(sm.model, ids, plan), ref, targets)
            bar.update()
        del ref
    bar.close()
    return {name: s.summary() for name, s in stats.items()}
