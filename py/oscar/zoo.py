"""Rotation files (``.npz``) and the rotation zoo.

A rotation file holds, for one model (all in llama.cpp's head layout):

- ``rot_k``, ``rot_v``: ``[L, D, D]`` (one rotation per layer) or ``[L, Hkv, D, D]``
  (per KV head); ``k' = k @ rot_k[l]`` (row vectors). float32, or float16 to halve the
  file (``save(half=True)``, ``oscar zoo add --half``): float16 rotations are made
  orthogonal again on load (:func:`oscar.rotation.nearest_orthogonal`), which moves each
  entry by about the float16 rounding (1e-4 for D = 256).
- ``clip_k``, ``clip_v``: ``[L]`` clip ratios (:func:`oscar.clip.clip_rows`).
- ``meta``: a JSON string: ``arch``, ``n_layer``, ``n_head``, ``n_head_kv``,
  ``head_dim``, ``fingerprint`` (:func:`oscar.gguf_io.model_shape`), ``per_head``,
  ``sink_tokens``, ``recent_tokens``, ``calibration`` (``data``, ``tokens``,
  ``heldout_tokens``, ``objective``), ``date``, ``model`` (file name it was made from).

The zoo is a folder with such files and ``manifest.json`` (``{"entries": [...]}``,
each entry the file's ``meta`` plus ``name`` and ``file``). Folders searched: the
one in ``$OSCAR_ZOO`` (if set) first, then the bundled ``zoo/`` of the repository.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .gguf_io import ModelShape
from .paths import ROOT
from .rotation import ORTHO_TOL_STORED, check_orthogonal, nearest_orthogonal, orthogonality_error

#: how far from orthogonal float16-stored rotations may be (their rounding gives ~3e-4 for D = 256)
ORTHO_TOL_HALF = 4e-3

BUNDLED_ZOO = ROOT / "zoo"
MANIFEST = "manifest.json"


class RotationMismatch(ValueError):
    """A rotation file does not fit the model."""


class NoZooEntry(LookupError):
    """No zoo entry for the model's fingerprint."""


class BadZoo(ValueError):
    """A zoo folder is broken (unreadable manifest, an entry whose file is missing)."""


@dataclass
class Rotations:
    """Calibrated rotations and clip ratios of one model (see the module docstring)."""
    rot_k: np.ndarray
    rot_v: np.ndarray
    clip_k: np.ndarray
    clip_v: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def per_head(self) -> bool:
        return self.rot_k.ndim == 4

    def save(self, path: str | Path, half: bool = False) -> None:
        """Write an ``.npz``: the rotations as float32, or float16 with ``half`` (half the
        size; restored to orthogonal on :meth:`load`), the clip ratios as float32, the JSON meta."""
        rt = np.float16 if half else np.float32
        np.savez_compressed(Path(path), rot_k=self.rot_k.astype(rt), rot_v=self.rot_v.astype(rt),
                            clip_k=np.asarray(self.clip_k, np.float32), clip_v=np.asarray(self.clip_v, np.float32),
                            meta=np.array(json.dumps(self.meta, sort_keys=True)))

    @staticmethod
    def load(path: str | Path) -> "Rotations":
        """Read an ``.npz`` written by :meth:`save` (float16 rotations made orthogonal again);
        a clear error for anything else."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"rotation file {path}: no such file")
        try:
            with np.load(path, allow_pickle=False) as z:
                rk, rv = z["rot_k"], z["rot_v"]
                clip_k, clip_v = z["clip_k"].astype(np.float32), z["clip_v"].astype(np.float32)
                meta = json.loads(str(z["meta"]))
        except (KeyError, ValueError, OSError) as e:
            raise ValueError(f"{path} is not an OSCAR rotation file (.npz with rot_k, rot_v, clip_k, clip_v, meta): {e}") from e
        rots = []
        for name, a in (("rot_k", rk), ("rot_v", rv)):
            if a.dtype == np.float16:
                # only the rounding is undone: a matrix that was not a rotation stays refused
                err = orthogonality_error(a) if np.all(np.isfinite(a)) else float("inf")
                if err > ORTHO_TOL_HALF:
                    raise RotationMismatch(f"{path}: {name} (float16) is not orthogonal even to float16 rounding "
                                           f"(max |RᵀR - I| = {err:.3g} > {ORTHO_TOL_HALF:g}): recompute it with "
                                           "--rotations calibrate")
                a = nearest_orthogonal(a)
            rots.append(a.astype(np.float32))
        return Rotations(rots[0], rots[1], clip_k, clip_v, meta)

    def validate(self, shape: ModelShape, source: str = "rotation file") -> None:
        """Raise :class:`RotationMismatch` (naming what differs and the fix) unless these
        rotations fit ``shape``: layer count, head_dim, head counts, fingerprint, array
        shapes, orthogonality, clip ratios in [0, 1]."""
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
            if c.shape != (L,):
                raise RotationMismatch(f"{source}: {name} has {c.size} entries, the model has {L} layers; {fix}")
            if not np.all((c >= 0) & (c <= 1)):
                raise RotationMismatch(f"{source}: {name} has ratios outside [0, 1]; {fix}")
        fp = m.get("fingerprint")
        if fp is not None and fp != shape.fingerprint:
            raise RotationMismatch(f"{source} was calibrated for another model (fingerprint {fp}, this model "
                                   f"{shape.fingerprint}: same shapes but different attention weights); {fix}")
        for name, a in (("rot_k", self.rot_k), ("rot_v", self.rot_v)):
            try:
                check_orthogonal(a, ORTHO_TOL_STORED, what=f"{source}: {name}")
            except ValueError as e:
                raise RotationMismatch(str(e)) from e


def zoo_dirs() -> list[Path]:
    """Zoo folders in search order: ``$OSCAR_ZOO`` (if set), then the bundled ``zoo/``."""
    out = []
    if os.environ.get("OSCAR_ZOO"):
        out.append(Path(os.environ["OSCAR_ZOO"]))
    out.append(BUNDLED_ZOO)
    return out


def entries(dirs: list[Path] | None = None) -> list[tuple[Path, dict]]:
    """``(folder, entry)`` for every manifest entry of every zoo folder."""
    out = []
    for d in dirs if dirs is not None else zoo_dirs():
        mf = d / MANIFEST
        if mf.is_file():
            try:
                data = json.loads(mf.read_text())
                items = data["entries"]
                if not isinstance(items, list) or not all(isinstance(e, dict) and "file" in e for e in items):
                    raise ValueError("'entries' must be a list of objects with a 'file'")
            except (ValueError, KeyError, TypeError) as e:
                raise BadZoo(f"zoo manifest {mf} is not readable ({e}): fix it, or remove it "
                             f"(`oscar zoo add` writes a new one)") from e
            for e in items:
                out.append((d, e))
    return out


def find(shape: ModelShape, per_head: bool | None = None) -> tuple[Path, dict]:
    """The zoo file for ``shape`` (by fingerprint; with ``per_head`` set, of that kind).
    Raises :class:`NoZooEntry` saying to use ``--rotations calibrate``."""
    hits = [(d, e) for d, e in entries() if e.get("fingerprint") == shape.fingerprint]
    if per_head is not None:
        hits = [(d, e) for d, e in hits if bool(e.get("per_head")) == per_head]
    if not hits:
        kind = "" if per_head is None else (" per-head" if per_head else " per-layer")
        raise NoZooEntry(f"no{kind} zoo entry for this model (fingerprint {shape.fingerprint}, {shape.describe()}) "
                         f"in {', '.join(map(str, zoo_dirs()))}: use --rotations calibrate "
                         "(and add the result to a zoo with --save-rotations and OSCAR_ZOO)")
    d, e = hits[0]
    f = d / e["file"]
    if not f.is_file():
        raise BadZoo(f"zoo manifest {d / MANIFEST} lists {e['file']} for this model (entry '{e.get('name', '?')}'), "
                     f"but {f} is missing: restore the file, or remove the entry from the manifest")
    return f, e


def add(folder: str | Path, name: str, rot: Rotations, half: bool = False) -> Path:
    """Save ``rot`` as ``folder/name.npz`` (float16 rotations with ``half``) and add (or
    replace) its manifest entry."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / f"{name}.npz"
    rot.save(f, half=half)
    mf = folder / MANIFEST
    data = json.loads(mf.read_text()) if mf.is_file() else {"entries": []}
    data["entries"] = [e for e in data["entries"] if e.get("name") != name]
    data["entries"].append({"name": name, "file": f.name, **rot.meta})
    data["entries"].sort(key=lambda e: e["name"])
    mf.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return f


def format_list() -> str:
    """A table of all zoo entries (what ``oscar zoo list`` prints)."""
    rows = [("name", "arch", "layers", "heads q/kv", "head_dim", "per-head", "fingerprint", "calibration", "date", "folder")]
    for d, e in entries():
        c = e.get("calibration", {})
        rows.append((e.get("name", "?"), e.get("arch", "?"), str(e.get("n_layer", "?")),
                     f"{e.get('n_head', '?')}/{e.get('n_head_kv', '?')}", str(e.get("head_dim", "?")),
                     "yes" if e.get("per_head") else "no", e.get("fingerprint", "?"),
                     f"{c.get('tokens', '?')} tok of {Path(str(c.get('data', '?'))).name}",
                     str(e.get("date", "?"))[:10], str(d)))
    if len(rows) == 1:
        return "no zoo entries in " + ", ".join(map(str, zoo_dirs()))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)
