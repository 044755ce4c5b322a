"""The rotation zoo: folders of rotation files (:mod:`oscar.core.rotfile`) found by model fingerprint.

The zoo is a folder with such files and ``manifest.json`` (``{"entries": [...]}``,
each entry the file's ``meta`` plus ``name`` and ``file``). Folders searched: the
one in ``$OSCAR_ZOO`` (if set) first, then the bundled ``zoo/`` of the repository.
"""
from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ..core.gguf_io import ModelShape
from ..core.paths import ROOT
from ..core.rotfile import Rotations

BUNDLED_ZOO = ROOT / "zoo"
MANIFEST = "manifest.json"
#: OSCAR_ZOO values already warned about (once per process each)
_WARNED_ZOO: set[str] = set()


class NoZooEntry(LookupError):
    """No zoo entry for the model's fingerprint."""


class BadZoo(ValueError):
    """A zoo folder is broken (unreadable manifest, an entry whose file is missing)."""



def zoo_dirs() -> list[Path]:
    """Zoo folders in search order: ``$OSCAR_ZOO`` (if set), then the bundled ``zoo/``. An
    ``OSCAR_ZOO`` that is not a folder is left out, with a warning on stderr (once)."""
    import sys
    out = []
    env = os.environ.get("OSCAR_ZOO")
    if env:
        p = Path(env)
        if p.is_dir():
            out.append(p)
        elif env not in _WARNED_ZOO:
            _WARNED_ZOO.add(env)
            what = "is not a folder" if p.exists() else "does not exist"
            print(f"oscar: warning: OSCAR_ZOO={env} {what}, so only the bundled zoo ({BUNDLED_ZOO}) is searched: "
                  f"create the folder (mkdir -p {shlex.quote(env)}), correct the path, or unset OSCAR_ZOO",
                  file=sys.stderr)
    out.append(BUNDLED_ZOO)
    return out


def _read_manifest(d: Path) -> list[dict]:
    """The entries of ``d/manifest.json`` ([] without one); :class:`BadZoo` if it is unreadable."""
    mf = d / MANIFEST
    if not mf.is_file():
        return []
    try:
        data = json.loads(mf.read_text())
        if not isinstance(data, dict):
            raise ValueError("the manifest must be a JSON object {\"entries\": [...]}")
        items = data["entries"]
        if not isinstance(items, list) or not all(isinstance(e, dict) and isinstance(e.get("file"), str)
                                                  for e in items):
            raise ValueError("'entries' must be a list of objects with a 'file'")
    except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError) as e:
        raise BadZoo(f"zoo manifest {mf} is not readable ({e}): fix it, or remove it "
                     f"(`oscar zoo add` writes a new one)") from e
    return items


def entries(dirs: list[Path] | None = None) -> list[tuple[Path, dict]]:
    """``(folder, entry)`` for every manifest entry of every zoo folder."""
    out = []
    for d in dirs if dirs is not None else zoo_dirs():
        out.extend((d, e) for e in _read_manifest(d))
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


def _atomic_write_text(path: Path, text: str) -> None:
    from ..core import atomic
    atomic.write_text(path, text, "oscar", "zoo manifest")


def add(folder: str | Path, name: str, rot: Rotations, half: bool = False, suffix: str = ".npz") -> Path:
    """Save ``rot`` as ``folder/name`` + ``suffix`` (``.npz`` or ``.safetensors``; float16
    rotations with ``half``) and add (or replace) its manifest entry. Checks the rotations (:meth:`Rotations.check_limits`), the
    name and the manifest before writing anything; both files are written atomically."""
    folder = Path(folder)
    if not name or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"zoo entry name {name!r}: use a plain file name such as my-model-7b "
                         "(no folders, not starting with '.')")
    rot.check_limits(f"rotations for zoo entry '{name}'")
    items = _read_manifest(folder)  # a broken manifest is refused before the file is written
    folder.mkdir(parents=True, exist_ok=True)
    if suffix not in (".npz", ".safetensors"):
        raise ValueError(f"rotation file suffix {suffix!r}: use .safetensors or .npz")
    f = rot.save(folder / f"{name}{suffix}", half=half)
    items = [e for e in items if e.get("name") != name]
    items.append({"name": name, "file": f.name, **rot.meta})
    items.sort(key=lambda e: str(e.get("name", "")))
    _atomic_write_text(folder / MANIFEST, json.dumps({"entries": items}, indent=1, sort_keys=True) + "\n")
    return f


def check_entry(d: Path, e: dict) -> str | None:
    """What is wrong with zoo entry ``e`` of folder ``d`` (its file missing, unreadable or out
    of the limits), or None."""
    f = d / e["file"]
    if not f.is_file():
        return f"{f} is missing: restore the file, or remove the entry from {d / MANIFEST}"
    try:
        Rotations.load(f, restore=False)
    except (ValueError, OSError) as err:
        return str(err)
    return None


def list_rows(check_files: bool = True) -> tuple[list[tuple[str, ...]], list[str]]:
    """The rows of ``oscar zoo list`` (header first) and the problems found: a folder whose
    manifest is unreadable, an entry whose file is missing or broken (with ``check_files``).
    Problems do not stop the listing: every other folder and entry is still listed."""
    rows = [("name", "arch", "layers", "heads q/kv", "head_dim", "per-head", "fingerprint", "calibration", "date",
             "folder", "status")]
    problems = []
    for d in zoo_dirs():
        try:
            items = _read_manifest(d)
        except BadZoo as err:
            problems.append(str(err))
            continue
        for e in items:
            c = e.get("calibration")
            c = c if isinstance(c, dict) else {}
            status = "ok"
            if check_files:
                why = check_entry(d, e)
                if why is not None:
                    status = "BROKEN"
                    problems.append(f"zoo entry '{e.get('name', '?')}' in {d / MANIFEST}: {why}")
            rows.append(tuple(str(x) for x in (
                e.get("name", "?"), e.get("arch", "?"), e.get("n_layer", "?"),
                f"{e.get('n_head', '?')}/{e.get('n_head_kv', '?')}", e.get("head_dim", "?"),
                "yes" if e.get("per_head") else "no", e.get("fingerprint", "?"),
                f"{c.get('tokens', '?')} tok of {Path(str(c.get('data', '?'))).name}",
                str(e.get("date", "?"))[:10], d, status)))
    return rows, problems


def format_list(check_files: bool = True) -> str:
    """A table of all zoo entries (what ``oscar zoo list`` prints). Broken folders and entries
    are listed as far as they can be; :func:`list_rows` says what is wrong."""
    return format_rows(list_rows(check_files)[0])


def format_rows(rows: list[tuple[str, ...]]) -> str:
    """The table of :func:`list_rows`' rows, columns aligned."""
    if len(rows) == 1:
        return "no zoo entries in " + ", ".join(map(str, zoo_dirs()))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)


#: the README a pushed zoo folder carries: {repo}, {table}, {n}, {example}
_CARD = """---
license: apache-2.0
library_name: oscar-kv
tags:
- kv-cache
- quantization
- llama.cpp
- oscar
---

# OSCAR KV-cache rotations

Calibrated rotations and clip ratios for OSCAR's 2-bit KV cache (`oscar2`) in llama.cpp:
{n} model(s), one safetensors file each, listed in `manifest.json`. Each file holds, in
llama.cpp's head layout, `rot_k` and `rot_v` (`[n_layer, D, D]`, or `[n_layer, n_head_kv, D, D]`
per KV head), `clip_k`, `clip_v` (`[n_layer]`) and, where calibrated with a key weighting,
`weight_k` (W, keys use `W @ rot_k` and queries `W^-1 @ rot_k`); its header key `oscar.meta` is the JSON
record of the model and the calibration. The files read with `safetensors.numpy` and
`safetensors.torch` alike.

| entry | file | architecture | layers | heads q/kv | head_dim | per head | fingerprint | calibration |
|---|---|---|---|---|---|---|---|---|
{table}

## Use

```sh
oscar-convert MODEL.gguf --rotations hf:{repo} -o MODEL-oscar.gguf      # the entry for MODEL
oscar-convert MODEL.gguf --rotations hf:{repo}:{example} -o MODEL-oscar.gguf
llama-server -m MODEL-oscar.gguf -ctk oscar2 -ctv oscar2
```

The entry is chosen by the fingerprint of the model's attention weights, so a rotation is
never applied to a model it was not made for; a model without an entry here is calibrated
with `oscar-convert MODEL.gguf --rotations calibrate`.
"""


def push_folder(out: str | Path, repo: str = "OWNER/REPO", names: list[str] | None = None,
                half: bool = False) -> list[Path]:
    """Write ``out``, a folder ready to upload to a Hugging Face Hub repository: every zoo
    entry (or those named in ``names``) as ``NAME.safetensors`` (float16 rotations with
    ``half``), ``manifest.json`` and a model card ``README.md`` naming ``repo``. Each entry
    is loaded and checked first; ``out`` must not exist or be empty, and is written as a
    temporary folder beside it, renamed at the end. Returns the files written."""
    from ..core import atomic
    from . import hub
    hub.check_repo_id(repo, "--repo")
    out = Path(out)
    if atomic.check_dir_output(out) and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not an empty folder: choose a new folder")
    hits: dict[str, tuple[Path, dict]] = {}
    for d, e in entries():
        hits.setdefault(str(e.get("name", Path(e["file"]).stem)), (d, e))  # the first folder wins, as in find()
    if names:
        missing = [n for n in names if n not in hits]
        if missing:
            raise NoZooEntry(f"no zoo entry named {', '.join(missing)} in {', '.join(map(str, zoo_dirs()))} "
                             f"(entries: {', '.join(sorted(hits)) or 'none'})")
        hits = {n: hits[n] for n in names}
    if not hits:
        raise NoZooEntry(f"no zoo entries in {', '.join(map(str, zoo_dirs()))}: nothing to push")
    loaded = []
    for name, (d, e) in sorted(hits.items()):
        why = check_entry(d, e)
        if why is not None:
            raise BadZoo(f"zoo entry '{name}' in {d / MANIFEST}: {why}")
        loaded.append((name, e, Rotations.load(d / e["file"])))
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.Cleanup() as cleanup:
        tmp = cleanup.add(atomic.create_temp_dir(out, "oscar"))
        items, rows = [], []
        for name, e, rot in loaded:
            f = rot.save(tmp / f"{name}.safetensors", half=half)
            items.append({**rot.meta, "name": name, "file": f.name})
            c = rot.meta.get("calibration", {}) if isinstance(rot.meta.get("calibration"), dict) else {}
            m = rot.meta
            rows.append(f"| {name} | {f.name} | {m.get('arch', '?')} | {m.get('n_layer', '?')} | "
                        f"{m.get('n_head', '?')}/{m.get('n_head_kv', '?')} | {m.get('head_dim', '?')} | "
                        f"{'yes' if rot.per_head else 'no'} | {m.get('fingerprint', '?')} | "
                        f"{c.get('tokens', '?')} tokens of {Path(str(c.get('data', '?'))).name} |")
        (tmp / MANIFEST).write_text(json.dumps({"entries": items}, indent=1, sort_keys=True) + "\n")
        (tmp / "README.md").write_text(_CARD.format(repo=repo, table="\n".join(rows), n=len(items),
                                                    example=items[0]["file"]))
        if atomic.check_dir_output(out):
            out.rmdir()  # empty (checked above)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o777 & ~mask)  # a folder as mkdir makes it (the temporary one is private)
        os.replace(tmp, out)
        cleanup.discard(tmp)
    return sorted(out.iterdir())
