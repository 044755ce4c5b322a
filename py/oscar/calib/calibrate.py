"""Calibration pipeline: capture -> covariances -> rotations -> clip search -> :class:`Rotations`.

Capture and search run in Hugging Face's head layout; the rotations are then
re-expressed in llama.cpp's layout (:func:`oscar.calib.capture.qk_permutation`), which is
what the GGUF and rotation files store.

Key weighting (``finish(key_weighting=True)``, the default for calibrated K rotations):
keys use ``R_K = W R`` and queries ``R_Q = W⁻¹ R`` (:func:`oscar.core.rotation.key_weighting`,
W from Σ_K and the centred key covariance of the fit tokens), in the clip search, the
centring means, the window split and the plan alike; the rotation file keeps the
orthogonal R as ``rot_k`` and W as ``weight_k``. In the GGUF layout the key permutation
π (``k_g = k[π]``) acts on both sides of W: ``W_g = W[π][:, π]``, so that
``W_g R_g = (W R)[π]`` with ``R_g = R[π]``.
"""
from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from . import capture, clip
from ..core import gguf_io, plan, rotation
from ..core.rotation import hadamard, rotation_from_covariance, weighted_rotations
from ..core.rotfile import Rotations

OBJECTIVE = ("per-layer clip ratios for K and V minimising the squared attention-output error on held-out "
             "calibration tokens (oscar2 2-bit, 16-bit sinks/recent windows); rotations U*H*P from "
             "attention-aware covariances")
DEFAULT_TOKENS = 32768
DEFAULT_HELDOUT = 2048
DEFAULT_CTX = 2048
#: the key weighting exponents :func:`choose_key_weighting` tries (0: no weighting)
AUTO_EXPONENTS = (0.0, 0.125, 0.25)
#: tokens that score those candidates at the logits (after the fit and held-out tokens), in
#: chunks of SCORE_CTX whose second halves are scored as llama-perplexity scores them
SCORE_TOKENS = 4096
SCORE_CTX = 2048


@dataclass
class Report:
    """What a calibration did, for the summary line and the notes."""
    fit_tokens: int
    heldout_tokens: int
    capture_s: float
    search_s: float
    layers: list[clip.ClipResult] = field(default_factory=list)
    qk_permuted: bool = False
    plan: "plan.Plan | None" = None
    device: str = "cpu"
    weighting_scores: dict[float, float] | None = None  # {exponent: KLD} when the exponent was chosen

    @property
    def rel_error(self) -> float:
        return sum(r.error for r in self.layers) / max(1e-30, sum(r.energy for r in self.layers))

    @property
    def rel_error_fixed(self) -> float:
        return sum(r.error_fixed for r in self.layers) / max(1e-30, sum(r.energy for r in self.layers))


def rotations_from_capture(cap: capture.Capture, per_head: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(rot_k, rot_v)`` float64 ``[L, D, D]`` or ``[L, Hkv, D, D]`` (Hugging Face layout)."""
    rk = np.stack([rotation_from_covariance(m.sigma_k(per_head)) for m in cap.moments])
    rv = np.stack([rotation_from_covariance(m.sigma_v(per_head)) for m in cap.moments])
    return rk, rv


def key_weights_from_capture(cap: capture.Capture, per_head: bool,
                             exponent: float = rotation.KEY_WEIGHT_EXPONENT) -> np.ndarray:
    """The key weightings W (:func:`oscar.core.rotation.key_weighting` of each layer's Σ_K and
    centred key covariance, ``exponent`` as there), float64 ``[L, D, D]`` or ``[L, Hkv, D, D]``
    (Hugging Face layout)."""
    return np.stack([rotation.key_weighting(m.sigma_k(per_head), m.cov_k(per_head), exponent) for m in cap.moments])


def rotated_means(cap: capture.Capture, rot_k: np.ndarray, rot_v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean_k, mean_v)`` float64 ``[L, Hkv, D]``: each KV head's mean key and value over the
    calibration tokens, in rotated coordinates (``mean @ R``; the same in either head layout,
    since the GGUF layout permutes R's rows as it permutes the keys)."""
    def rot(m: np.ndarray, r: np.ndarray) -> np.ndarray:
        return np.einsum("hd,de->he", m, r) if r.ndim == 2 else np.einsum("hd,hde->he", m, r)
    mk = np.stack([rot(m.mean_k(), rot_k[i]) for i, m in enumerate(cap.moments)])
    mv = np.stack([rot(m.mean_v(), rot_v[i]) for i, m in enumerate(cap.moments)])
    return mk, mv


def layer_sims(cap: capture.Capture, layer: int, rot_k: np.ndarray, rot_v: np.ndarray,
               mean_k: np.ndarray | None = None, mean_v: np.ndarray | None = None,
               sink: int = clip.SINK_TOKENS, recent: int = clip.RECENT_TOKENS,
               rot_q: np.ndarray | None = None) -> list[clip.LayerSim]:
    """The clip-search simulations of one layer over all held-out chunks (keys and values
    centred by ``mean_k``/``mean_v``, ``[Hkv, D]`` rotated, where given; 16-bit windows of
    ``sink`` and ``recent`` tokens; queries rotated by ``rot_q``, None: by ``rot_k``)."""
    out = []
    for chunk in cap.heldout:
        h = chunk[layer]
        s = clip.layer_sim(h.q, h.k, h.v, rot_k, rot_v, h.scaling, h.sliding_window, sink=sink, recent=recent,
                           mean_k=mean_k, mean_v=mean_v, rot_q=rot_q)
        if s is not None:
            out.append(s)
    if not out:
        raise ValueError(f"held-out chunks are too short for the clip search (need > "
                         f"{sink + recent} tokens)")
    return out


def search_clips(cap: capture.Capture, rot_k: np.ndarray, rot_v: np.ndarray, progress: bool = True,
                 desc: str = "clip search", lo: float = clip.DEFAULT_CLIP_LO, mean_k: np.ndarray | None = None,
                 mean_v: np.ndarray | None = None,
                 plan_pairs: list[tuple[str, str]] | tuple = (),
                 rot_q: np.ndarray | None = None) -> tuple[list[clip.ClipResult], list[dict]]:
    """Per-layer clip search (:func:`oscar.calib.clip.search_layer`, grid of ratios >= ``lo``) with a
    progress bar. rot_k, rot_v: ``[L, D, D]`` or ``[L, Hkv, D, D]`` (Hugging Face layout; rot_k
    the keys' matrix, rot_q the queries', of its shape, None: rot_k); mean_k,
    mean_v: ``[L, Hkv, D]`` rotated centring means, or None. With ``plan_pairs`` ((K type, V type)
    pairs, :func:`oscar.core.plan.measured_pairs`), also each layer's relative attention-output error
    for each pair at the chosen clips (what :func:`oscar.core.plan.choose` needs); otherwise empty
    tables."""
    from ..core.progress import tqdm
    results, tables = [], []
    for i in tqdm(range(cap.info.n_layer), desc=desc, unit="layer", disable=not progress):
        sims = layer_sims(cap, i, rot_k[i], rot_v[i], None if mean_k is None else mean_k[i],
                          None if mean_v is None else mean_v[i], rot_q=None if rot_q is None else rot_q[i])
        r = clip.search_layer(sims, cap.info.head_dim, lo=lo)
        results.append(r)
        table = {}
        for tk, tv in plan_pairs:
            table[(tk, tv)] = clip.type_error(sims, tk, tv, r.clip_k, r.clip_v) / max(r.energy, 1e-30)
        tables.append(table)
    return results, tables


#: sink sizes weighed for the 16-bit windows, at the pool of the default windows (sink + recent
#: = 320 tokens, so the cache's size and the plan's budget do not move): the rest of the pool is
#: the recent window
WINDOW_SINKS = (4, 16, 64)


def searched_error(results: list[clip.ClipResult], tables: list[dict],
                   types: tuple[list[str], list[str]] | None = None) -> float:
    """The relative attention-output error of the default windows, summed over layers, as the
    clip search measured it: each layer's at its searched clips (``results``), in the plan's
    cache types ``types`` from the search's ``tables`` (None: every layer oscar2, the searched
    objective itself)."""
    err = energy = 0.0
    for i, r in enumerate(results):
        scale = max(r.energy, 1e-30)  # the tables hold type_error / scale
        err += r.error if types is None else tables[i][(types[0][i], types[1][i])] * scale
        energy += r.energy
    return err / max(energy, 1e-30)


def window_errors(cap: capture.Capture, rot_k: np.ndarray, rot_v: np.ndarray, results: list[clip.ClipResult],
                  mean_k: np.ndarray | None = None, mean_v: np.ndarray | None = None,
                  types: tuple[list[str], list[str]] | None = None, sinks: tuple[int, ...] = WINDOW_SINKS,
                  pool: int = clip.SINK_TOKENS + clip.RECENT_TOKENS,
                  known: dict[int, float] | None = None, rot_q: np.ndarray | None = None) -> dict[int, float]:
    """Relative attention-output error on the held-out chunks, summed over layers, for each sink
    size ``s`` in ``sinks`` with a recent window of ``pool - s`` (every split scores the same
    queries, those from position ``pool`` on), at the searched clips ``results`` and the plan's
    cache types ``types`` (K and V per layer; None: every layer oscar2). ``known``: splits
    already measured (the default one, :func:`searched_error`), taken as given. ``rot_q``: the
    queries' matrices (None: ``rot_k``)."""
    n_layer = cap.info.n_layer
    tk, tv = types if types is not None else (["oscar2"] * n_layer, ["oscar2"] * n_layer)
    out = {}
    for s in sinks:
        if known and s in known:
            out[s] = known[s]
            continue
        err = energy = 0.0
        for i in range(n_layer):
            sims = layer_sims(cap, i, rot_k[i], rot_v[i], None if mean_k is None else mean_k[i],
                              None if mean_v is None else mean_v[i], sink=s, recent=pool - s,
                              rot_q=None if rot_q is None else rot_q[i])
            err += clip.type_error(sims, tk[i], tv[i], results[i].clip_k, results[i].clip_v)
            energy += clip.reference_energy(sims)
        out[s] = err / max(energy, 1e-30)
    return out


def hadamard_rotations(info: capture.ModelInfo) -> np.ndarray:
    """``[L, D, D]`` copies of the data-free Hadamard (the baseline)."""
    return np.stack([hadamard(info.head_dim)] * info.n_layer)


def key_permutation(model, gguf_path: str | Path, info: capture.ModelInfo) -> np.ndarray | None:
    """``π`` ``[D]`` with ``k_gguf = k_hf[π]`` for every key (and query) head, or None when the
    GGUF keeps Hugging Face's layout (:func:`oscar.calib.capture.qk_permutation`)."""
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    w_hf = base.layers[0].self_attn.k_proj.weight.detach().float().cpu().numpy()
    w_gg = gguf_io.tensor_f32(gguf_path, "blk.0.attn_k.weight")
    return capture.qk_permutation(w_hf, w_gg, info.n_head_kv, info.head_dim)


def permute_rotation(r: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """A key (or query) matrix ``[..., D, D]`` re-expressed for keys permuted as ``k[perm]``:
    its rows (input dims) permuted, ``R[perm, :]``, so that ``k[perm] @ R_g = k @ R``."""
    return r[..., perm, :]


def permute_weighting(w: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """A key weighting ``[..., D, D]`` (acting on the key before the rotation) re-expressed for
    keys permuted as ``k[perm]``: rows and columns, ``W[perm][:, perm]``, so that
    ``permute_weighting(W) @ permute_rotation(R) = permute_rotation(W @ R)``."""
    return w[..., perm, :][..., :, perm]


@dataclass
class Captured:
    """A loaded model and its calibration capture (what :func:`finish` needs)."""
    model: object
    info: capture.ModelInfo
    cap: capture.Capture
    gguf_path: Path
    shape: gguf_io.ModelShape
    data: str
    capture_s: float
    device: str = "cpu"
    score_ids: list[np.ndarray] = field(default_factory=list)  # token chunks that score candidates


def run_capture(model_src: str | Path, gguf_path: str | Path, shape: gguf_io.ModelShape, data: str,
                n_tokens: int = DEFAULT_TOKENS, heldout_tokens: int = DEFAULT_HELDOUT, ctx: int = DEFAULT_CTX,
                progress: bool = True, threads: int | None = None, device: str | None = None,
                score_tokens: int = 0) -> Captured:
    """Load the model in PyTorch and capture the calibration statistics.

    model_src: what PyTorch loads (the GGUF, or a Hugging Face folder with the same weights);
    gguf_path: the GGUF the result is for (layout, fingerprint). ``n_tokens`` fit the
    covariances; the next ``heldout_tokens`` of the text score the clip search; the
    ``score_tokens`` after those (chunks of :data:`SCORE_CTX`) are kept for
    :func:`choose_key_weighting`. ``device``: where the model runs
    (:func:`oscar.calib.capture.check_device`; None: the best available).
    """
    import torch
    device = capture.check_device(device)  # first: a device PyTorch lacks fails before anything is loaded
    torch.set_num_threads(threads or max(1, os.cpu_count() or 1))
    t0 = time.time()
    text = capture.load_calibration_text(data)  # a bad --calib-data fails before the slow load
    model, tok, info = capture.load_model(model_src, device=device)
    for key, want in (("n_layer", shape.n_layer), ("n_head", shape.n_head), ("n_head_kv", shape.n_head_kv),
                      ("head_dim", shape.head_dim)):
        if getattr(info, key) != want:
            raise ValueError(f"PyTorch model and GGUF disagree on {key}: {getattr(info, key)} vs {want}")
    ctx = min(ctx, max(n_tokens, 64))
    fit = capture.tokenize_chunks(tok, text, n_tokens, ctx)
    held = capture.tokenize_chunks(tok, text, heldout_tokens, max(ctx, min(heldout_tokens, DEFAULT_CTX)),
                                   skip_tokens=n_tokens)
    score = (capture.tokenize_chunks(tok, text, score_tokens, SCORE_CTX, skip_tokens=n_tokens + heldout_tokens)
             if score_tokens else [])  # before the capture: a text too short fails before the slow part
    cap = capture.calibrate_statistics(model, info, fit, held, progress)
    return Captured(model, info, cap, Path(gguf_path), shape, str(data), time.time() - t0, device, score)


#: rotation kinds :func:`finish` builds: calibrated U·H·P, or the data-free Hadamard
ROTATION_KINDS = ("uhp", "hadamard")


def finish(c: Captured, per_head: bool = False, lo: float = clip.DEFAULT_CLIP_LO, kind_k: str = "uhp",
           kind_v: str = "uhp", progress: bool = True, centre: bool = True,
           budget: float | None = plan.DEFAULT_BUDGET, key_weighting: bool = True,
           weight_exponent: float = rotation.KEY_WEIGHT_EXPONENT) -> tuple[Rotations, Report]:
    """Rotations (``kind_k``/``kind_v`` in :data:`ROTATION_KINDS`; per layer or per KV head),
    the centring means (``centre``), the clip search (ratios >= ``lo``) and a precision plan
    within ``budget`` bits per value (:mod:`oscar.core.plan`; None: every layer oscar2, no plan)
    from a capture, as a :class:`Rotations` in the GGUF's head layout with its zoo metadata.
    ``key_weighting`` (calibrated K rotations only): keys use ``W R`` and queries ``W⁻¹ R``
    everywhere (see the module docstring), ``d = (λ/s)^weight_exponent``; the result's ``weight_k`` is W."""
    for kd in (kind_k, kind_v):
        if kd not in ROTATION_KINDS:
            raise ValueError(f"rotation kind '{kd}': use one of {', '.join(ROTATION_KINDS)}")
    t1 = time.time()
    rk, rv = rotations_from_capture(c.cap, per_head)
    had = hadamard_rotations(c.info)
    if per_head:
        had = np.repeat(had[:, None], c.info.n_head_kv, axis=1)
    rk = had if kind_k == "hadamard" else rk
    rv = had if kind_v == "hadamard" else rv
    weighted = key_weighting and kind_k == "uhp"
    wk = key_weights_from_capture(c.cap, per_head, weight_exponent) if weighted else None
    rkk, rq = weighted_rotations(wk, rk) if weighted else (rk, None)  # the keys' and queries' matrices
    mk, mv = rotated_means(c.cap, rkk, rv) if centre else (None, None)
    results, tables = search_clips(c.cap, rkk, rv, progress, lo=lo, mean_k=mk, mean_v=mv,
                                   plan_pairs=plan.measured_pairs() if budget is not None else (), rot_q=rq)
    chosen = None
    if budget is not None:
        lay = [plan.LayerShape(c.info.n_head_kv * c.info.head_dim, c.info.n_head_kv * c.info.head_dim,
                               c.cap.heldout[0][i].sliding_window) for i in range(c.info.n_layer)]
        chosen = plan.choose(lay, tables, budget, clip.SINK_TOKENS, clip.RECENT_TOKENS)
    # the windows: how the pool of the default windows is split between sinks and the recent window
    # (the clips and the plan were found at the default split; the pool, hence the plan's bits, is
    # the same for every split)
    types = (chosen.type_k, chosen.type_v) if chosen is not None else None
    win_err = window_errors(c.cap, rkk, rv, results, mk, mv, types,
                            known={clip.SINK_TOKENS: searched_error(results, tables, types)}, rot_q=rq)
    sink = min(win_err, key=lambda s: (win_err[s], -s))
    recent = clip.SINK_TOKENS + clip.RECENT_TOKENS - sink
    t2 = time.time()
    perm = key_permutation(c.model, c.gguf_path, c.info)
    permuted = perm is not None
    rk_gguf = permute_rotation(rk, perm) if permuted else rk
    wk_gguf = None if wk is None else (permute_weighting(wk, perm) if permuted else wk)
    shape = c.shape
    how = {"uhp": "U*H*P from attention-aware covariances", "hadamard": "the data-free Hadamard"}
    rot_desc = (f"rotations {how[kind_k]}" if kind_k == kind_v
                else f"K rotations {how[kind_k]}, V rotations {how[kind_v]}")
    objective = OBJECTIVE.replace("rotations U*H*P from attention-aware covariances", rot_desc)
    if weighted:
        objective += f"; keys weighted by W = U diag((λ/s)^{weight_exponent:g}) Uᵀ, queries by W⁻¹"
    objective += f"; clip grid r >= {lo:g}" + ("; one rotation per KV head" if per_head else "")
    data = c.data
    meta = {
        "arch": shape.arch, "n_layer": shape.n_layer, "n_head": shape.n_head, "n_head_kv": shape.n_head_kv,
        "head_dim": shape.head_dim, "fingerprint": shape.fingerprint, "per_head": per_head,
        "sink_tokens": sink, "recent_tokens": recent, "model": c.gguf_path.name,
        "calibration": {"data": Path(data).name if Path(data).exists() else str(data), "tokens": c.cap.fit_tokens,
                        "heldout_tokens": c.cap.heldout_tokens, "objective": objective, "clip_grid_lo": lo,
                        "rotation_k": kind_k, "rotation_v": kind_v, "key_weighting": weighted,
                        **({"key_weighting_exponent": weight_exponent} if weighted else {})},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    rep = Report(c.cap.fit_tokens, c.cap.heldout_tokens, c.capture_s, t2 - t1, results, permuted)
    meta["attn_output_rel_error"] = {"searched": rep.rel_error, "fixed": rep.rel_error_fixed}
    meta["centred"] = bool(centre)
    meta["window_rel_error"] = {str(s): e for s, e in win_err.items()}
    if chosen is not None:
        meta["plan"] = chosen.as_meta(budget, lay, tables)
        rep.plan = chosen
    rot = Rotations(rk_gguf.astype(np.float32), rv.astype(np.float32),
                    np.array([r.clip_k for r in results], np.float32), np.array([r.clip_v for r in results], np.float32),
                    meta, mean_k=None if mk is None else mk.astype(np.float32),
                    mean_v=None if mv is None else mv.astype(np.float32),
                    weight_k=None if wk_gguf is None else wk_gguf.astype(np.float32))
    rot.settle_weight_k()
    return rot, rep


def choose_key_weighting(c: Captured, exponents: tuple[float, ...] = AUTO_EXPONENTS, progress: bool = True,
                         **finish_kw) -> tuple[Rotations, Report, dict[float, float]]:
    """:func:`finish` once per key weighting exponent (0: no weighting), then the 2-bit cache of
    each result simulated (:func:`oscar.calib.simcache.score_runs`: its rotations, clips, centring, plan
    and windows) on ``c.score_ids``, tokens that neither fit nor searched anything; the one with
    the least mean KL divergence of the next-token distribution from the unquantised model's
    is returned, with ``{exponent: KLD}`` of all, also written into its meta
    (``calibration.key_weighting_scores``)."""
    from . import simcache
    if not c.score_ids:
        raise ValueError("choosing the key weighting needs scoring tokens: run_capture(..., score_tokens=N)")
    finished = {}
    for a in exponents:
        finished[a] = finish(c, progress=progress, key_weighting=a > 0,
                             weight_exponent=a if a > 0 else rotation.KEY_WEIGHT_EXPONENT, **finish_kw)
    perm = key_permutation(c.model, c.gguf_path, c.info)
    sm = simcache.SimModel(c.model, c.info, c.gguf_path, perm, "calibration")
    runs = {}
    for a, (rot, _rep) in finished.items():
        method = replace(simcache.PRESETS["oscar"], name=exponent_name(a), sink=rot.meta["sink_tokens"],
                         recent=rot.meta["recent_tokens"])
        runs[exponent_name(a)] = (method, simcache.calibration_of(rot, f"exponent {exponent_name(a)}"))
    res = simcache.score_runs(sm, c.score_ids, runs, progress=progress, desc="key weighting")
    scores = {a: res[exponent_name(a)]["kld"] for a in exponents}
    best = min(exponents, key=lambda a: (scores[a], a))
    rot, rep = finished[best]
    rot.meta["calibration"]["key_weighting_scores"] = {exponent_name(a): scores[a] for a in exponents}
    rot.meta["calibration"]["objective"] += (
        f"; key weighting {exponent_name(best)} chosen of {', '.join(exponent_name(a) for a in exponents)} by the "
        "simulated cache's KL divergence at the logits")
    rot.meta["calibration"]["key_weighting_scored_on"] = (
        f"{sum(len(x) for x in c.score_ids)} tokens after the fit and held-out ones, chunks of {len(c.score_ids[0])} "
        "(second halves scored): mean KL divergence of the simulated cache from the unquantised model")
    return rot, rep, scores


def exponent_name(a: float) -> str:
    """``none`` for 0 (no key weighting), else the exponent as ``%g``."""
    return "none" if a == 0 else f"{a:g}"


def calibrate(model_src: str | Path, gguf_path: str | Path, shape: gguf_io.ModelShape, data: str,
              n_tokens: int = DEFAULT_TOKENS, heldout_tokens: int = DEFAULT_HELDOUT, ctx: int = DEFAULT_CTX,
              per_head: bool = False, progress: bool = True, lo: float = clip.DEFAULT_CLIP_LO,
              kind_k: str = "uhp", kind_v: str = "uhp", centre: bool = True,
              budget: float | None = plan.DEFAULT_BUDGET, device: str | None = None,
              key_weighting: bool = True,
              weight_exponent: float | str = rotation.KEY_WEIGHT_EXPONENT) -> tuple[Rotations, Report]:
    """Calibrate rotations, centring means, clip ratios and a precision plan: :func:`run_capture`
    (the model on ``device``) then :func:`finish` (``key_weighting``, ``weight_exponent`` as there);
    ``weight_exponent="auto"``: :func:`choose_key_weighting` over :data:`AUTO_EXPONENTS`."""
    auto = key_weighting and kind_k == "uhp" and weight_exponent == "auto"
    if weight_exponent == "auto" and not auto:  # no key weighting to choose
        weight_exponent = rotation.KEY_WEIGHT_EXPONENT
    c = run_capture(model_src, gguf_path, shape, data, n_tokens, heldout_tokens, ctx, progress, device=device,
                    score_tokens=SCORE_TOKENS if auto else 0)
    if auto:
        t0 = time.time()
        rot, rep, scores = choose_key_weighting(c, progress=progress, per_head=per_head, lo=lo, kind_k=kind_k,
                                                kind_v=kind_v, centre=centre, budget=budget)
        rep.weighting_scores = scores
        rep.search_s = time.time() - t0  # every candidate's search and the scoring
    else:
        rot, rep = finish(c, per_head, lo, kind_k, kind_v, progress, centre, budget, key_weighting,
                          float(weight_exponent))
    rep.device = c.device
    return rot, rep
