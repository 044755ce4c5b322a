"""Read model shapes from a GGUF and write a copy of it with OSCAR rotations embedded.

Tensors added (F32), for every layer N:

- ``blk.N.attn_k_oscar_rot`` and ``blk.N.attn_v_oscar_rot``: numpy shape ``(D, D)``
  holding ``R`` with ``k' = k @ R`` (row vectors, llama.cpp's head layout after RoPE),
  or ``(Hkv, D, D)`` with ``R[h]`` for KV head h (per-head rotations). In ggml terms
  (ne0 fastest) that is ``ne = [D, D]`` / ``[D, D, Hkv]`` with element
  ``(i0 = j, i1 = i[, i2 = h]) = R[h][i, j]``. Output coordinate j of a rotated row
  is ``sum_i x[i] * R[i, j]`` (a column of R), so in ggml
  ``k' = ggml_mul_mat(ggml_cont(ggml_transpose(rot)), k)``. Queries use ``R_K`` like
  keys (unless ``attn_q_oscar_rot`` is present, below); the attention output is
  rotated back with ``R_Vᵀ``.
- ``blk.N.attn_q_oscar_rot`` (only with a key weighting, :func:`oscar.core.rotation.key_weighting`):
  ``R_Q``, same shape and layout convention as ``attn_k_oscar_rot``, with ``q' = q @ R_Q``
  (llama.cpp's head layout after RoPE; query head q uses ``R_Q[q // G]``). Then
  ``attn_k_oscar_rot`` holds ``R_K = W R`` and ``R_Q = W⁻¹ R`` (W symmetric positive
  definite, R orthogonal): neither is orthogonal, but ``R_Q R_Kᵀ = I`` (checked to
  ``max |R_Q R_Kᵀ - I| <= 1e-3`` per layer and head, here and by llama.cpp), so
  ``q'·k' = q·k``. Without it, ``attn_k_oscar_rot`` must be orthogonal.

With ``fold_v`` (float attention weights only) ``R_V`` goes into the weights instead:
``attn_v.weight`` (and ``attn_v.bias``) of KV head h becomes ``R_V[h]ᵀ @ W`` (its rows are
the head's output dims, so v' = v @ R_V comes out of the projection), ``attn_output.weight``
restricted to query head q's input columns becomes ``W @ R_V[q // G]``, no
``attn_v_oscar_rot`` is written and ``oscar.v_rotation_folded`` (bool) is set: llama.cpp then
multiplies neither V nor the attention output by a rotation at run time.

Centring (optional): ``blk.N.attn_k_oscar_mean`` and ``blk.N.attn_v_oscar_mean``, numpy
shape ``(Hkv, D)`` (ggml ``[D, Hkv]``): each KV head's mean key and value in rotated
coordinates, which llama.cpp subtracts from every rotated key and value before the cache
write (and adds back to the attention output for V); exact for attention, it narrows what
the 2-bit blocks must span. Not written for V with ``fold_v``.

Precision plan (optional): ``oscar.cache_type_k`` and ``oscar.cache_type_v``, string arrays
with one cache type name per layer (``oscar2``, ``q4_0``, ``q8_0``, ``f16``): what llama.cpp
stores each layer's K and V in under ``-ctk oscar2 -ctv oscar2`` (:mod:`oscar.core.plan`).

Metadata added: ``oscar.version`` (uint32 1), ``oscar.clip_k`` and ``oscar.clip_v``
(float32 arrays, one ratio per layer, the ``r`` of :func:`oscar.calib.clip.clip_rows`),
``oscar.sink_tokens`` (uint32), ``oscar.recent_tokens`` (uint32),
``oscar.calibration.data`` (string), ``oscar.calibration.tokens`` (uint32),
``oscar.calibration.objective`` (string).

Every original tensor and metadata field is copied unchanged; the input file is
only read.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .quant import PLAN_TYPES
from .rotfile import Rotations
from .shape import ModelShape

OSCAR_VERSION = 1
UINT32_MAX = 2**32 - 1
#: the tool named in the temporary file of a write (``.OUT.gguf.oscar-convert-<pid>-<random>.part``)
TEMP_TOOL = "oscar-convert"
ROT_K = "blk.{}.attn_k_oscar_rot"
ROT_Q = "blk.{}.attn_q_oscar_rot"
MEAN_K = "blk.{}.attn_k_oscar_mean"
MEAN_V = "blk.{}.attn_v_oscar_mean"
ROT_V = "blk.{}.attn_v_oscar_rot"
ATTN_TENSORS = ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight")


def _field(reader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def _scalar(reader, key: str) -> int:
    v = _field(reader, key)
    if v is None:
        raise ValueError(f"GGUF has no '{key}'")
    if isinstance(v, list):
        vals = set(int(x) for x in v)
        if len(vals) != 1:
            raise ValueError(f"'{key}' varies across layers ({sorted(vals)}): not supported")
        return vals.pop()
    return int(v)


_readers: dict = {}


def open_reader(path: str | Path):
    """A ``gguf.GGUFReader`` (read-only memmap) for ``path``, cached per process while the
    file's size and mtime are unchanged (parsing a tokenizer's metadata takes seconds)."""
    from gguf import GGUFReader
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _readers:
        try:
            r = GGUFReader(str(path), "r")
        except Exception as e:  # gguf-py raises ValueError/struct errors on non-GGUF input
            raise ValueError(f"{path}: not a readable GGUF file ({e})") from e
        if len(_readers) >= 4:
            _readers.pop(next(iter(_readers)))
        _readers[key] = r
    return _readers[key]


def model_shape(path: str | Path) -> ModelShape:
    """Attention shapes and fingerprint of a model GGUF."""
    path = Path(path)
    r = open_reader(path)
    arch = _field(r, "general.architecture")
    if arch is None:
        raise ValueError(f"{path}: not a model GGUF (no general.architecture)")
    n_layer = _scalar(r, f"{arch}.block_count")
    n_head = _scalar(r, f"{arch}.attention.head_count")
    kv = _field(r, f"{arch}.attention.head_count_kv")
    n_head_kv = n_head if kv is None else _scalar(r, f"{arch}.attention.head_count_kv")
    hd = _field(r, f"{arch}.attention.key_length")
    head_dim = int(hd) if hd is not None else _scalar(r, f"{arch}.embedding_length") // n_head
    h = hashlib.sha256(json.dumps([arch, n_layer, n_head, n_head_kv, head_dim]).encode())
    tensors = {t.name: t for t in r.tensors}
    for i in range(n_layer):
        for name in ATTN_TENSORS:
            t = tensors.get(f"blk.{i}.{name}")
            if t is not None:
                h.update(t.name.encode())
                h.update(np.ascontiguousarray(t.data).tobytes())
    return ModelShape(arch, n_layer, n_head, n_head_kv, head_dim, h.hexdigest()[:16])


def _tensor_data_f32(t) -> np.ndarray:
    """A reader tensor's data dequantised to float32, numpy shape (rows, ..., ne0)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize
    return np.asarray(dequantize(t.data, GGMLQuantizationType(t.tensor_type)), dtype=np.float32)


def tensor_f32(path: str | Path, name: str) -> np.ndarray:
    """A tensor of a GGUF dequantised to float32, numpy shape (rows, ..., ne0)."""
    r = open_reader(path)
    for t in r.tensors:
        if t.name == name:
            return _tensor_data_f32(t)
    raise KeyError(f"{path}: no tensor {name}")


FLOAT_TYPES = ("F32", "F16", "BF16")


def check_foldable(reader, src: str | Path) -> None:
    """Raise ValueError unless every layer's attn_v and attn_output weights are float
    (F32, F16, BF16), which folding the V rotation needs. ``reader``: open_reader(src)."""
    import gguf
    arch = reader.fields["general.architecture"].contents()
    n_layer = _scalar(reader, f"{arch}.block_count")
    types = {t.name: gguf.GGMLQuantizationType(t.tensor_type).name for t in reader.tensors}
    for i in range(n_layer):
        for n in (f"blk.{i}.attn_v.weight", f"blk.{i}.attn_output.weight"):
            if n not in types:
                raise ValueError(f"--fold-v: {src} has no tensor {n}: this architecture's V projection cannot be folded")
            if types[n] not in FLOAT_TYPES:
                raise ValueError(f"--fold-v needs float attention weights (F32, F16 or BF16), but {n} is {types[n]}: "
                                 "folding into quantized weights would quantize them again (measured on SmolLM2 Q4_1: "
                                 "KLD +0.09). Convert from an F16/BF16 GGUF and quantize afterwards (llama-quantize "
                                 "keeps the OSCAR tensors), or leave out --fold-v")


def fold_v_rotation(w_v: np.ndarray, b_v: np.ndarray | None, w_o: np.ndarray, rot_v: np.ndarray,
                    n_head: int, n_head_kv: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Fold one layer's V rotation into its weights (float32 in, float32 out).

    w_v: ``(Hkv*D, n_embd)`` (numpy of ``attn_v.weight``), b_v: ``(Hkv*D,)`` or None, w_o:
    ``(n_embd, H*D)``, rot_v: ``(D, D)`` or ``(Hkv, D, D)`` with v' = v @ R. Returns the
    weights whose projection gives v' directly and whose output projection takes o'.
    """
    d = rot_v.shape[-1]
    g = n_head // n_head_kv
    r = rot_v if rot_v.ndim == 3 else np.broadcast_to(rot_v, (n_head_kv, d, d))
    w_v2 = np.empty_like(w_v)
    b_v2 = None if b_v is None else np.empty_like(b_v)
    for h in range(n_head_kv):
        rows = slice(h * d, (h + 1) * d)
        w_v2[rows] = r[h].T @ w_v[rows]
        if b_v is not None:
            b_v2[rows] = r[h].T @ b_v[rows]
    w_o2 = np.empty_like(w_o)
    for q in range(n_head):
        cols = slice(q * d, (q + 1) * d)
        w_o2[:, cols] = w_o[:, cols] @ r[q // g]
    return w_v2, b_v2, w_o2


def write_oscar_gguf(src: str | Path, dst: str | Path, rot: Rotations, force: bool = False, progress: bool = True,
                     fold_v: bool = False, plan: bool = True) -> None:
    """Copy ``src`` to ``dst`` with the OSCAR tensors and metadata of ``rot`` added: the keys'
    matrices ``rot.key_matrix`` (``[L, D, D]`` or ``[L, Hkv, D, D]``, llama.cpp layout), the
    queries' ``rot.query_matrix`` where ``rot`` weights its keys, ``rot_v``, the clip ratios
    ``[L]``, the windows (``meta`` ``sink_tokens``, ``recent_tokens``; 64 and 256 where absent),
    the calibration's description (``meta["calibration"]``), the centring means and, with
    ``plan``, the precision plan (:meth:`Rotations.plan_types`). The rest as :func:`write_fields`.
    """
    cal = rot.meta.get("calibration", {})
    types = rot.plan_types() if plan else None
    write_fields(src, dst, rot.key_matrix, rot.rot_v, rot.clip_k, rot.clip_v, rot.meta.get("sink_tokens", 64),
                 rot.meta.get("recent_tokens", 256), str(cal.get("data", "unknown")), cal.get("tokens", 0),
                 str(cal.get("objective", "unknown")), force=force, progress=progress, fold_v=fold_v,
                 mean_k=rot.mean_k, mean_v=rot.mean_v, plan_k=types[0] if types else None,
                 plan_v=types[1] if types else None,
                 rot_q=rot.query_matrix if rot.weight_k is not None else None)


def write_fields(src: str | Path, dst: str | Path, rot_k: np.ndarray, rot_v: np.ndarray,
                 clip_k: np.ndarray, clip_v: np.ndarray, sink_tokens: int, recent_tokens: int,
                 calib_data: str, calib_tokens: int, objective: str, force: bool = False,
                 progress: bool = True, fold_v: bool = False, mean_k: np.ndarray | None = None,
                 mean_v: np.ndarray | None = None, plan_k: list[str] | None = None,
                 plan_v: list[str] | None = None, rot_q: np.ndarray | None = None) -> None:
    """Copy ``src`` to ``dst`` with the OSCAR tensors and metadata added, from their values one by one
    (:func:`write_oscar_gguf` takes them from a :class:`Rotations`; tests hand this broken ones).

    rot_k, rot_v: ``[L, D, D]`` or ``[L, Hkv, D, D]`` (llama.cpp layout); clip_k, clip_v:
    ``[L]``. Refuses to overwrite ``dst`` unless ``force``, refuses ``dst == src`` always,
    and refuses an input that already carries OSCAR tensors. Every value is checked against
    :mod:`oscar.core.limits` (the limits llama.cpp enforces on load) before anything is written:
    ``ValueError`` names the key, the layer and the allowed range.

    Writes to ``.DST.oscar-convert-<pid>-<random>.part`` beside ``dst`` and renames it over
    ``dst`` (``os.replace``) only when complete (:mod:`oscar.core.atomic`): an exception or
    SIGINT/SIGTERM removes the temporary, a SIGKILL's leftover is removed by the next write to
    ``dst``, and no other file (a user's ``DST.tmp``) is touched. fold_v: fold R_V into
    attn_v/attn_output (see the module docstring); refuses quantized attention weights.
    mean_k, mean_v: ``[L, Hkv, D]`` centring means (rotated coordinates) or None; plan_k,
    plan_v: one cache type name per layer (:data:`PLAN_TYPES`) or None. rot_q: the queries'
    matrices ``R_Q`` of a key weighting, rot_k's shape (then rot_k is ``R_K`` and the pair is
    checked, ``R_Q R_Kᵀ = I``, instead of rot_k's orthogonality), written as
    ``blk.N.attn_q_oscar_rot``; None: queries use rot_k, which must be orthogonal.

    For tests only: ``OSCAR_TEST_WRITE_DELAY`` (seconds, float) sleeps after each tensor is
    written, so that a test can signal the process in the middle of the write.
    """
    import gguf
    from .progress import tqdm
    from . import atomic, limits
    src, dst = Path(src), Path(dst)
    atomic.check_file_output(dst)  # a link, folder, device or FIFO is never replaced, --force or not
    if dst.exists() and dst.resolve() == src.resolve():
        raise FileExistsError(f"output {dst} is the input model: the input is never modified, choose another -o")
    if dst.exists() and not force:
        raise FileExistsError(f"output {dst} already exists: pass --force to overwrite it, or choose another -o")
    reader = open_reader(src)
    if any(t.name.endswith("_oscar_rot") for t in reader.tensors) or "oscar.version" in reader.fields:
        raise ValueError(f"{src} already carries OSCAR rotations: convert the original model instead")
    arch = reader.fields["general.architecture"].contents()
    n_layer = _scalar(reader, f"{arch}.block_count")
    # every value against the limits llama.cpp enforces, before anything is written
    fix = "recompute the rotations with --rotations calibrate"
    rot_k = np.asarray(rot_k)
    rot_v = np.asarray(rot_v)
    if rot_k.shape != rot_v.shape or rot_k.ndim not in (3, 4) or rot_k.shape[0] != n_layer \
            or np.shape(clip_k) != (n_layer,) or np.shape(clip_v) != (n_layer,):
        raise ValueError(f"rotations {rot_k.shape}/{rot_v.shape} and clips {np.shape(clip_k)}/{np.shape(clip_v)} "
                         f"do not match the model's {n_layer} layers")
    if rot_q is not None and np.shape(rot_q) != rot_k.shape:
        raise ValueError(f"query rotations {np.shape(rot_q)} and key rotations {rot_k.shape} differ in shape; {fix}")
    rot_k, rot_q = checked_key_rotations(rot_k, rot_q, fix)
    rot_v = np.stack([limits.check_rotation(r, ROT_V.format(i), None, fix) for i, r in enumerate(rot_v)])
    clip_k = limits.check_clip_ratios(clip_k, "oscar.clip_k", n_layer, fix)
    clip_v = limits.check_clip_ratios(clip_v, "oscar.clip_v", n_layer, fix)
    sink_tokens = limits.check_window_tokens(sink_tokens, "oscar.sink_tokens", "set sink_tokens in the rotation file")
    recent_tokens = limits.check_window_tokens(recent_tokens, "oscar.recent_tokens",
                                               "set recent_tokens in the rotation file")
    n_kv, hd = (rot_k.shape[1], rot_k.shape[-1]) if rot_k.ndim == 4 else (None, rot_k.shape[-1])
    means = {}
    for name, m, fmt in (("mean_k", mean_k, MEAN_K), ("mean_v", mean_v, MEAN_V)):
        if m is None or (fold_v and name == "mean_v"):
            continue
        with np.errstate(over="ignore"):
            m = np.ascontiguousarray(m, dtype=np.float32)
        if m.ndim != 3 or m.shape[0] != n_layer or m.shape[2] != hd or (n_kv is not None and m.shape[1] != n_kv):
            raise ValueError(f"{name} has shape {m.shape}; expected ({n_layer}, n_head_kv, {hd}): it does not fit "
                             f"this model; {fix}")
        means[fmt] = limits.check_centring_means(m, name, n_layer, fix, fmt)
    plans = []
    if (plan_k is None) != (plan_v is None):
        raise ValueError("a precision plan needs both cache_type_k and cache_type_v; " + fix)
    for key, pl in (("oscar.cache_type_k", plan_k), ("oscar.cache_type_v", plan_v)):
        if pl is None:
            continue
        pl = [str(t) for t in pl]
        if len(pl) != n_layer:
            raise ValueError(f"{key} names {len(pl)} cache types, the model has {n_layer} layers; {fix}")
        for i, t in enumerate(pl):
            if t not in PLAN_TYPES:
                raise ValueError(f"{key}: layer {i} names the cache type '{t}'; a plan takes "
                                 f"{', '.join(PLAN_TYPES)}; {fix}")
        plans.append((key, pl))
    if isinstance(calib_tokens, bool) or not isinstance(calib_tokens, (int, np.integer)) \
            or not 0 <= int(calib_tokens) <= UINT32_MAX:
        raise ValueError(f"oscar.calibration.tokens = {calib_tokens!r}: must be an integer 0 <= n <= {UINT32_MAX} "
                         "(uint32); fix the rotation file's calibration.tokens")
    folded: dict[str, np.ndarray] = {}  # tensor name -> new data (same type and shape)
    if fold_v:
        check_foldable(reader, src)
        from gguf.quants import quantize
        by_name = {t.name: t for t in reader.tensors}
        n_head = _scalar(reader, f"{arch}.attention.head_count")
        n_head_kv = int(_field(reader, f"{arch}.attention.head_count_kv", n_head))
        for i in range(n_layer):
            names = [f"blk.{i}.attn_v.weight", f"blk.{i}.attn_output.weight"]
            bias = f"blk.{i}.attn_v.bias"
            b_v = _tensor_data_f32(by_name[bias]) if bias in by_name else None
            w_v2, b_v2, w_o2 = fold_v_rotation(_tensor_data_f32(by_name[names[0]]), b_v, _tensor_data_f32(by_name[names[1]]),
                                               rot_v[i], n_head, n_head_kv)
            for n, w in ((names[0], w_v2), (names[1], w_o2), (bias, b_v2)):
                if w is None:
                    continue
                t = by_name[n]
                data = quantize(w, gguf.GGMLQuantizationType(t.tensor_type))
                folded[n] = data.view(t.data.dtype).reshape(t.data.shape)
    delay = float(os.environ.get("OSCAR_TEST_WRITE_DELAY", "0") or 0)  # tests only: see the docstring
    atomic.remove_stale(dst, TEMP_TOOL)
    with atomic.Cleanup() as cleanup:
        tmp = cleanup.add(atomic.create_temp_file(dst, TEMP_TOOL))
        _write(gguf, tqdm, reader, arch, tmp, rot_k, rot_v, clip_k, clip_v, sink_tokens, recent_tokens, calib_data,
               calib_tokens, objective, fold_v, folded, n_layer, progress, delay, means, plans, rot_q)
        atomic.replace(tmp, dst)  # the output is replaced only here, by the complete file
        cleanup.discard(tmp)


def _write(gguf, tqdm, reader, arch, tmp, rot_k, rot_v, clip_k, clip_v, sink_tokens, recent_tokens, calib_data,
           calib_tokens, objective, fold_v, folded, n_layer, progress, delay, means, plans, rot_q=None) -> None:
    """The body of :func:`write_fields`: everything into ``tmp``."""
    import time
    writer = gguf.GGUFWriter(str(tmp), arch=arch, endianess=reader.endianess)
    align = reader.fields.get("general.alignment")
    if align is not None:
        writer.data_alignment = int(align.contents())
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    writer.add_uint32("oscar.version", OSCAR_VERSION)
    writer.add_array("oscar.clip_k", [float(x) for x in np.asarray(clip_k, dtype=np.float32)])
    writer.add_array("oscar.clip_v", [float(x) for x in np.asarray(clip_v, dtype=np.float32)])
    writer.add_uint32("oscar.sink_tokens", int(sink_tokens))
    writer.add_uint32("oscar.recent_tokens", int(recent_tokens))
    writer.add_string("oscar.calibration.data", str(calib_data))
    writer.add_uint32("oscar.calibration.tokens", int(calib_tokens))
    writer.add_string("oscar.calibration.objective", str(objective))
    if fold_v:
        writer.add_bool("oscar.v_rotation_folded", True)
    for key, pl in plans:
        writer.add_array(key, pl)
    total = 0
    for t in reader.tensors:
        total += t.n_bytes
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    new = []
    for i in range(n_layer):
        rots = ((ROT_K, rot_k[i]), (ROT_V, rot_v[i])) + (() if rot_q is None else ((ROT_Q, rot_q[i]),))
        for fmt, arr in rots:
            if fold_v and fmt == ROT_V:
                continue
            new.append(arr)
            total += arr.nbytes
            writer.add_tensor_info(fmt.format(i), arr.shape, arr.dtype, arr.nbytes, gguf.GGMLQuantizationType.F32)
        for fmt, m in means.items():
            arr = m[i]
            new.append(arr)
            total += arr.nbytes
            writer.add_tensor_info(fmt.format(i), arr.shape, arr.dtype, arr.nbytes, gguf.GGMLQuantizationType.F32)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        with tqdm(desc="write", total=total, unit="B", unit_scale=True, disable=not progress) as bar:
            for t in reader.tensors:
                writer.write_tensor_data(folded.get(t.name, t.data), tensor_endianess=reader.endianess)
                bar.update(t.n_bytes)
                if delay > 0:
                    time.sleep(delay)
            for arr in new:
                writer.write_tensor_data(arr)
                bar.update(arr.nbytes)
    finally:
        writer.close()


def read_key_query_rotations(path: str | Path, n_layer: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``(R_K, R_Q)`` of a converted GGUF, float32 ``[L, D, D]`` or ``[L, Hkv, D, D]`` (llama.cpp
    layout): R_Q from ``blk.N.attn_q_oscar_rot`` where the file has it (a key weighting; the
    pair is checked, ``max |R_Q R_Kᵀ - I| <= 1e-3``), else None and R_K checked orthogonal.
    Raises ``ValueError`` naming the tensor and layer."""
    names = {t.name for t in open_reader(path).tensors}
    fix = f"{path} is damaged or was not written by oscar-convert: convert the model again"
    rk = [tensor_f32(path, ROT_K.format(i)) for i in range(n_layer)]
    if ROT_Q.format(0) not in names:
        return checked_key_rotations(rk, None, fix)
    missing = [i for i in range(n_layer) if ROT_Q.format(i) not in names]
    if missing:
        raise ValueError(f"{path} has {ROT_Q.format(0)} but no {ROT_Q.format(missing[0])}: every layer or none "
                         f"carries a query rotation; {fix}")
    return checked_key_rotations(rk, [tensor_f32(path, ROT_Q.format(i)) for i in range(n_layer)], fix)


def checked_key_rotations(rot_k, rot_q, fix: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The layers' key rotations as float32 stacks, checked against llama.cpp's limits: each
    orthogonal (``rot_q`` None), or each layer's pair of a key weighting ``R_Q R_Kᵀ = I``
    (:func:`oscar.core.limits.check_rotation_pair`); ``(R_K, R_Q or None)``. ``fix`` ends every error."""
    from . import limits
    if rot_q is None:
        return np.stack([limits.check_rotation(r, ROT_K.format(i), None, fix) for i, r in enumerate(rot_k)]), None
    pairs = [limits.check_rotation_pair(r, q, ROT_K.format(i), ROT_Q.format(i), None, fix)
             for i, (r, q) in enumerate(zip(rot_k, rot_q))]
    return np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])


