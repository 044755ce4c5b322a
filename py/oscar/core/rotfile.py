"""Rotation files (``.safetensors`` or ``.npz``): :class:`Rotations`, what calibration makes
and the converter writes into a GGUF.

A rotation file holds, for one model (all in llama.cpp's head layout):

- ``rot_k``, ``rot_v``: ``[L, D, D]`` (one rotation per layer) or ``[L, Hkv, D, D]``
  (per KV head); ``k' = k @ rot_k[l]`` (row vectors). float32, or float16 to halve the
  file (``save(half=True)``, ``oscar zoo add --half``): float16 rotations are made
  orthogonal again on load (:func:`oscar.core.rotation.nearest_orthogonal`), which moves each
  entry by about the float16 rounding (1e-4 for D = 256).
- ``clip_k``, ``clip_v``: ``[L]`` clip ratios (:func:`oscar.calib.clip.clip_rows`).
- ``mean_k``, ``mean_v`` (optional): ``[L, Hkv, D]`` float32 centring means in rotated
  coordinates (:func:`oscar.calib.calibrate.rotated_means`); absent in files made without centring.
- ``weight_k`` (optional): the key weighting W (:func:`oscar.core.rotation.key_weighting`),
  symmetric positive definite: keys use ``R_K = W @ rot_k`` and queries ``R_Q = W⁻¹ @ rot_k``
  (:attr:`Rotations.key_matrix`, :attr:`Rotations.query_matrix`); ``rot_k`` itself stays
  orthogonal. Absent: both use ``rot_k``. Stored float32 as its scales d, ``[L, D]`` or
  ``[L, Hkv, D]``: ``W = U diag(d) Uᵀ`` in the eigenbasis ``U = rot_k (H P)ᵀ`` of the
  calibrated ``rot_k = U H P`` (:func:`oscar.core.rotation.weighting_from_scales`), so a float16
  ``rot_k`` restored on load carries its W with it and the pair stays exact; a W that is not
  diagonal in that basis is stored whole (``rot_k``'s shape), and both forms are read. In
  memory ``weight_k`` is always the whole W.
- ``meta``: a JSON string: ``arch``, ``n_layer``, ``n_head``, ``n_head_kv``,
  ``head_dim``, ``fingerprint`` (:func:`oscar.core.gguf_io.model_shape`), ``per_head``,
  ``sink_tokens``, ``recent_tokens``, ``calibration`` (``data``, ``tokens``,
  ``heldout_tokens``, ``objective``), ``date``, ``model`` (file name it was made from).

Two formats hold the same arrays: safetensors (the format the zoo publishes on the
Hugging Face Hub; the tensors above and the JSON meta as the header's ``oscar.meta``;
read by ``safetensors.numpy`` and ``safetensors.torch`` alike, no pickle) and numpy's
``.npz`` (``meta`` a string array). :meth:`Rotations.load` tells them by their first
bytes, :meth:`Rotations.save` writes the one its file name ends with.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import limits
from .shape import ModelShape
from .rotation import (ORTHO_TOL_STORED, check_orthogonal, nearest_orthogonal, orthogonality_error,
                       weighting_from_scales, weighting_scales)

#: how far from orthogonal float16-stored rotations may be (their rounding gives ~3e-4 for D = 256)
ORTHO_TOL_HALF = 4e-3


class RotationMismatch(ValueError):
    """A rotation file does not fit the model."""


class BadRotationFile(ValueError):
    """A rotation file cannot be read, or holds values outside :mod:`oscar.core.limits`."""


#: what to do about a rotation file that is broken or out of the limits
FILE_FIX = ("recompute it (oscar-convert MODEL --rotations calibrate --save-rotations FILE.npz) "
            "or restore the original file")
#: the safetensors header key that holds the JSON meta
ST_META_KEY = "oscar.meta"
#: the arrays of a rotation file, and those it may hold
ARRAYS = ("rot_k", "rot_v", "clip_k", "clip_v")
MEANS = ("mean_k", "mean_v")
OPTIONAL_ARRAYS = (*MEANS, "weight_k")
#: what to do about a key weighting that is refused
WEIGHT_FIX = "calibrate again with oscar-convert MODEL --rotations calibrate (--save-rotations FILE.npz)"
#: largest off-diagonal of Uᵀ W U (relative to max d) for which a key weighting is stored as its scales
WEIGHT_DIAG_TOL = 1e-4
#: meta keys that must be integers (>= 0) where present
_META_INTS = ("n_layer", "n_head", "n_head_kv", "head_dim")


@dataclass
class Rotations:
    """Calibrated rotations and clip ratios of one model (see the module docstring)."""
    rot_k: np.ndarray
    rot_v: np.ndarray
    clip_k: np.ndarray
    clip_v: np.ndarray
    meta: dict = field(default_factory=dict)
    mean_k: np.ndarray | None = None
    mean_v: np.ndarray | None = None
    weight_k: np.ndarray | None = None
    #: (scales, W) when weight_k was built from stored scales: saved again as those scales, bit for bit
    _weight_scales: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def per_head(self) -> bool:
        return self.rot_k.ndim == 4

    @property
    def key_matrix(self) -> np.ndarray:
        """``R_K = W @ rot_k`` (float32, rot_k's shape; ``k' = k @ R_K``), computed in float64;
        ``rot_k`` itself without a key weighting."""
        if self.weight_k is None:
            return np.asarray(self.rot_k, np.float32)
        return (np.asarray(self.weight_k, np.float64) @ np.asarray(self.rot_k, np.float64)).astype(np.float32)

    @property
    def query_matrix(self) -> np.ndarray:
        """``R_Q = W⁻¹ @ rot_k`` (float32, rot_k's shape; ``q' = q @ R_Q``), computed in float64;
        ``rot_k`` itself without a key weighting."""
        if self.weight_k is None:
            return np.asarray(self.rot_k, np.float32)
        w = np.asarray(self.weight_k, np.float64)
        return np.linalg.solve(w, np.asarray(self.rot_k, np.float64)).astype(np.float32)

    def plan_types(self) -> tuple[list[str], list[str]] | None:
        """The precision plan's cache type per layer for K and V (``meta["plan"]``'s ``type_k``,
        ``type_v``), or None without a plan; ``ValueError`` when the plan is malformed."""
        plan = self.meta.get("plan")
        if plan is None:
            return None
        if not (isinstance(plan, dict) and "type_k" in plan and "type_v" in plan):
            raise ValueError(f"the rotations' meta.plan is malformed ({plan!r}); recompute them with "
                             "--rotations calibrate, or pass --kv-plan off")
        return plan["type_k"], plan["type_v"]

    def save(self, path: str | Path, half: bool = False) -> Path:
        """Write a rotation file: safetensors when ``path`` ends with ``.safetensors``, else an
        ``.npz`` (``.npz`` appended to a name without it, as numpy does). The rotations as
        float32, or float16 with ``half`` (half the size; restored to orthogonal on
        :meth:`load`), the clip ratios, centring means and key weighting as float32 (the weighting
        is not orthogonal, so never float16), the JSON meta. Atomic: written to a
        temporary beside it and renamed (:mod:`oscar.core.atomic`), so an interrupted save leaves
        the old file (or none). Returns the path written."""
        from . import atomic
        path = Path(path)
        st = path.suffix == ".safetensors"
        if not st and path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        rt = np.float16 if half else np.float32
        arrays = {"rot_k": np.ascontiguousarray(self.rot_k, rt), "rot_v": np.ascontiguousarray(self.rot_v, rt),
                  "clip_k": np.ascontiguousarray(self.clip_k, np.float32),
                  "clip_v": np.ascontiguousarray(self.clip_v, np.float32)}
        for name in MEANS:
            if getattr(self, name) is not None:
                arrays[name] = np.ascontiguousarray(getattr(self, name), np.float32)
        if self.weight_k is not None:
            arrays["weight_k"] = np.ascontiguousarray(self.stored_weight_k(), np.float32)
        meta = json.dumps(self.meta, sort_keys=True)
        atomic.check_file_output(path, "rotation file")
        atomic.remove_stale(path, "oscar", "oscar")
        with atomic.Cleanup() as cleanup:
            tmp = cleanup.add(atomic.create_temp_file(path, "oscar"))
            if st:
                from safetensors.numpy import save
                tmp.write_bytes(save(arrays, metadata={ST_META_KEY: meta}))
            else:
                with open(tmp, "wb") as f:
                    np.savez_compressed(f, **arrays, meta=np.array(meta))
            atomic.replace(tmp, path, "rotation file")
            cleanup.discard(tmp)
        return path

    def stored_weight_k(self) -> np.ndarray:
        """What :meth:`save` writes for ``weight_k``: its scales d (``rot_k``'s shape less the last
        axis) when W is diagonal in the basis of ``rot_k`` to :data:`WEIGHT_DIAG_TOL`, else W whole."""
        if self._weight_scales is not None and self._weight_scales[1] is self.weight_k:
            return self._weight_scales[0]
        d, residual = weighting_scales(self.weight_k, self.rot_k)
        return d if residual <= WEIGHT_DIAG_TOL else np.asarray(self.weight_k)

    def settle_weight_k(self) -> None:
        """Make ``weight_k`` the W a float32 :meth:`save` and :meth:`load` give back (rebuilt from
        its float32 scales), so that a converted GGUF and one converted again from the saved
        file hold identical tensors. Moves W by float32 rounding."""
        if self.weight_k is not None:
            self.weight_k = self.stored_weight_k().astype(np.float32)
            self.check_weight_k()

    @staticmethod
    def load(path: str | Path, restore: bool = True) -> "Rotations":
        """Read a rotation file written by :meth:`save`, safetensors or ``.npz`` (told by the
        first bytes: a zip's ``PK``, or safetensors' header length and ``{``); float16
        rotations are made orthogonal again.
        Anything else, and any value outside :mod:`oscar.core.limits`, raises
        :class:`BadRotationFile` (a ``ValueError``) naming the file, the key (and layer) and the fix.
        ``restore=False`` (a quick check, e.g. ``oscar zoo list``): float16 rotations are only
        checked against their rounding, not made orthogonal again (an SVD per matrix), and are
        returned as stored."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"rotation file {path}: no such file")
        with open(path, "rb") as f:
            head = f.read(9)
        st = path.suffix == ".safetensors" or (len(head) == 9 and head[8:9] == b"{" and head[:2] != b"PK")
        if st:
            rk, rv, clip_k, clip_v, meta_s, optional = _read_safetensors(path)
        else:
            rk, rv, clip_k, clip_v, meta_s, optional = _read_npz(path)
        try:
            meta = json.loads(meta_s)
        except ValueError as e:
            raise BadRotationFile(f"rotation file {path}: meta is not JSON ({e}); {FILE_FIX}") from e
        r = Rotations._from_arrays(path, rk, rv, clip_k, clip_v, meta, restore)
        r.mean_k, r.mean_v, r.weight_k = (optional.get(k) for k in OPTIONAL_ARRAYS)
        r.check_means(f"rotation file {path}")
        r.check_weight_k(f"rotation file {path}")
        return r

    def check_means(self, source: str = "rotations") -> None:
        """Raise :class:`BadRotationFile` unless the centring means (where present) are finite
        float ``[L, Hkv, D]`` arrays with the rotations' L and D."""
        for name in MEANS:
            a = getattr(self, name)
            if a is None:
                continue
            a = np.asarray(a)
            L, d = np.shape(self.rot_k)[0], np.shape(self.rot_k)[-1]
            if a.ndim != 3 or a.shape[0] != L or a.shape[2] != d or a.dtype.kind != "f":
                raise BadRotationFile(f"{source}: {name} has {a.dtype} shape {a.shape}; expected float32 "
                                      f"[{L}, n_head_kv, {d}]; {FILE_FIX}")
            bad = np.argwhere(~np.isfinite(a))
            if len(bad):
                raise BadRotationFile(f"{source}: {name} of layer {int(bad[0][0])} holds a non-finite value; {FILE_FIX}")
            setattr(self, name, a.astype(np.float32))

    def check_weight_k(self, source: str = "rotations") -> None:
        """Raise :class:`BadRotationFile` naming ``source``, the layer and the fix unless the key
        weighting (where present) is W (rot_k's shape) or its scales (rot_k's shape less the last
        axis, made W in rot_k's basis: :func:`oscar.core.rotation.weighting_from_scales`) and every
        layer's (and head's) W is finite, symmetric and positive definite with a bounded
        condition number (:func:`oscar.core.limits.check_key_weighting`). Stored back as W, float32."""
        if self.weight_k is None:
            return
        a = np.asarray(self.weight_k)
        rk = np.shape(self.rot_k)
        if a.dtype.kind != "f" or a.shape not in (rk, rk[:-1]):
            raise BadRotationFile(f"{source}: weight_k has {a.dtype} shape {a.shape}; expected float32 scales of "
                                  f"shape {rk[:-1]} (or the whole W, rot_k's shape {rk}); {WEIGHT_FIX}")
        cached = self._weight_scales
        scales = cached[0] if cached is not None and cached[1] is self.weight_k else None
        if a.shape == rk[:-1]:
            scales, a = a.astype(np.float32), weighting_from_scales(a, self.rot_k)
        try:
            self.weight_k = np.stack([limits.check_key_weighting(x, "weight_k", i) for i, x in enumerate(a)])
            self._weight_scales = None if scales is None else (scales, self.weight_k)
        except ValueError as e:
            raise BadRotationFile(f"{source}: {e}; {WEIGHT_FIX}") from e

    @staticmethod
    def _from_arrays(path: Path, rk: np.ndarray, rv: np.ndarray, clip_k: np.ndarray, clip_v: np.ndarray,
                     meta, restore: bool) -> "Rotations":
        """The checks of :meth:`load` on the arrays read from ``path``."""
        rots = []
        for name, a in (("rot_k", rk), ("rot_v", rv)):
            if a.dtype == np.float16 and a.ndim in (3, 4) and a.shape[-1] == a.shape[-2] and a.size:
                # only the rounding is undone: a matrix that was not a rotation stays refused
                err = orthogonality_error(a) if np.all(np.isfinite(a)) else float("inf")
                if err > ORTHO_TOL_HALF:
                    raise RotationMismatch(f"{path}: {name} (float16) is not orthogonal even to float16 rounding "
                                           f"(max |RᵀR - I| = {err:.3g} > {ORTHO_TOL_HALF:g}): recompute it with "
                                           "--rotations calibrate")
                if restore:
                    a = nearest_orthogonal(a)
            rots.append(a)
        r = Rotations(rots[0], rots[1], clip_k, clip_v, meta)
        r.check_limits(f"rotation file {path}", rotations=restore or rk.dtype != np.float16 or rv.dtype != np.float16)
        return r

    def check_limits(self, source: str = "rotations", rotations: bool = True) -> None:
        """Raise :class:`BadRotationFile` (naming ``source``, the key, the layer and the fix)
        unless every value fits :mod:`oscar.core.limits`: meta a JSON object (its counts integers),
        rot_k and rot_v ``[L, D, D]`` or ``[L, Hkv, D, D]`` of one shape, finite and orthogonal,
        D a head size oscar2 holds, clip ratios in range, sink/recent tokens in range. Whether
        the counts fit a model is :meth:`validate`'s part. The arrays are stored back as float32.
        ``rotations=False`` leaves out the rotations' finiteness and orthogonality (for
        :meth:`load` without ``restore``)."""
        def bad(msg: str, fix: str = FILE_FIX) -> BadRotationFile:
            return BadRotationFile(f"{source}: {msg}; {fix}")

        m = self.meta
        if not isinstance(m, dict):
            raise bad(f"meta must be a JSON object ({{\"n_layer\": ..., ...}}), got a JSON {type(m).__name__}")
        for key in _META_INTS:
            v = m.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise bad(f"meta.{key} = {v!r} must be an integer >= 0")
        for key in ("fingerprint", "arch"):
            if m.get(key) is not None and not isinstance(m[key], str):
                raise bad(f"meta.{key} = {m[key]!r} must be a string")
        cal = m.get("calibration", {})
        if not isinstance(cal, dict):
            raise bad(f"meta.calibration must be a JSON object (data, tokens, objective), got {cal!r}")
        tok = cal.get("tokens", 0)
        if isinstance(tok, bool) or not isinstance(tok, int) or not 0 <= tok <= 2**32 - 1:
            raise bad(f"meta.calibration.tokens = {tok!r} must be an integer 0 <= n <= {2**32 - 1} (stored as uint32)")
        rk, rv = np.asarray(self.rot_k), np.asarray(self.rot_v)
        for name, a in (("rot_k", rk), ("rot_v", rv)):
            if a.ndim not in (3, 4) or a.shape[-1] != a.shape[-2] or a.dtype.kind not in "fiu":
                raise bad(f"{name} has {a.dtype} shape {a.shape}: rotations must be float32 [n_layer, D, D] or "
                          "[n_layer, n_head_kv, D, D]")
        if rk.shape != rv.shape:
            raise bad(f"rot_k has shape {rk.shape} but rot_v {rv.shape}: both must have the same shape")
        for name, c in (("clip_k", self.clip_k), ("clip_v", self.clip_v)):
            if np.ndim(c) == 1 and np.shape(c)[0] != rk.shape[0]:
                raise bad(f"rot_k has shape {rk.shape} ({rk.shape[0]} layers) but {name} has {np.shape(c)[0]} "
                          "entries: one clip ratio per layer")
        for key in ("sink_tokens", "recent_tokens"):
            if key in m:
                try:
                    limits.check_window_tokens(m[key], f"meta.{key}")
                except ValueError as e:
                    raise bad(str(e), f"set meta.{key} in range (the default is {64 if key == 'sink_tokens' else 256}), "
                                      f"or {FILE_FIX}") from e
        try:
            if rotations:
                self.rot_k = limits.check_rotations(rk, "rot_k")
                self.rot_v = limits.check_rotations(rv, "rot_v")
            else:
                limits.check_head_dim(int(rk.shape[-1]), "rot_k: D")
            self.clip_k = limits.check_clip_ratios(self.clip_k, "clip_k")
            self.clip_v = limits.check_clip_ratios(self.clip_v, "clip_v")
            for name in MEANS:
                if getattr(self, name) is not None:
                    setattr(self, name, limits.check_centring_means(getattr(self, name), name, rk.shape[0]))
        except ValueError as e:
            raise bad(str(e)) from e
        self.check_weight_k(source)

    def validate(self, shape: ModelShape, source: str = "rotation file") -> None:
        """Raise :class:`RotationMismatch` (naming what differs and the fix) unless these
        rotations fit ``shape``: layer count, head_dim, head counts, fingerprint, array
        shapes, orthogonality, clip ratios (:mod:`oscar.core.limits`); then :meth:`check_limits`."""
        m = self.meta
        fix = "use the rotation file made for this model, or --rotations calibrate"
        for key, want in (("n_layer", shape.n_layer), ("head_dim", shape.head_dim),
                          ("n_head", shape.n_head), ("n_head_kv", shape.n_head_kv)):
            if key in m and int(m[key]) != want:
                raise RotationMismatch(f"{source} is for another model: {key} {m[key]}, the model has {want} "
                                       f"({shape.describe()}); {fix}")
        d, L, hkv = shape.head_dim, shape.n_layer, shape.n_head_kv
        ok = ((L, d, d), (L, hkv, d, d))
        for name, a in (("rot_k", self.rot_k), ("rot_v", self.rot_v)):
            if a.shape not in ok:
                raise RotationMismatch(f"{source}: {name} has shape {a.shape}, the model needs {ok[0]} or {ok[1]} "
                                       f"({shape.describe()}); {fix}")
        for name, c in (("clip_k", self.clip_k), ("clip_v", self.clip_v)):
            if np.shape(c) != (L,):
                raise RotationMismatch(f"{source}: {name} has {np.size(c)} entries, the model has {L} layers; {fix}")
            try:
                limits.check_clip_ratios(c, name, L)
            except ValueError as e:
                raise RotationMismatch(f"{source}: {e}; {fix}") from e
        try:
            limits.check_head_dim(d, "the model's head_dim")
        except ValueError as e:
            raise RotationMismatch(f"{source}: {e}: its rotations would never be used (they apply to an oscar2 "
                                   "cache only); this model cannot use oscar2, run it with another KV type") from e
        fp = m.get("fingerprint")
        if fp is not None and fp != shape.fingerprint:
            raise RotationMismatch(f"{source} was calibrated for another model (fingerprint {fp}, this model "
                                   f"{shape.fingerprint}: same shapes but different attention weights); {fix}")
        for name, a in (("rot_k", self.rot_k), ("rot_v", self.rot_v)):
            try:
                check_orthogonal(a, ORTHO_TOL_STORED, what=f"{source}: {name}")
            except ValueError as e:
                raise RotationMismatch(str(e)) from e
        self.check_limits(source)


def _unreadable(path: Path, what: str, e: Exception) -> BadRotationFile:
    reason = "the file is empty" if path.stat().st_size == 0 else f"{type(e).__name__}: {e}".rstrip(": ")
    return BadRotationFile(f"rotation file {path} is not {what} or is damaged ({reason}); {FILE_FIX}")


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, dict]:
    """``(rot_k, rot_v, clip_k, clip_v, meta JSON, {optional array: data})`` of an ``.npz``
    rotation file (no pickle)."""
    what = "an OSCAR rotation file (.npz with rot_k, rot_v, clip_k, clip_v, meta)"
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in (*ARRAYS, "meta") if k not in z.files]
            if missing:
                raise KeyError(", ".join(missing))
            arrays = [np.asarray(z[k]) for k in ARRAYS]
            optional = {k: np.asarray(z[k]) for k in OPTIONAL_ARRAYS if k in z.files}
            meta_raw = z["meta"]
            meta_s = str(meta_raw.item() if meta_raw.shape == () else meta_raw)
    except KeyError as e:
        raise BadRotationFile(f"rotation file {path} is not {what}: it has no {e.args[0]} array; {FILE_FIX}") from e
    except Exception as e:  # zipfile.BadZipFile, EOFError, zlib.error, ValueError, OSError ... from a broken file
        raise _unreadable(path, what, e) from e
    return (*arrays, meta_s, optional)


def _read_safetensors(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, dict]:
    """``(rot_k, rot_v, clip_k, clip_v, meta JSON, {optional array: data})`` of a safetensors
    rotation file."""
    what = f"an OSCAR rotation file (safetensors with {', '.join(ARRAYS)} and the header key {ST_META_KEY})"
    try:
        from safetensors import safe_open
        with safe_open(str(path), framework="np") as f:
            names = set(f.keys())
            header = f.metadata() or {}
            missing = [k for k in ARRAYS if k not in names]
            if missing:
                raise KeyError(", ".join(missing) + " array")
            if ST_META_KEY not in header:
                raise KeyError(f"{ST_META_KEY} header key")
            arrays = [np.asarray(f.get_tensor(k)) for k in ARRAYS]
            optional = {k: np.asarray(f.get_tensor(k)) for k in OPTIONAL_ARRAYS if k in names}
    except KeyError as e:
        raise BadRotationFile(f"rotation file {path} is not {what}: it has no {e.args[0]}; {FILE_FIX}") from e
    except Exception as e:  # safetensors' SafetensorError, OSError ... from a broken file
        raise _unreadable(path, what, e) from e
    return (*arrays, header[ST_META_KEY], optional)
