"""Hardening of the converter side: bad rotation files, the shared limits (py/oscar/limits.json),
atomic writes under signals, and oscar.load's head-size check.

Everything runs on a tiny synthetic model (py/oscar/bench/synthetic.py, 2 layers, head_dim 64): no
network, no downloaded model. The signal tests slow the write down with the test-only hook
OSCAR_TEST_WRITE_DELAY (seconds slept after each tensor, see oscar.core.gguf_io.write_oscar_gguf).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oscar import cli
from oscar.bench import synthetic
from oscar.calib import zoo
from oscar.core import atomic, gguf_io, limits, paths, rotfile
from oscar.core.rotation import hadamard

gguf = pytest.importorskip("gguf")

PART_GLOB = ".{}.oscar-convert-*.part"


# ----------------------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return synthetic.write(tmp_path_factory.mktemp("model") / "tiny.gguf", synthetic.GEOMETRIES["tiny-hd64"], "f32")


@pytest.fixture(scope="module")
def shape(model):
    return gguf_io.model_shape(model)


def rotations_for(shape, **over) -> rotfile.Rotations:
    L, d = shape.n_layer, shape.head_dim
    meta = {"arch": shape.arch, "n_layer": L, "n_head": shape.n_head, "n_head_kv": shape.n_head_kv, "head_dim": d,
            "fingerprint": shape.fingerprint, "per_head": False, "sink_tokens": 64, "recent_tokens": 256,
            "calibration": {"data": "test", "tokens": 1, "objective": "attention-output test"}}
    meta.update(over.pop("meta", {}))
    r = rotfile.Rotations(np.stack([hadamard(d)] * L).astype(np.float32), np.stack([hadamard(d)] * L).astype(np.float32),
                      np.full(L, 0.96, np.float32), np.full(L, 0.92, np.float32), meta)
    for k, v in over.items():
        setattr(r, k, v)
    return r


def raw_npz(path: Path, r: rotfile.Rotations, meta=None, **arrays) -> None:
    """An npz as Rotations.save writes it, but with any array or meta replaced (no checks)."""
    m = r.meta if meta is None else meta
    d = {"rot_k": r.rot_k, "rot_v": r.rot_v, "clip_k": r.clip_k, "clip_v": r.clip_v,
         "meta": m if isinstance(m, np.ndarray) else np.array(json.dumps(m))}
    d.update(arrays)
    np.savez(path, **{k: v for k, v in d.items() if v is not None})


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """name -> (sha256, mtime_ns) of everything in ``folder`` (hidden files included)."""
    out = {}
    for p in sorted(folder.iterdir()):
        out[p.name] = (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir", p.stat().st_mtime_ns)
    return out


def convert_cmd(*args: str) -> list[str]:
    """oscar-convert as a program (argv from the command line, as the console script runs it)."""
    return [sys.executable, "-c", "import sys; from oscar.cli import convert_main; sys.exit(convert_main())", *args]


def run_convert(args: list[str], capsys) -> tuple[int, str]:
    rc = cli.convert_main(args + ["-q"])
    return rc, capsys.readouterr().err


# ----------------------------------------------------------------------------- 1. bad rotation files

def _truncated(p, shape):
    rotations_for(shape).save(p)
    b = p.read_bytes()
    p.write_bytes(b[:len(b) // 2])


def _corrupt(p, shape):
    rotations_for(shape).save(p)
    b = bytearray(p.read_bytes())
    b[100:300] = bytes(200)  # inside the first member's compressed data: its CRC fails
    p.write_bytes(bytes(b))


_UNSET = object()


def _with(meta=_UNSET, **arrays):
    """A maker of a file as Rotations.save writes it, with ``meta`` (an object, a callable of
    the good Rotations, or a ready np.array) and arrays replaced (None: left out)."""
    def make(p, shape):
        r = rotations_for(shape)
        m = r.meta if meta is _UNSET else (meta(r) if callable(meta) else meta)
        raw_npz(p, r, m, **{k: (v(r) if callable(v) else v) for k, v in arrays.items()})
    return make


def _npy(p, shape):
    with open(p, "wb") as f:
        np.save(f, np.eye(3))


def _meta(**kv):
    return _with(meta=lambda r: {**r.meta, **kv})


def _scaled(r):
    a = r.rot_v.copy()
    a[0] *= 10
    return a


def _nan_rot(r):
    a = r.rot_k.copy()
    a[1, 3, 5] = np.nan
    return a


def _clip(side, layer, value):
    def f(r):
        c = (r.clip_k if side == "k" else r.clip_v).copy()
        c[layer] = value
        return c
    return _with(**{f"clip_{side}": f})


BAD_FILES = [
    # id, how to make it, what the message must name
    ("truncated", _truncated, ["is damaged", "BadZipFile"]),
    ("corrupt", _corrupt, ["is damaged"]),
    ("empty", lambda p, s: p.write_bytes(b""), ["the file is empty"]),
    ("not-zip", lambda p, s: p.write_bytes(b"hello, not a zip"), ["not an OSCAR rotation file"]),
    ("npy-not-npz", _npy, ["not an OSCAR rotation file"]),
    ("meta-list", _with(meta=[1, 2, 3]), ["meta must be a JSON object", "JSON list"]),
    ("meta-not-json", _with(meta=np.array("{oops")), ["meta is not JSON"]),
    ("meta-calibration-str", _meta(calibration="x"), ["meta.calibration"]),
    ("meta-n-layer-str", _meta(n_layer="two"), ["meta.n_layer"]),
    ("no-clip-v", _with(clip_v=None), ["it has no clip_v array"]),
    ("sink-negative", _meta(sink_tokens=-1), ["meta.sink_tokens = -1", "0 <= n <= 2147483647"]),
    ("sink-uint32-max", _meta(sink_tokens=2**32 - 1), ["meta.sink_tokens = 4294967295", "0 <= n <= 2147483647"]),
    ("recent-int32-overflow", _meta(recent_tokens=2**31), ["meta.recent_tokens = 2147483648"]),
    ("recent-float", _meta(recent_tokens=256.5), ["meta.recent_tokens = 256.5"]),
    ("calib-tokens-negative", _meta(calibration={"tokens": -5}), ["meta.calibration.tokens = -5"]),
    ("clip-0", _clip("k", 1, 0.0), ["clip_k[1] (layer 1) = 0", "0 < r <= 1"]),
    ("clip-negative", _clip("v", 0, -0.5), ["clip_v[0] (layer 0) = -0.5"]),
    ("clip-1.5", _clip("v", 0, 1.5), ["clip_v[0] (layer 0) = 1.5", "0 < r <= 1"]),
    ("clip-nan", _clip("k", 0, np.nan), ["clip_k[0] (layer 0) = nan", "finite"]),
    ("clip-inf", _clip("k", 1, np.inf), ["clip_k[1] (layer 1) = inf"]),
    ("clip-2d", _with(clip_k=np.full((2, 2), 0.9, np.float32)), ["clip_k must be a 1-D array"]),
    ("rotation-nan", _with(rot_k=_nan_rot), ["rot_k[1] (layer 1)", "NaN or Inf"]),
    ("rotation-scaled-10", _with(rot_v=_scaled), ["rot_v[0] (layer 0)", "not orthogonal", "<= 0.001"]),
    ("rotation-not-square", _with(rot_k=lambda r: r.rot_k[:, :, :32].copy(), rot_v=lambda r: r.rot_v[:, :, :32].copy()),
     ["rot_k has float32 shape (2, 64, 32)"]),
    ("rotation-2d", _with(rot_k=lambda r: r.rot_k[0], rot_v=lambda r: r.rot_v[0]), ["rot_k has float32 shape (64, 64)"]),
    ("rotation-k-v-differ", _with(rot_k=lambda r: np.stack([hadamard(32)] * 2).astype(np.float32)),
     ["rot_k has shape (2, 32, 32) but rot_v (2, 64, 64)"]),
    ("rotation-head-32", _with(rot_k=lambda r: np.stack([hadamard(32)] * 2).astype(np.float32),
                               rot_v=lambda r: np.stack([hadamard(32)] * 2).astype(np.float32)),
     ["D = 32", "multiple of 64"]),
    ("rotation-3-layers", _with(rot_k=lambda r: np.concatenate([r.rot_k, r.rot_k[:1]]),
                                rot_v=lambda r: np.concatenate([r.rot_v, r.rot_v[:1]])),
     ["rot_k has shape (3, 64, 64) (3 layers) but clip_k has 2 entries"]),
    ("clip-3-layers", _with(clip_k=np.full(3, 0.9, np.float32)), ["clip_k has 3 entries: one clip ratio per layer"]),
    ("rotation-float16-scaled", _with(rot_k=lambda r: (r.rot_k * 1.05).astype(np.float16)),
     ["rot_k (float16) is not orthogonal"]),
    ("rotation-object", _with(rot_k=np.array([None, 1], dtype=object)), ["is damaged"]),
]


@pytest.mark.parametrize("make,words", [(m, w) for _, m, w in BAD_FILES], ids=[i for i, _, _ in BAD_FILES])
def test_bad_rotation_file_refused(model, shape, tmp_path, capsys, make, words):
    """Each bad file: exit 2, `oscar-convert: error:` naming the file and the key, no output,
    no temporary, the input files untouched."""
    f = tmp_path / "rot.npz"
    make(f, shape)
    out = tmp_path / "out.gguf"
    before = snapshot(tmp_path)
    model_before = snapshot(model.parent)
    rc, err = run_convert([str(model), "--rotations", str(f), "-o", str(out)], capsys)
    assert rc == 2, err
    assert err.startswith("oscar-convert: error: ") and err.count("\n") == 1, err
    assert str(f) in err, err
    for w in words:
        assert w in err, err
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before  # no output, no temporary, the rotation file as it was
    assert snapshot(model.parent) == model_before


@pytest.mark.parametrize("case", ["truncated", "meta-list", "sink-negative"])
def test_bad_rotation_file_from_the_command_line(model, shape, tmp_path, case):
    """The same through the program (exit status 2, one line, no traceback)."""
    make = {i: m for i, m, _ in BAD_FILES}[case]
    f = tmp_path / "rot.npz"
    make(f, shape)
    before = snapshot(tmp_path)
    p = subprocess.run(convert_cmd(str(model), "--rotations", str(f), "-o", str(tmp_path / "o.gguf"), "-q"),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("oscar-convert: error: rotation file ") and "Traceback" not in p.stderr, p.stderr
    assert snapshot(tmp_path) == before


def test_good_rotation_file_converts(model, shape, tmp_path, capsys):
    f = tmp_path / "rot.npz"
    rotations_for(shape).save(f)
    out = tmp_path / "out.gguf"
    rc, err = run_convert([str(model), "--rotations", str(f), "-o", str(out)], capsys)
    assert rc == 0, err
    r = gguf.GGUFReader(str(out))
    # stored as the limits say: uint32 windows, one float32 clip ratio per layer
    for key in limits.WINDOW_TOKENS_KEYS:
        assert r.fields[key].types == [gguf.GGUFValueType.UINT32]
    for key in limits.CLIP_RATIO_KEYS:
        assert r.fields[key].types == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.FLOAT32]
        assert len(r.fields[key].contents()) == shape.n_layer
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.gguf", "rot.npz"]


def test_window_limits_inclusive(model, shape, tmp_path, capsys):
    """0 and 2147483647 are allowed and read back as written (no wrap to negative)."""
    f = tmp_path / "rot.npz"
    rotations_for(shape, meta={"sink_tokens": 0, "recent_tokens": limits.WINDOW_TOKENS_MAX}).save(f)
    out = tmp_path / "out.gguf"
    rc, err = run_convert([str(model), "--rotations", str(f), "-o", str(out)], capsys)
    assert rc == 0, err
    r = gguf.GGUFReader(str(out))
    assert r.fields["oscar.sink_tokens"].contents() == 0
    assert r.fields["oscar.recent_tokens"].contents() == 2147483647


@pytest.mark.parametrize("kw,words", [
    ({"clip_k": np.array([0.5, 0.0], np.float32)}, ["oscar.clip_k[1] (layer 1) = 0"]),
    ({"clip_v": np.array([1.0000001, 0.5])}, ["oscar.clip_v[0] (layer 0) = 1"]),
    ({"sink_tokens": 2**32 - 1}, ["oscar.sink_tokens = 4294967295"]),
    ({"recent_tokens": -1}, ["oscar.recent_tokens = -1"]),
    ({"calib_tokens": 2**32}, ["oscar.calibration.tokens = 4294967296"]),
    ({"rot_k": "nan"}, ["blk.0.attn_k_oscar_rot", "NaN"]),
    ({"rot_v": "scaled"}, ["blk.1.attn_v_oscar_rot", "not orthogonal"]),
])
def test_writer_refuses_out_of_limits(model, shape, tmp_path, kw, words):
    """The writer itself (write_fields, under write_oscar_gguf: the calibrate path and any caller) refuses
    before writing."""
    r = rotations_for(shape)
    args = dict(rot_k=r.rot_k.copy(), rot_v=r.rot_v.copy(), clip_k=r.clip_k, clip_v=r.clip_v, sink_tokens=64,
                recent_tokens=256, calib_data="t", calib_tokens=1, objective="o")
    if kw.get("rot_k") == "nan":
        args["rot_k"][0, 0, 0] = np.nan
    elif kw.get("rot_v") == "scaled":
        args["rot_v"][1] *= 1.01
    else:
        args.update(kw)
    with pytest.raises(ValueError) as e:
        gguf_io.write_fields(model, tmp_path / "o.gguf", progress=False, **args)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_head_dim_oscar2_cannot_hold_refused(tmp_path, capsys):
    m = synthetic.write(tmp_path / "hd80.gguf", synthetic.GEOMETRIES["tiny-hd80"], "f32")
    s = gguf_io.model_shape(m)
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((s.n_layer, 80, 80)))
    r = rotfile.Rotations(q.astype(np.float32), q.astype(np.float32), np.full(s.n_layer, 0.9, np.float32),
                      np.full(s.n_layer, 0.9, np.float32), {"n_layer": s.n_layer, "head_dim": 80})
    raw_npz(tmp_path / "r80.npz", r)
    rc, err = run_convert([str(m), "--rotations", str(tmp_path / "r80.npz"), "-o", str(tmp_path / "o.gguf")], capsys)
    assert rc == 2 and "D = 80" in err and "multiple of 64" in err, err
    assert not (tmp_path / "o.gguf").exists()


def test_other_errors_exit_2(model, tmp_path, capsys):
    rc, err = run_convert([str(model), "--rotations", str(tmp_path / "missing.npz"), "-o", str(tmp_path / "o.gguf")],
                          capsys)
    assert rc == 2 and "no such file" in err
    rc, err = run_convert([str(model), "--rotations", str(tmp_path), "-o", str(tmp_path / "o.gguf")], capsys)
    assert rc == 2 and "is a folder" in err
    rc, err = run_convert([str(model), "--rotations", "zoo", "-o", str(tmp_path / "nope" / "o.gguf")], capsys)
    assert rc == 2 and "does not exist: create it first" in err


# ----------------------------------------------------------------------------- the zoo commands

@pytest.fixture
def user_zoo(tmp_path, monkeypatch):
    """$OSCAR_ZOO in tmp_path/user-zoo; the bundled zoo replaced by tmp_path/bundled."""
    monkeypatch.setattr(zoo, "BUNDLED_ZOO", tmp_path / "bundled")
    d = tmp_path / "user-zoo"
    monkeypatch.setenv("OSCAR_ZOO", str(d))
    return d


def test_zoo_add_refuses_bad_file(shape, user_zoo, tmp_path, capsys):
    for i, make, words in BAD_FILES:
        f = tmp_path / f"{i}.npz"
        make(f, shape)
        assert cli.oscar_main(["zoo", "add", "x", str(f), "--dir", str(user_zoo)]) == 1, i
        err = capsys.readouterr().err
        assert err.startswith("oscar zoo add: error: ") and "Traceback" not in err, (i, err)
        assert not user_zoo.exists(), i  # nothing written


def test_zoo_add_broken_manifest_writes_nothing(shape, user_zoo, tmp_path, capsys):
    user_zoo.mkdir()
    (user_zoo / "manifest.json").write_text("[1, 2]")
    rotations_for(shape).save(tmp_path / "r.npz")
    assert cli.oscar_main(["zoo", "add", "x", str(tmp_path / "r.npz")]) == 1
    assert "is not readable" in capsys.readouterr().err
    assert sorted(p.name for p in user_zoo.iterdir()) == ["manifest.json"]
    assert cli.oscar_main(["zoo", "add", "../escape", str(tmp_path / "r.npz")]) == 1
    assert "plain file name" in capsys.readouterr().err


def test_zoo_list_reports_broken_and_goes_on(shape, user_zoo, tmp_path, capsys):
    zoo.add(user_zoo, "good", rotations_for(shape))
    zoo.add(user_zoo, "broken", rotations_for(shape)).write_bytes(b"PK\x03\x04 truncated")
    zoo.add(user_zoo, "gone", rotations_for(shape)).unlink()
    # the other folder's manifest is unreadable: reported, the first folder still listed
    (tmp_path / "bundled").mkdir()
    (tmp_path / "bundled" / "manifest.json").write_text('{"entries": [{"file": 3}]}')
    assert cli.oscar_main(["zoo", "list"]) == 1
    cap = capsys.readouterr()
    lines = {ln.split()[0]: ln for ln in cap.out.splitlines()[1:]}
    assert set(lines) == {"good", "broken", "gone"}
    assert lines["good"].endswith("ok") and lines["broken"].endswith("BROKEN") and lines["gone"].endswith("BROKEN")
    assert "broken.npz" in cap.err and "is damaged" in cap.err
    assert "gone.npz is missing" in cap.err
    assert f"zoo manifest {tmp_path / 'bundled' / 'manifest.json'} is not readable" in cap.err
    assert "Traceback" not in cap.err


def test_zoo_list_odd_manifest_values(user_zoo, capsys):
    user_zoo.mkdir()
    (user_zoo / "manifest.json").write_text(json.dumps({"entries": [{"file": "a.npz", "name": "a", "calibration": [1]}]}))
    assert cli.oscar_main(["zoo", "list"]) == 1  # a.npz missing: reported, no crash on calibration: [1]
    assert "a.npz is missing" in capsys.readouterr().err


def test_convert_from_broken_zoo_file(model, shape, user_zoo, tmp_path, capsys):
    zoo.add(user_zoo, "junk", rotations_for(shape)).write_bytes(b"")
    rc, err = run_convert([str(model), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert rc == 2 and "junk.npz for this model is broken" in err and "the file is empty" in err, err


def test_sim_calibration_bad_file(model, tmp_path):
    from oscar.sim import simulate as sim
    (tmp_path / "r.npz").write_bytes(b"")
    with pytest.raises(ValueError, match="the file is empty"):
        sim.load_calibration(tmp_path / "r.npz", model)


# ----------------------------------------------------------------------------- 2. the shared limits

def test_limits_json_values():
    """The numbers the C++ side mirrors (it reads the same file)."""
    j = json.loads((Path(limits.__file__).parents[1] / "limits.json").read_text())  # py/oscar/limits.json
    assert j["clip_ratio_min_exclusive"] == 0 and j["clip_ratio_max"] == 1
    assert j["window_tokens_min"] == 0 and j["window_tokens_max"] == 2147483647 == 2**31 - 1
    assert j["rotation_orthogonality_tol"] == 1e-3
    assert j["oscar2_block"] == 64
    assert j["clip_ratio_dtype"] == "float32" and j["rotation_dtype"] == "float32" and j["window_tokens_dtype"] == "uint32"
    assert j["clip_ratio_keys"] == ["oscar.clip_k", "oscar.clip_v"]
    assert j["window_tokens_keys"] == ["oscar.sink_tokens", "oscar.recent_tokens"]
    assert j["rotation_tensors"] == [gguf_io.ROT_K, gguf_io.ROT_V]
    assert (limits.CLIP_RATIO_MIN_EXCLUSIVE, limits.CLIP_RATIO_MAX, limits.WINDOW_TOKENS_MAX,
            limits.ROTATION_ORTHOGONALITY_TOL, limits.OSCAR2_BLOCK) == (0.0, 1.0, 2147483647, 1e-3, 64)
    assert j["centring_mean_abs_max"] == 1e4 and j["key_weighting_gain_max"] == 1e3
    assert j["key_weighting_cond_max"] == 1e4
    assert j["centring_mean_tensors"] == [gguf_io.MEAN_K, gguf_io.MEAN_V]
    assert j["key_weighting_tensors"] == [gguf_io.ROT_K, gguf_io.ROT_Q]
    assert (limits.CENTRING_MEAN_ABS_MAX, limits.WEIGHT_K_GAIN_MAX, limits.WEIGHT_K_COND_MAX) == (1e4, 1e3, 1e4)


def test_limits_json_is_package_data():
    import tomllib
    cfg = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())
    assert "limits.json" in cfg["tool"]["setuptools"]["package-data"]["oscar"]


F32 = np.float32


@pytest.mark.parametrize("value", [
    float(np.nextafter(F32(0), F32(1))),  # the smallest positive float32
    1e-6, 0.5, 0.96, float(np.nextafter(F32(1), F32(0))), 1.0, np.float32(1.0), np.float64(0.3), 1,
    1.0 + 1e-12,  # stored as float32 1.0
])
def test_check_clip_ratio_accepts(value):
    r = limits.check_clip_ratio(value, "oscar.clip_k", 3)
    assert 0 < r <= 1 and r == float(F32(value))


@pytest.mark.parametrize("value", [
    0.0, -0.0, -1e-3, float(np.nextafter(F32(1), F32(2))), 1.5, 2, float("nan"), float("inf"), float("-inf"),
    1e-50,  # rounds to float32 0
    1e39,  # float32 inf
    "0.5", None, True,
])
def test_check_clip_ratio_refuses(value):
    with pytest.raises(ValueError) as e:
        limits.check_clip_ratio(value, "oscar.clip_v", 7)
    assert "oscar.clip_v[7] (layer 7)" in str(e.value) and "0 < r <= 1" in str(e.value)


def test_check_clip_ratios():
    assert limits.check_clip_ratios([0.5, 1.0], "clip_k", 2).dtype == np.float32
    with pytest.raises(ValueError, match=r"clip_k\[1\] \(layer 1\)"):
        limits.check_clip_ratios([0.5, 0.0], "clip_k")
    with pytest.raises(ValueError, match="has 2 entries, one per layer needs 3"):
        limits.check_clip_ratios([0.5, 0.5], "clip_k", 3)
    with pytest.raises(ValueError, match="1-D array"):
        limits.check_clip_ratios([[0.5]], "clip_k")


@pytest.mark.parametrize("value", [0, 1, 64, 256, 2**31 - 1, np.int64(2**31 - 1), np.uint32(5)])
def test_check_window_tokens_accepts(value):
    assert limits.check_window_tokens(value, "oscar.sink_tokens") == int(value)


@pytest.mark.parametrize("value", [-1, 2**31, 2**32 - 1, 2**32, np.int64(-1), 64.0, "64", None, True, False])
def test_check_window_tokens_refuses(value):
    with pytest.raises(ValueError) as e:
        limits.check_window_tokens(value, "oscar.recent_tokens")
    assert "oscar.recent_tokens" in str(e.value) and "0 <= n <= 2147483647" in str(e.value)


@pytest.mark.parametrize("value", [64, 128, 256, 576, np.int32(64)])
def test_check_head_dim_accepts(value):
    assert limits.check_head_dim(value) == int(value)


@pytest.mark.parametrize("value", [0, -64, 32, 63, 65, 80, 96, 64.0, True])
def test_check_head_dim_refuses(value):
    with pytest.raises(ValueError, match="multiple of 64"):
        limits.check_head_dim(value, "head_dim", 2)


def _rotation(d=64, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


@pytest.mark.parametrize("scale2", [1 - 0.9e-3, 1 + 0.9e-3, 1.0])
def test_check_rotation_accepts(scale2):
    # (s R)ᵀ(s R) = s² I: max |RᵀR - I| = |s² - 1|, just inside the tolerance
    r = _rotation() * math.sqrt(scale2)
    out = limits.check_rotation(r, "rot_k", 0)
    assert out.dtype == np.float32 and out.shape == (64, 64)
    assert limits.check_rotation(np.stack([r, _rotation(seed=1)]), "rot_k", 0).shape == (2, 64, 64)  # per head


@pytest.mark.parametrize("scale2", [1 - 1.1e-3, 1 + 1.1e-3, 100.0, 0.0])
def test_check_rotation_refuses_not_orthogonal(scale2):
    with pytest.raises(ValueError) as e:
        limits.check_rotation(_rotation() * math.sqrt(scale2), "rot_v", 4)
    assert "rot_v[4] (layer 4)" in str(e.value) and "not orthogonal" in str(e.value) and "<= 0.001" in str(e.value)


def test_check_rotation_refuses():
    r = _rotation()
    for bad, word in ((np.where(np.eye(64) > 0, np.nan, r), "NaN or Inf"), (r * 1e39, "NaN or Inf"),
                      (r[:, :32], "square"), (r[0], "square"), (np.zeros((0, 0)), "square"),
                      (hadamard(32), "multiple of 64"), (np.array([["a"]]), "square")):
        with pytest.raises(ValueError, match=word):
            limits.check_rotation(bad, "rot_k", 1)
    with pytest.raises(ValueError, match=r"rot_k\[1\] \(layer 1, KV head 1\): the rotation is not orthogonal"):
        limits.check_rotation(np.stack([r, 2 * r]), "rot_k", 1)


def test_check_rotations():
    r = np.stack([_rotation(seed=i) for i in range(3)])
    assert limits.check_rotations(r, "rot_k", 3).dtype == np.float32
    with pytest.raises(ValueError, match="for 3 layers, the model has 2"):
        limits.check_rotations(r, "rot_k", 2)
    r[2] *= 1.01
    with pytest.raises(ValueError, match=r"rot_k\[2\] \(layer 2\)"):
        limits.check_rotations(r, "rot_k")
    with pytest.raises(ValueError, match=r"\[n_layer, D, D\]"):
        limits.check_rotations(r[0, 0], "rot_k")


# centring means and key weightings: finite but out of range gave NaN in llama.cpp

def test_bundled_calibrations_pass_with_margin():
    """Every bundled zoo entry stays a factor of 10 or more inside the limits on centring means
    and key weightings (largest |mean| 403, gain 15.8, condition number 58 when chosen)."""
    files = sorted((paths.ROOT / "zoo").glob("*.npz"))
    assert len(files) >= 4
    for f in files:
        r = rotfile.Rotations.load(f)
        for m in (r.mean_k, r.mean_v):
            assert np.abs(m).max() <= limits.CENTRING_MEAN_ABS_MAX / 10, f
        w = np.asarray(r.weight_k, np.float64)
        ev = np.linalg.eigvalsh(w)
        assert ev.max() <= limits.WEIGHT_K_GAIN_MAX / 10 and 1 / ev.min() <= limits.WEIGHT_K_GAIN_MAX / 10, f
        assert (ev.max(-1) / ev.min(-1)).max() <= limits.WEIGHT_K_COND_MAX / 10, f
        kq = limits.check_rotation_pair(r.key_matrix[0], r.query_matrix[0])  # as the converter writes them
        assert kq[0].dtype == np.float32


def test_check_centring_means():
    m = np.zeros((3, 2, 64), np.float32)
    m[1, 1, 5] = -limits.CENTRING_MEAN_ABS_MAX  # inclusive
    assert limits.check_centring_means(m, "mean_k", 3).dtype == np.float32
    for v, says in ((float(np.nextafter(np.float32(1e4), np.float32(np.inf))), "10000, over the allowed 10000"),
                    (1e6, "1e+06, over the allowed 10000"), (np.nan, "a non-finite value"),
                    (-np.inf, "a non-finite value")):
        bad = m.copy()
        bad[2, 1, 7] = v
        with pytest.raises(ValueError) as e:
            limits.check_centring_means(bad, "mean_v", 3, "the fix", gguf_io.MEAN_V)
        msg = str(e.value)
        assert msg.startswith("blk.2.attn_v_oscar_mean holds ") and says in msg, msg
        assert "(layer 2, KV head 1, element 7)" in msg and msg.endswith("; the fix"), msg
    with pytest.raises(ValueError, match=r"mean_k has float32 shape \(3, 64\)"):
        limits.check_centring_means(m[:, 0], "mean_k")


def _weighted_pair(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R_K = diag(d) H, R_Q = diag(1/d) H with H the 64-point Hadamard matrix: exact in float32
    for powers of two, so R_Q R_Kᵀ = I exactly and only the gains and the condition number vary."""
    h = hadamard(64)
    return (d[:, None] * h).astype(np.float32), ((1 / d)[:, None] * h).astype(np.float32)


@pytest.mark.parametrize("d,says", [
    (np.full(64, 512.0), None),                                 # gain 512, condition number 1
    (np.r_[np.full(32, 64.0), np.full(32, 1 / 64)], None),      # gains 64, condition number 4096
    (np.full(64, 2048.0), "blk.4.attn_k_oscar_rot: the key weighting's gain (largest singular value) is 2.05e+03, allowed <= 1000"),
    (np.full(64, 1 / 2048), "blk.4.attn_q_oscar_rot: the key weighting's gain (largest singular value) is 2.05e+03"),
    (np.r_[np.full(32, 128.0), np.full(32, 1 / 128)], "too ill-conditioned (condition number ‖R_K‖₂·‖R_Q‖₂ = 1.64e+04, allowed <= 10000)"),
], ids=["gain-inside", "cond-inside", "gain-k", "gain-q", "cond"])
def test_check_rotation_pair_gain_and_condition(d, says):
    rk, rq = _weighted_pair(d)
    if says is None:
        limits.check_rotation_pair(rk, rq, gguf_io.ROT_K.format(4), gguf_io.ROT_Q.format(4))
    else:
        with pytest.raises(ValueError) as e:
            limits.check_rotation_pair(rk, rq, gguf_io.ROT_K.format(4), gguf_io.ROT_Q.format(4))
        assert says in str(e.value), str(e.value)


def test_check_key_weighting_gain():
    """A weighting scaled as a whole keeps its condition number; its gain is bounded instead."""
    limits.check_key_weighting(np.eye(64) * 999, "weight_k", 0)
    with pytest.raises(ValueError, match=r"weight_k\[0\] \(layer 0\) scales too far \(largest eigenvalue of W 1\.1e\+03"):
        limits.check_key_weighting(np.eye(64) * 1100, "weight_k", 0)
    with pytest.raises(ValueError, match=r"of W⁻¹ 1\.1e\+03"):
        limits.check_key_weighting(np.eye(64) / 1100, "weight_k", 0)


@pytest.mark.parametrize("case", ["mean+1e6", "weight*1e4"])
def test_convert_refuses_out_of_range_calibration(model, shape, tmp_path, capsys, case):
    """The issue's two files: a rotation file whose mean_k has 1e6 added, and one whose key
    weighting is scaled by 1e4 (R_K by 1e4, R_Q by 1e-4: still each other's inverse). Both
    converted with exit status 0 before and gave NaN in llama.cpp; now exit 2, nothing written."""
    L, d = shape.n_layer, shape.head_dim
    r = rotations_for(shape)
    r.mean_k = np.zeros((L, shape.n_head_kv, d), np.float32)
    r.mean_v = np.zeros((L, shape.n_head_kv, d), np.float32)
    r.weight_k = np.stack([np.eye(d, dtype=np.float32)] * L)
    if case == "mean+1e6":
        r.mean_k[1] += 1e6
        says = "mean_k[1] holds 1e+06, over the allowed 10000 (layer 1, KV head 0, element 0)"
    else:
        says = "weight_k[0] (layer 0) scales too far (largest eigenvalue of W 1e+04"
    f = tmp_path / "rot.npz"
    raw_npz(f, r, mean_k=r.mean_k, mean_v=r.mean_v,
            weight_k=(r.weight_k * (1e4 if case == "weight*1e4" else 1)).diagonal(axis1=1, axis2=2).copy())
    out = tmp_path / "o.gguf"
    rc, err = run_convert([str(model), "--rotations", str(f), "-o", str(out)], capsys)
    assert rc == 2 and says in err, err
    assert not out.exists()
    with pytest.raises(ValueError, match=r"blk\.1\.attn_k_oscar_mean holds 1e\+06"):  # the writer checks as well
        gguf_io.write_fields(model, out, r.rot_k, r.rot_v, r.clip_k, r.clip_v, 64, 256, "t", 1, "t",
                                 progress=False, mean_k=np.zeros_like(r.mean_k) + np.float32(1e6) * (np.arange(L) == 1)[:, None, None],
                                 mean_v=r.mean_v)
    assert not out.exists()


# ----------------------------------------------------------------------------- 3. atomic writes and signals

def _signals_as_at_a_terminal() -> None:
    """(a child's preexec_fn) SIGINT and SIGTERM at their defaults, as for a command typed at a
    terminal: a test run started in the background (nohup, `cmd &` in a script) hands its
    children SIGINT ignored, and the converter keeps an ignored signal ignored by design
    (test_ignored_signal_stays_ignored)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _start_slow_convert(model, rot, out, *extra, delay="0.4"):
    env = dict(os.environ, OSCAR_TEST_WRITE_DELAY=delay)
    p = subprocess.Popen(convert_cmd(str(model), "--rotations", str(rot), "-o", str(out), "-q", *extra), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_signals_as_at_a_terminal)
    deadline = time.time() + 90
    part = None
    while time.time() < deadline and p.poll() is None:
        parts = list(out.parent.glob(PART_GLOB.format(out.name)))
        if parts and parts[0].stat().st_size > 0:  # the header is written: the tensor loop runs
            part = parts[0]
            break
        time.sleep(0.05)
    if part is None:
        p.kill()
        out_, err = p.communicate()
        pytest.fail(f"no temporary appeared (rc {p.returncode}): {err}")
    assert part.name.startswith(f".{out.name}.oscar-convert-{p.pid}-")
    time.sleep(0.3)
    return p, part


@pytest.fixture
def job(model, shape, tmp_path):
    """A folder with a rotation file and the user's own OUT.gguf.tmp; out is tmp_path/out/o.gguf."""
    (tmp_path / "out").mkdir()
    rotations_for(shape).save(tmp_path / "rot.npz")
    (tmp_path / "out" / "o.gguf.tmp").write_bytes(b"the user's own file")
    return tmp_path / "rot.npz", tmp_path / "out" / "o.gguf"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_write_leaves_nothing(model, job, sig):
    rot, out = job
    before = snapshot(out.parent)
    p, part = _start_slow_convert(model, rot, out)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode in (-sig, 128 + sig), (p.returncode, err)
    assert "Traceback" not in err, err
    assert not part.exists() and not out.exists()
    assert snapshot(out.parent) == before  # the user's o.gguf.tmp untouched, no temporary left


def test_sigterm_with_force_keeps_the_old_output(model, job):
    rot, out = job
    out.write_bytes(b"the previous output")
    before = snapshot(out.parent)
    p, part = _start_slow_convert(model, rot, out, "--force")
    p.terminate()
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGTERM
    assert snapshot(out.parent) == before  # the output is replaced only at the very end


def test_sigkill_leftover_removed_by_next_run(model, job, capsys):
    rot, out = job
    p, part = _start_slow_convert(model, rot, out)
    p.kill()
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    assert part.exists()  # SIGKILL cannot be caught: the leftover stays ...
    # ... beside files that must survive the next run: the user's o.gguf.tmp, a temporary of a
    # live process (pid 1), another output's leftover, a name that only looks like one
    keep = {out.parent / f".o.gguf.oscar-convert-1-0123abcd.part": b"live owner",
            out.parent / f".other.gguf.oscar-convert-{p.pid}-0123abcd.part": b"another output",
            out.parent / f".o.gguf.oscar-convert-{p.pid}-xyz.part": b"not the pattern",
            out.parent / f"o.gguf.oscar-convert-{p.pid}-0123abcd.part": b"not hidden"}
    for k, v in keep.items():
        k.write_bytes(v)
    before = snapshot(out.parent)
    rc, err = run_convert([str(model), "--rotations", str(rot), "-o", str(out)], capsys)
    assert rc == 0, err
    assert f"removed {part}, left by an interrupted run (process {p.pid} is gone)" in err
    assert not part.exists() and out.read_bytes()[:4] == b"GGUF"
    after = snapshot(out.parent)
    assert {k: v for k, v in after.items() if k != "o.gguf"} == {k: v for k, v in before.items() if k != part.name}


def test_user_tmp_file_untouched_by_success(model, job, capsys):
    rot, out = job
    tmp = out.parent / "o.gguf.tmp"
    before = snapshot(out.parent)
    rc, err = run_convert([str(model), "--rotations", str(rot), "-o", str(out)], capsys)
    assert rc == 0, err
    assert tmp.read_bytes() == b"the user's own file" and snapshot(out.parent)["o.gguf.tmp"] == before["o.gguf.tmp"]
    assert sorted(x.name for x in out.parent.iterdir()) == ["o.gguf", "o.gguf.tmp"]
    assert gguf.GGUFReader(str(out)).fields["oscar.version"].contents() == 1


def test_handlers_restored_and_no_work_folder(model, job, capsys, monkeypatch):
    rot, out = job
    made = []
    real = atomic.create_temp_dir
    monkeypatch.setattr(atomic, "create_temp_dir", lambda *a: made.append(real(*a)) or made[-1])
    old = {s: signal.getsignal(s) for s in atomic.SIGNALS}
    rc, err = run_convert([str(model), "--rotations", str(rot), "-o", str(out)], capsys)
    assert rc == 0, err
    assert {s: signal.getsignal(s) for s in atomic.SIGNALS} == old
    assert made == []  # a GGUF input needs no work folder


def test_exception_mid_write_removes_temporary(model, job, monkeypatch):
    rot, out = job
    r = rotfile.Rotations.load(rot)
    real = gguf.GGUFWriter.write_tensor_data
    calls = []

    def boom(self, *a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)
    monkeypatch.setattr(gguf.GGUFWriter, "write_tensor_data", boom)
    before = snapshot(out.parent)
    with pytest.raises(OSError, match="No space"):
        gguf_io.write_fields(model, out, r.rot_k, r.rot_v, r.clip_k, r.clip_v, 64, 256, "t", 1, "o", progress=False)
    assert snapshot(out.parent) == before


WORKDIR_SCRIPT = """
import sys, time
from pathlib import Path
from oscar.core import atomic
out = Path(sys.argv[1])
with atomic.Cleanup() as c:
    d = c.add(atomic.create_temp_dir(out, "oscar-convert"))
    (d / "model-f16.gguf").write_bytes(b"x" * 1000)
    print(d, flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_work_folder_removed_on_signals(tmp_path, model, shape, capsys, sig):
    """The folder a Hugging Face MODEL is converted in (.OUT.oscar-convert-<pid>-<hex>.d)."""
    out = tmp_path / "o.gguf"
    p = subprocess.Popen([sys.executable, "-c", WORKDIR_SCRIPT, str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_signals_as_at_a_terminal)
    d = Path(p.stdout.readline().strip())
    assert d.is_dir() and d.name.startswith(f".o.gguf.oscar-convert-{p.pid}-") and d.name.endswith(".d")
    p.send_signal(sig)
    p.communicate(timeout=60)
    assert p.returncode == -sig
    if sig != signal.SIGKILL:
        assert not d.exists()
        return
    assert d.exists()  # removed by the next run for the same output
    rotations_for(shape).save(tmp_path / "rot.npz")
    rc, err = run_convert([str(model), "--rotations", str(tmp_path / "rot.npz"), "-o", str(out)], capsys)
    assert rc == 0 and f"removed {d}" in err, err
    assert not d.exists()


def test_ignored_signal_stays_ignored(tmp_path):
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with atomic.Cleanup():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_rotation_save_is_atomic(shape, tmp_path):
    f = rotations_for(shape).save(tmp_path / "r")
    assert f == tmp_path / "r.npz" and sorted(p.name for p in tmp_path.iterdir()) == ["r.npz"]
    assert rotfile.Rotations.load(f).meta["n_layer"] == shape.n_layer


# ----------------------------------------------------------------------------- 4. oscar.load's head size check

def test_load_head_size_oscar2_cannot_hold(tmp_path):
    from oscar.core import llama
    m = synthetic.write(tmp_path / "hd80.gguf", synthetic.GEOMETRIES["tiny-hd80"], "f32")
    with pytest.raises(ValueError) as e:
        llama.load(m, kv="oscar2")
    msg = str(e.value)
    for w in ("layers 0-1 (all 2)", "K head size 80", "V head size 80", "llama.attention.key_length",
              "not a multiple of 64", "stores blocks of 64", "another kv type", "kv='f16'"):
        assert w in msg, msg
    with pytest.raises(ValueError) as e:
        llama.load(m, kv="f16", kv_v="oscar2")
    assert "V head size 80" in str(e.value) and "K head size" not in str(e.value) and "kv_v='q8_0'" in str(e.value)
    with pytest.raises(ValueError, match="0 <= n <= 2147483647"):
        llama.load(m, kv="f16", kv_sink=2**31)


def test_load_head_size_fallback_n_embd(tmp_path):
    """Without key_length/value_length: n_embd / n_head (of layer 0), as llama.cpp."""
    from oscar.core import llama
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), arch="llama")
    w.add_uint32("llama.block_count", 3)
    w.add_uint32("llama.embedding_length", 96)
    w.add_uint32("llama.attention.head_count", 2)
    w.add_tensor("x", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert llama.head_sizes(tmp_path / "m.gguf")["K"][0] == 48
    with pytest.raises(ValueError, match=r"layers 0-2 \(all 3\): K head size 48 \(llama.embedding_length / "):
        llama.check_head_sizes(tmp_path / "m.gguf", llama.kv_type("oscar2"), llama.kv_type("f16"))
    llama.check_head_sizes(tmp_path / "m.gguf", llama.kv_type("q8_0"), llama.kv_type("f16"))  # not oscar2: no check


def _libllama() -> bool:
    return any(Path(os.environ.get("LLAMA_CPP_LIB_PATH", paths.BUILD_BIN)).glob("libllama.*"))


@pytest.mark.skipif(not _libllama(), reason=f"no libllama in {paths.BUILD_BIN}: run `make build` first")
def test_load_other_kv_types_and_hd64_still_load(model, tmp_path):
    """The check refuses only what oscar2 cannot hold: hd80 loads with f16, hd64 with oscar2."""
    from oscar.core import llama
    try:
        llama.bindings()  # sets LLAMA_CPP_LIB_PATH before llama_cpp is first imported
    except ImportError as e:
        pytest.skip(f"llama-cpp-python is not installed: {e}")
    m = synthetic.write(tmp_path / "hd80.gguf", synthetic.GEOMETRIES["tiny-hd80"], "f32")
    llm = llama.load(m, kv="f16", n_ctx=256)
    assert llm.n_ctx() == 256
    llm.close()
    llm = llama.load(model, kv="oscar2", n_ctx=512)
    assert llm.n_ctx() == 512
    llm.close()


def test_write_failure_reported_and_cleaned(model, job, capsys, monkeypatch):
    """A failing write (disk full): exit 1 with one line, no temporary, the output absent."""
    rot, out = job
    real = gguf.GGUFWriter.write_tensor_data
    calls = []

    def boom(self, *a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)
    monkeypatch.setattr(gguf.GGUFWriter, "write_tensor_data", boom)
    before = snapshot(out.parent)
    rc, err = run_convert([str(model), "--rotations", str(rot), "-o", str(out)], capsys)
    assert rc == 1 and "oscar-convert: error: [Errno 28] No space left on device" in err and "not written" in err, err
    assert snapshot(out.parent) == before


HF_SCRIPT = """
import sys
from pathlib import Path
from oscar import cli
from oscar.core import paths
paths.ROOT = Path(sys.argv[1])  # its llama.cpp/convert_hf_to_gguf.py is a stand-in that sleeps
sys.argv = ["oscar-convert", *sys.argv[2:]]
sys.exit(cli.convert_main())
"""

FAKE_CONVERTER = """
import os, sys, time
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--outfile") + 1])
out.write_bytes(b"partial")
Path(os.environ["FAKE_PID_FILE"]).write_text(str(os.getpid()))
time.sleep(120)
"""


def test_sigterm_during_hf_conversion(tmp_path):
    """A Hugging Face MODEL is converted in .OUT.oscar-convert-<pid>-<hex>.d: SIGTERM stops the
    converter and removes the folder."""
    root = tmp_path / "root"
    (root / "llama.cpp").mkdir(parents=True)
    (root / "llama.cpp" / "convert_hf_to_gguf.py").write_text(FAKE_CONVERTER)
    hf = tmp_path / "hf-model"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    outdir = tmp_path / "out"
    outdir.mkdir()
    pid_file = tmp_path / "child.pid"
    p = subprocess.Popen([sys.executable, "-c", HF_SCRIPT, str(root), str(hf), "--rotations", "zoo", "-o",
                          str(outdir / "o.gguf"), "-q"], env=dict(os.environ, FAKE_PID_FILE=str(pid_file)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while not pid_file.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert pid_file.exists(), p.communicate()[1]
    work = list(outdir.glob(".o.gguf.oscar-convert-*.d"))
    assert len(work) == 1 and (work[0] / "hf-model-f16.gguf").exists()
    p.terminate()
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGTERM
    assert list(outdir.iterdir()) == []
    child = int(pid_file.read_text())
    assert not atomic.pid_alive(child) or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"


# ----------------------------------------------------------------------------- plans for another budget

def _plan_meta(shape, with_low: bool) -> dict:
    """A rotation file's meta.plan as calibration writes it (3.0 bits), with error tables in which
    each higher type halves a side's error; ``with_low``: the oscar2s pairs measured too."""
    from oscar.core import plan
    e = {"oscar2s": 0.013, "oscar2": 0.01, "oscar3": 0.005, "q4_0": 0.0025, "q8_0": 0.001}
    pairs = [p for p in plan.measured_pairs() if with_low or "oscar2s" not in p]
    tables = [{p: e[p[0]] + e[p[1]] / 4 for p in pairs} for _ in range(shape.n_layer)]
    v = shape.n_head_kv * shape.head_dim
    lay = [plan.LayerShape(v, v, None) for _ in range(shape.n_layer)]
    return plan.choose(lay, tables, 3.0).as_meta(3.0, lay, tables)


def test_kv_bits_under_every_layer_in_oscar2(model, shape, tmp_path, capsys):
    """--kv-bits 2.5 from a rotation file plans again without calibrating: with the oscar2s
    measurements the growing layers start from oscar2s (the GGUF names it, and the converter
    says it runs on the CPU only); without them the plan stays every layer in oscar2, over the
    budget, and the warning names the fix."""
    def convert_at_2_5(with_low: bool) -> tuple[dict, str]:
        f = tmp_path / f"rot-{with_low}.npz"
        rotations_for(shape, meta={"plan": _plan_meta(shape, with_low)}).save(f)
        out = tmp_path / f"out-{with_low}.gguf"
        rc, err = run_convert([str(model), "--rotations", str(f), "--kv-bits", "2.5", "-o", str(out)], capsys)
        assert rc == 0, err
        return gguf.GGUFReader(str(out)).fields, err

    fields, err = convert_at_2_5(True)
    tk, tv = fields["oscar.cache_type_k"].contents(), fields["oscar.cache_type_v"].contents()
    assert "oscar2s" in tk and set(tv) == {"oscar2s"}, (tk, tv)
    assert "runs on the CPU only" in err and "plan: oscar2s for K in" in err, err
    assert "a budget of 2.69 bits or more keeps every layer on oscar2" in err, err  # tiny-hd64, windows 64/256
    fields, err = convert_at_2_5(False)
    assert fields["oscar.cache_type_k"].contents() == ["oscar2"] * shape.n_layer
    assert "over its budget of 2.5" in err and "recalibrate (--rotations calibrate --kv-bits 2.5)" in err, err
