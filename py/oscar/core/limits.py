"""The limits on what an OSCAR GGUF may carry, loaded from ``py/oscar/limits.json`` (package data of
:mod:`oscar`, where llama.cpp's messages name it).

``limits.json`` is the one list of these numbers: the converter (this module, used by
:mod:`oscar.calib.zoo` when it reads a rotation file and by :mod:`oscar.core.gguf_io` before it writes)
and llama.cpp (which refuses the same values when it loads a model) both follow it, and both
sides' tests read it. Each ``check_*`` function takes one kind of value, returns it as it is
stored in the GGUF and raises ``ValueError`` naming the key (and layer), the value and the
allowed range; ``fix``, where given, is appended to say what to do.

- clip ratios (``oscar.clip_k``, ``oscar.clip_v``, float32, one per layer): finite,
  ``CLIP_RATIO_MIN_EXCLUSIVE < r <= CLIP_RATIO_MAX``, checked on the float32 value stored;
- window sizes (``oscar.sink_tokens``, ``oscar.recent_tokens``, stored as uint32): integers
  with ``WINDOW_TOKENS_MIN <= n <= WINDOW_TOKENS_MAX`` (the runtime reads them as int32);
- rotations (``blk.N.attn_{k,v}_oscar_rot``, float32): per layer ``[D, D]`` or
  ``[n_head_kv, D, D]``, finite, ``max |RᵀR - I| <= ROTATION_ORTHOGONALITY_TOL``, D a head
  size oscar2 can hold; with key weighting (``blk.N.attn_q_oscar_rot`` present) the key
  matrix ``R_K`` is no longer orthogonal and the pair is checked instead: finite, one shape,
  ``max |R_Q R_Kᵀ - I| <= ROTATION_ORTHOGONALITY_TOL`` (:func:`check_rotation_pair`);
  that pair's gains (largest singular values) are each ``<= WEIGHT_K_GAIN_MAX`` and their
  product (the condition number of W) ``<= WEIGHT_K_COND_MAX``;
- key weightings (``weight_k`` of a rotation file, never in a GGUF): finite, symmetric,
  positive definite, largest eigenvalue of W and of W⁻¹ ``<= WEIGHT_K_GAIN_MAX``, condition
  number ``<= WEIGHT_K_COND_MAX`` (:func:`check_key_weighting`);
- centring means (``blk.N.attn_{k,v}_oscar_mean``, a rotation file's ``mean_k``/``mean_v``):
  finite, every ``|mean| <= CENTRING_MEAN_ABS_MAX`` (:func:`check_centring_means`);
- head sizes oscar2 can hold: multiples of ``OSCAR2_BLOCK`` (it stores blocks of 64 values).
"""
from __future__ import annotations

import json
import math
import numbers
from importlib import resources
from typing import Any

import numpy as np

from .rotation import pair_error

#: everything in limits.json, as read
LIMITS: dict[str, Any] = json.loads(resources.files("oscar").joinpath("limits.json").read_text(encoding="utf-8"))

CLIP_RATIO_MIN_EXCLUSIVE: float = float(LIMITS["clip_ratio_min_exclusive"])
CLIP_RATIO_MAX: float = float(LIMITS["clip_ratio_max"])
WINDOW_TOKENS_MIN: int = int(LIMITS["window_tokens_min"])
WINDOW_TOKENS_MAX: int = int(LIMITS["window_tokens_max"])
ROTATION_ORTHOGONALITY_TOL: float = float(LIMITS["rotation_orthogonality_tol"])
OSCAR2_BLOCK: int = int(LIMITS["oscar2_block"])
#: largest condition number of a key weighting W (``‖R_K‖₂·‖R_Q‖₂`` in a GGUF)
WEIGHT_K_COND_MAX: float = float(LIMITS["key_weighting_cond_max"])
#: largest gain of R_K and of R_Q (largest eigenvalue of W and of W⁻¹)
WEIGHT_K_GAIN_MAX: float = float(LIMITS["key_weighting_gain_max"])
#: largest magnitude of a centring mean
CENTRING_MEAN_ABS_MAX: float = float(LIMITS["centring_mean_abs_max"])
CLIP_RATIO_KEYS: tuple[str, ...] = tuple(LIMITS["clip_ratio_keys"])
WINDOW_TOKENS_KEYS: tuple[str, ...] = tuple(LIMITS["window_tokens_keys"])

CLIP_RANGE = f"{CLIP_RATIO_MIN_EXCLUSIVE:g} < r <= {CLIP_RATIO_MAX:g}, finite"
WINDOW_RANGE = f"an integer {WINDOW_TOKENS_MIN} <= n <= {WINDOW_TOKENS_MAX}"


def _where(key: str, layer: int | None = None, head: int | None = None) -> str:
    """``key[3] (layer 3, KV head 1)``; without a layer ``key (KV head 1)`` or ``key``."""
    h = "" if head is None else f"KV head {head}"
    if layer is None:
        return f"{key} ({h})" if h else key
    return f"{key}[{layer}] (layer {layer}{', ' + h if h else ''})"


def _fail(msg: str, fix: str | None) -> ValueError:
    return ValueError(msg + (f"; {fix}" if fix else ""))


def check_clip_ratio(value: Any, key: str = "oscar.clip_k", layer: int | None = None, fix: str | None = None) -> float:
    """One clip ratio as stored (the float32 value, returned as a Python float)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise _fail(f"{_where(key, layer)} = {value!r}: a clip ratio must be a number with {CLIP_RANGE}", fix)
    with np.errstate(over="ignore"):
        r = float(np.float32(value))  # the runtime sees the float32 value: check that one
    if not math.isfinite(r) or not (CLIP_RATIO_MIN_EXCLUSIVE < r <= CLIP_RATIO_MAX):
        shown = f"{float(value):g}" + ("" if float(value) == r or not math.isfinite(float(value)) else f" (float32 {r:g})")
        raise _fail(f"{_where(key, layer)} = {shown} is outside the allowed clip ratios ({CLIP_RANGE})", fix)
    return r


def check_clip_ratios(values: Any, key: str = "oscar.clip_k", n_layer: int | None = None,
                      fix: str | None = None) -> np.ndarray:
    """One clip ratio per layer: a 1-D array (of ``n_layer`` entries where given), returned float32."""
    a = np.asarray(values)
    if a.ndim != 1 or a.dtype.kind not in "fiu":
        raise _fail(f"{key} must be a 1-D array of numbers (one clip ratio per layer), got {a.dtype} shape {a.shape}",
                    fix)
    if n_layer is not None and a.shape[0] != n_layer:
        raise _fail(f"{key} has {a.shape[0]} entries, one per layer needs {n_layer}", fix)
    return np.array([check_clip_ratio(x, key, i, fix) for i, x in enumerate(a.tolist())], dtype=np.float32)


def check_window_tokens(value: Any, key: str = "oscar.sink_tokens", fix: str | None = None) -> int:
    """A window size (``oscar.sink_tokens``, ``oscar.recent_tokens``): an integer in range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _fail(f"{key} = {value!r}: a window size must be {WINDOW_RANGE} (tokens)", fix)
    n = int(value)
    if not WINDOW_TOKENS_MIN <= n <= WINDOW_TOKENS_MAX:
        raise _fail(f"{key} = {n} is outside the allowed window sizes ({WINDOW_RANGE} tokens)", fix)
    return n


def check_head_dim(value: Any, key: str = "head_dim", layer: int | None = None, fix: str | None = None) -> int:
    """A head size the oscar2 cache can hold: a positive multiple of ``OSCAR2_BLOCK``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) <= 0 \
            or int(value) % OSCAR2_BLOCK:
        raise _fail(f"{_where(key, layer)} = {value!r}: oscar2 stores blocks of {OSCAR2_BLOCK} values, so it holds "
                    f"head sizes that are a multiple of {OSCAR2_BLOCK} only", fix)
    return int(value)


def check_rotation(r: Any, key: str = "rot_k", layer: int | None = None, fix: str | None = None) -> np.ndarray:
    """One layer's rotation, ``[D, D]`` or ``[n_head_kv, D, D]``, returned as the float32 array
    stored: square, D a head size oscar2 holds, finite, orthogonal to ``ROTATION_ORTHOGONALITY_TOL``."""
    a = np.asarray(r)
    where = _where(key, layer)
    if a.dtype.kind not in "fiu" or a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2] or a.size == 0:
        raise _fail(f"{where}: a rotation must be a square float32 matrix [D, D] or a stack [n_head_kv, D, D], "
                    f"got {a.dtype} shape {a.shape}", fix)
    check_head_dim(int(a.shape[-1]), f"{where}: D", None, fix)
    with np.errstate(over="ignore"):
        a = np.ascontiguousarray(a, dtype=np.float32)
    stack = a.reshape(-1, a.shape[-1], a.shape[-1])
    for h, m in enumerate(stack):
        w = _where(key, layer, h if a.ndim == 3 else None)
        if not np.all(np.isfinite(m)):
            raise _fail(f"{w}: the rotation has NaN or Inf entries (as float32); a rotation must be finite", fix)
        m64 = m.astype(np.float64)
        err = float(np.max(np.abs(m64.T @ m64 - np.eye(m.shape[0]))))
        if not err <= ROTATION_ORTHOGONALITY_TOL:
            raise _fail(f"{w}: the rotation is not orthogonal (max |RᵀR - I| = {err:.3g}, allowed "
                        f"<= {ROTATION_ORTHOGONALITY_TOL:g})", fix)
    return a


def check_rotations(a: Any, key: str = "rot_k", n_layer: int | None = None, fix: str | None = None) -> np.ndarray:
    """All layers' rotations, ``[L, D, D]`` or ``[L, n_head_kv, D, D]``, returned float32."""
    a = np.asarray(a)
    if a.ndim not in (3, 4):
        raise _fail(f"{key}: rotations must be [n_layer, D, D] or [n_layer, n_head_kv, D, D], got {a.dtype} shape "
                    f"{a.shape}", fix)
    if n_layer is not None and a.shape[0] != n_layer:
        raise _fail(f"{key} has rotations for {a.shape[0]} layers, the model has {n_layer}", fix)
    return np.stack([check_rotation(x, key, i, fix) for i, x in enumerate(a)]) if len(a) else a.astype(np.float32)


def _square_stack(r: Any, where: str, what: str, fix: str | None) -> np.ndarray:
    """``r`` as float32 ``[D, D]`` or ``[n_head_kv, D, D]`` with D a head size oscar2 holds."""
    a = np.asarray(r)
    if a.dtype.kind not in "fiu" or a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2] or a.size == 0:
        raise _fail(f"{where}: {what} must be a square float32 matrix [D, D] or a stack [n_head_kv, D, D], "
                    f"got {a.dtype} shape {a.shape}", fix)
    check_head_dim(int(a.shape[-1]), f"{where}: D", None, fix)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(a, dtype=np.float32)


def check_rotation_pair(r_k: Any, r_q: Any, key: str = "rot_k", key_q: str = "rot_q", layer: int | None = None,
                        fix: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One layer's key and query matrices of a key weighting (``R_K = W R``, ``R_Q = W⁻¹ R``),
    each ``[D, D]`` or ``[n_head_kv, D, D]``, returned as the float32 arrays stored: one shape,
    finite, ``max |R_Q R_Kᵀ - I| <= ROTATION_ORTHOGONALITY_TOL`` per matrix (so that
    ``(q R_Q)·(k R_K) = q·k``), in float64 from the float32 values."""
    a = _square_stack(r_k, _where(key, layer), "a key rotation", fix)
    b = _square_stack(r_q, _where(key_q, layer), "a query rotation", fix)
    if a.shape != b.shape:
        raise _fail(f"{_where(key_q, layer)} has shape {b.shape} but {_where(key, layer)} {a.shape}: the query "
                    "and key rotations of a layer must have one shape", fix)
    n = a.shape[-1]
    for h, (mk, mq) in enumerate(zip(a.reshape(-1, n, n), b.reshape(-1, n, n))):
        head = h if a.ndim == 3 else None
        for k, m in ((key, mk), (key_q, mq)):
            if not np.all(np.isfinite(m)):
                raise _fail(f"{_where(k, layer, head)}: the rotation has NaN or Inf entries (as float32); a "
                            "rotation must be finite", fix)
        err = float(pair_error(mk, mq))
        if not err <= ROTATION_ORTHOGONALITY_TOL:
            raise _fail(f"{_where(key_q, layer, head)}: the query rotation is not the inverse transpose of the key "
                        f"rotation {_where(key, layer, head)} (max |R_Q R_Kᵀ - I| = {err:.3g}, allowed "
                        f"<= {ROTATION_ORTHOGONALITY_TOL:g}): attention scores would change", fix)
        gains = {}
        for k, m in ((key, mk), (key_q, mq)):
            g = gains[k] = float(np.linalg.norm(m.astype(np.float64), 2))
            if not g <= WEIGHT_K_GAIN_MAX:
                raise _fail(f"{_where(k, layer, head)}: the key weighting's gain (largest singular value) is {g:.3g}, "
                            f"allowed <= {WEIGHT_K_GAIN_MAX:g}: the cached keys or the queries would be scaled past "
                            "what 16-bit arithmetic holds", fix)
        cond = gains[key] * gains[key_q]
        if not cond <= WEIGHT_K_COND_MAX:
            raise _fail(f"{_where(key, layer, head)}: the key weighting is too ill-conditioned (condition number "
                        f"‖R_K‖₂·‖R_Q‖₂ = {cond:.3g}, allowed <= {WEIGHT_K_COND_MAX:g})", fix)
    return a, b


def check_key_weighting(w: Any, key: str = "weight_k", layer: int | None = None, fix: str | None = None) -> np.ndarray:
    """One layer's key weighting W, ``[D, D]`` or ``[n_head_kv, D, D]``, returned float32:
    finite, symmetric (``max |W - Wᵀ| <= 1e-5 max |W|``), positive definite with condition
    number ``<= WEIGHT_K_COND_MAX`` (in float64)."""
    a = np.asarray(w)
    where = _where(key, layer)
    if a.dtype.kind not in "fiu" or a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2] or a.size == 0:
        raise _fail(f"{where}: a key weighting must be a square float32 matrix [D, D] or a stack "
                    f"[n_head_kv, D, D], got {a.dtype} shape {a.shape}", fix)
    with np.errstate(over="ignore"):
        a = np.ascontiguousarray(a, dtype=np.float32)
    n = a.shape[-1]
    for h, m in enumerate(a.reshape(-1, n, n)):
        w_ = _where(key, layer, h if a.ndim == 3 else None)
        if not np.all(np.isfinite(m)):
            raise _fail(f"{w_} holds a non-finite value; a key weighting must be finite", fix)
        m64 = m.astype(np.float64)
        asym = float(np.max(np.abs(m64 - m64.T)))
        if not asym <= 1e-5 * float(np.max(np.abs(m64))):
            raise _fail(f"{w_} is not symmetric (max |W - Wᵀ| = {asym:.3g}, max |W| = {np.max(np.abs(m64)):.3g})", fix)
        ev = np.linalg.eigvalsh(0.5 * (m64 + m64.T))
        if not ev[0] > 0:
            raise _fail(f"{w_} is not symmetric positive definite (smallest eigenvalue {ev[0]:.3g})", fix)
        if not ev[-1] / ev[0] <= WEIGHT_K_COND_MAX:
            raise _fail(f"{w_} is too ill-conditioned (condition number {ev[-1] / ev[0]:.3g}, allowed "
                        f"<= {WEIGHT_K_COND_MAX:g})", fix)
        if not max(ev[-1], 1 / ev[0]) <= WEIGHT_K_GAIN_MAX:
            raise _fail(f"{w_} scales too far (largest eigenvalue of W {ev[-1]:.3g}, of W⁻¹ {1 / ev[0]:.3g}, allowed "
                        f"<= {WEIGHT_K_GAIN_MAX:g}; calibration makes mean(d²) = 1)", fix)
    return a


def check_centring_means(m: Any, key: str = "mean_k", n_layer: int | None = None, fix: str | None = None,
                         tensor: str | None = None) -> np.ndarray:
    """All layers' centring means, ``[L, n_head_kv, D]``, returned float32: finite, every
    ``|mean| <= CENTRING_MEAN_ABS_MAX``. ``tensor`` (``blk.{}.attn_k_oscar_mean``) names a
    layer's GGUF tensor in the message; else ``key[layer]``."""
    a = np.asarray(m)
    if a.dtype.kind not in "fiu" or a.ndim != 3 or (n_layer is not None and a.shape[0] != n_layer):
        raise _fail(f"{key} has {a.dtype} shape {a.shape}; centring means are float32 [n_layer, n_head_kv, D]"
                    + ("" if n_layer is None else f" with n_layer {n_layer}"), fix)
    with np.errstate(over="ignore"):
        a = np.ascontiguousarray(a, dtype=np.float32)
    for i, layer in enumerate(a):
        bad = np.argwhere(~(np.abs(layer) <= CENTRING_MEAN_ABS_MAX))  # (NaN is refused too)
        if len(bad):
            h, j = (int(x) for x in bad[0])
            v = float(layer[h, j])
            what = "a non-finite value" if not math.isfinite(v) else f"{v:g}, over the allowed {CENTRING_MEAN_ABS_MAX:g}"
            where = tensor.format(i) if tensor else f"{key}[{i}]"
            raise _fail(f"{where} holds {what} (layer {i}, KV head {h}, element {j}): a centring mean must be finite "
                        f"with |mean| <= {CENTRING_MEAN_ABS_MAX:g}", fix)
    return a
