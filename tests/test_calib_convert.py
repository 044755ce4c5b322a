"""oscar-convert end to end on SmolLM2 (zoo and calibrate paths) and every bad input."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from oscar import cli
from oscar.calib import zoo
from oscar.core import gguf_io, plan, rotfile
from oscar.core.rotation import hadamard, orthogonality_error, pair_error

gguf = pytest.importorskip("gguf")


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def shape(smollm2):
    return gguf_io.model_shape(smollm2)


def check_output(src, out, n_layer=30, d=64, per_head=False, hkv=3):
    """Every original tensor and field unchanged; OSCAR tensors and metadata present and sane."""
    r0, r = gguf_io.open_reader(src), gguf.GGUFReader(str(out))
    t0 = {t.name: t for t in r0.tensors}
    t1 = {t.name: t for t in r.tensors}
    rots = {f"blk.{i}.attn_{x}_oscar_rot" for i in range(n_layer) for x in "kv"}
    means = {f"blk.{i}.attn_{x}_oscar_mean" for i in range(n_layer) for x in "kv"}
    queries = {gguf_io.ROT_Q.format(i) for i in range(n_layer)}
    # the rotations, the centring means and the query rotations of a key weighting where the
    # rotations carry them (all layers or none)
    assert set(t1) - set(t0) in (rots, rots | means, rots | queries, rots | means | queries), \
        sorted(set(t1) - set(t0))[:5]
    weighted = gguf_io.ROT_Q.format(0) in t1
    for name, t in t0.items():
        assert t1[name].tensor_type == t.tensor_type and list(t1[name].shape) == list(t.shape)
        assert np.array_equal(np.asarray(t1[name].data), np.asarray(t.data)), name
    for k, f in r0.fields.items():
        if not k.startswith("GGUF."):
            assert r.fields[k].contents() == f.contents(), k
    want = (hkv, d, d) if per_head else (d, d)
    for i in range(n_layer):
        for x in "kv":
            t = t1[f"blk.{i}.attn_{x}_oscar_rot"]
            assert t.tensor_type == gguf.GGMLQuantizationType.F32
            a = np.asarray(t.data)
            assert a.shape == want
            if x == "k" and weighted:  # R_K = W R with R_Q = W⁻¹ R: the pair, not R_K, is checked
                b = np.asarray(t1[gguf_io.ROT_Q.format(i)].data)
                assert t1[gguf_io.ROT_Q.format(i)].tensor_type == gguf.GGMLQuantizationType.F32 and b.shape == want
                assert pair_error(a, b).max() < 1e-4
            else:
                assert orthogonality_error(a) < 1e-5
    f = r.fields
    assert f["oscar.version"].contents() == 1
    assert f["oscar.sink_tokens"].contents() == 64 and f["oscar.recent_tokens"].contents() == 256
    ck, cv = f["oscar.clip_k"].contents(), f["oscar.clip_v"].contents()
    assert len(ck) == len(cv) == n_layer and all(0.45 <= c <= 1 for c in ck + cv)
    assert f["oscar.calibration.tokens"].contents() > 0
    assert "attention-output" in f["oscar.calibration.objective"].contents()
    assert f["oscar.calibration.data"].contents()
    return r


def test_convert_zoo(smollm2, tmp_path, capsys):
    before = sha(smollm2)
    out = tmp_path / "smol-zoo.gguf"
    assert cli.convert_main(["smollm2-135m", "--rotations", "zoo", "-o", str(out), "-q"]) == 0
    assert "oscar-convert: wrote" in capsys.readouterr().err
    r = check_output(smollm2, out)
    assert r.fields["oscar.calibration.tokens"].contents() >= 4096
    # the zoo entry's centring means and precision plan reach the GGUF
    assert any(t.name == "blk.5.attn_k_oscar_mean" for t in r.tensors)
    assert len(r.fields["oscar.cache_type_k"].contents()) == 30
    assert sha(smollm2) == before
    # the zoo rotations are calibrated ones, not the plain Hadamard
    rk = np.asarray([t for t in r.tensors if t.name == "blk.5.attn_k_oscar_rot"][0].data)
    assert np.abs(rk - hadamard(64)).max() > 0.1
    # the entry's tables hold the oscar2s pairs: a 2.5-bit budget plans from oscar2s without
    # calibrating, within the budget by kvmem's count of the whole cache at 32k
    out25 = tmp_path / "smol-zoo25.gguf"
    assert cli.convert_main(["smollm2-135m", "--rotations", "zoo", "--kv-bits", "2.5", "-o", str(out25), "-q"]) == 0
    assert "plan: oscar2s for K in" in capsys.readouterr().err
    f = gguf.GGUFReader(str(out25)).fields
    tk, tv = f["oscar.cache_type_k"].contents(), f["oscar.cache_type_v"].contents()
    assert tk.count("oscar2s") > 20 and tv.count("oscar2s") > 20, (tk, tv)
    lay = [plan.LayerShape(3 * 64, 3 * 64, None)] * 30
    assert 2.44 < plan.bits_per_value(lay, tk, tv, sink=64, recent=256) <= 2.5


def test_convert_calibrate_small(smollm2, tmp_path, capsys):
    before = sha(smollm2)
    out = tmp_path / "smol-cal.gguf"
    rotf = tmp_path / "rot.npz"
    rc = cli.convert_main(["smollm2-135m", "--rotations", "calibrate", "--calib-tokens", "256",
                           "--heldout-tokens", "512", "-o", str(out), "--save-rotations", str(rotf), "-q"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "calibrated on 256+512 tokens" in err
    r = check_output(smollm2, out)
    assert r.fields["oscar.calibration.tokens"].contents() == 256
    # the windows: the calibration's split of the default pool of 64 + 256 tokens
    sink, recent = r.fields["oscar.sink_tokens"].contents(), r.fields["oscar.recent_tokens"].contents()
    assert sink in (4, 16, 64) and sink + recent == 320
    assert f"windows {sink} sink + {recent} recent" in err
    assert sha(smollm2) == before
    # the saved rotation file converts again through --rotations FILE, to identical tensors
    out2 = tmp_path / "smol-file.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", str(rotf), "-o", str(out2), "-q"]) == 0
    r2 = gguf.GGUFReader(str(out2))
    a = {t.name: np.asarray(t.data) for t in r.tensors if "oscar" in t.name}
    b = {t.name: np.asarray(t.data) for t in r2.tensors if "oscar" in t.name}
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert r2.fields["oscar.clip_k"].contents() == r.fields["oscar.clip_k"].contents()


def test_convert_calibrate_chooses_the_exponent(smollm2, tmp_path, capsys, monkeypatch):
    """--key-weighting-exponent auto: the summary names the chosen exponent and every
    candidate's score, the rotation file keeps the scores, the chosen one is the lowest, and
    the GGUF carries the query rotations exactly when a weighting was chosen."""
    from oscar.calib import calibrate as cal
    monkeypatch.setattr(cal, "SCORE_TOKENS", 1024)  # (4096 by default; the same path, fewer tokens)
    out, rotf = tmp_path / "auto.gguf", tmp_path / "auto.npz"
    rc = cli.convert_main(["smollm2-135m", "--rotations", "calibrate", "--calib-tokens", "256", "--heldout-tokens",
                           "512", "--key-weighting-exponent", "auto", "-o", str(out), "--save-rotations", str(rotf),
                           "-q"])
    err = capsys.readouterr().err
    assert rc == 0, err
    meta = rotfile.Rotations.load(rotf).meta["calibration"]
    scores = meta["key_weighting_scores"]
    assert set(scores) == {"none", "0.125", "0.25"}
    best = min(scores, key=scores.get)
    assert f"key weighting {best} chosen of none (KLD {scores['none']:.4f}), 0.125" in err
    assert meta["key_weighting"] is (best != "none")
    assert meta.get("key_weighting_exponent", "none") == (float(best) if best != "none" else "none")
    r = check_output(smollm2, out)
    assert (gguf_io.ROT_Q.format(0) in {t.name for t in r.tensors}) is (best != "none")


# ----------------------------------------------------------------------------- bad input

def rotations_for(shape, **over):
    L, d, h = shape.n_layer, shape.head_dim, shape.n_head_kv
    meta = {"arch": shape.arch, "n_layer": L, "n_head": shape.n_head, "n_head_kv": h, "head_dim": d,
            "fingerprint": shape.fingerprint, "per_head": False, "sink_tokens": 64, "recent_tokens": 256,
            "calibration": {"data": "test", "tokens": 1, "objective": "attention-output test"}}
    meta.update(over.pop("meta", {}))
    r = rotfile.Rotations(np.stack([hadamard(d)] * L).astype(np.float32), np.stack([hadamard(d)] * L).astype(np.float32),
                      np.full(L, 0.96, np.float32), np.full(L, 0.92, np.float32), meta)
    for k, v in over.items():
        setattr(r, k, v)
    return r


def run_bad(args, capsys):
    rc = cli.convert_main(args + ["-q"])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_ERROR == 2, err  # argparse's status for a refused command line
    assert "oscar-convert: error: " in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("what,over,msg", [
    ("layers", {"meta": {"n_layer": 29}}, "n_layer 29"),
    ("head_dim", {"meta": {"head_dim": 128}}, "head_dim 128"),
    ("heads", {"meta": {"n_head_kv": 1}}, "n_head_kv 1"),
    ("fingerprint", {"meta": {"fingerprint": "0123456789abcdef"}}, "fingerprint 0123456789abcdef"),
])
def test_rotation_file_for_another_model(smollm2, shape, tmp_path, capsys, what, over, msg):
    f = tmp_path / f"{what}.npz"
    rotations_for(shape, **over).save(f)
    out = tmp_path / "out.gguf"
    err = run_bad([str(smollm2), "--rotations", str(f), "-o", str(out)], capsys)
    assert msg in err and "another model" in err and "--rotations calibrate" in err
    assert not out.exists()


def test_rotation_file_wrong_array_shape(smollm2, shape, tmp_path, capsys):
    r = rotations_for(shape)
    r.rot_k = r.rot_k[:, :32, :32]
    r.save(tmp_path / "s.npz")
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "s.npz"), "-o", str(tmp_path / "o.gguf")], capsys)
    assert "rot_k has shape (30, 32, 32)" in err


def test_non_orthogonal_rotation(smollm2, shape, tmp_path, capsys):
    r = rotations_for(shape)
    r.rot_v = r.rot_v.copy()
    r.rot_v[7] *= 1.05
    r.save(tmp_path / "n.npz")
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "n.npz"), "-o", str(tmp_path / "o.gguf")], capsys)
    assert "not orthogonal" in err and "rot_v" in err
    assert not (tmp_path / "o.gguf").exists()


def random_rotations(L, d, seed=0):
    """[L, d, d] random orthogonal matrices (QR of Gaussian ones), float32."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((L, d, d)))
    return q.astype(np.float32)


def test_half_rotation_file(shape, tmp_path):
    # float16 storage: half the file; on load the rotations are orthogonal again and within
    # the float16 rounding of the originals (random rotations: Hadamard entries are exact)
    r = rotations_for(shape, rot_k=random_rotations(shape.n_layer, shape.head_dim, 1),
                      rot_v=random_rotations(shape.n_layer, shape.head_dim, 2))
    r.save(tmp_path / "f32.npz")
    r.save(tmp_path / "f16.npz", half=True)
    assert (tmp_path / "f16.npz").stat().st_size < 0.6*(tmp_path / "f32.npz").stat().st_size
    with np.load(tmp_path / "f16.npz") as z:
        assert z["rot_k"].dtype == np.float16 and orthogonality_error(z["rot_k"]) > 1e-5  # rounded: not orthogonal as stored
    h = rotfile.Rotations.load(tmp_path / "f16.npz")
    for a, a0 in ((h.rot_k, r.rot_k), (h.rot_v, r.rot_v)):
        assert a.dtype == np.float32 and orthogonality_error(a) < 1e-5
        d16 = np.max(np.abs(a0.astype(np.float16).astype(np.float32) - a0))
        assert 0 < np.max(np.abs(a - a0)) < 2*d16
    h.validate(shape, "f16.npz")
    assert np.array_equal(h.clip_k, r.clip_k) and h.meta == r.meta
    # the same through `oscar zoo add --half`
    assert cli.oscar_main(["zoo", "add", "mine", str(tmp_path / "f32.npz"), "--dir", str(tmp_path / "z"), "--half"]) == 0
    with np.load(tmp_path / "z" / "mine.npz") as z:
        assert z["rot_v"].dtype == np.float16
    assert [e["name"] for e in json.loads((tmp_path / "z" / "manifest.json").read_text())["entries"]] == ["mine"]


def test_non_orthogonal_half_rotation(smollm2, shape, tmp_path, capsys):
    # re-orthogonalising on load undoes rounding only: a scaled matrix is refused, not repaired
    r = rotations_for(shape)
    r.rot_v = r.rot_v.copy()
    r.rot_v[7] *= 1.05
    r.save(tmp_path / "n16.npz", half=True)
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "n16.npz"), "-o", str(tmp_path / "o.gguf")], capsys)
    assert "rot_v (float16) is not orthogonal" in err and "--rotations calibrate" in err
    assert not (tmp_path / "o.gguf").exists()


def test_not_a_rotation_file(smollm2, tmp_path, capsys):
    f = tmp_path / "junk.npz"
    f.write_bytes(b"not a zip")
    err = run_bad([str(smollm2), "--rotations", str(f), "-o", str(tmp_path / "o.gguf")], capsys)
    assert "not an OSCAR rotation file" in err


def test_no_zoo_entry(smollm2, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(zoo, "BUNDLED_ZOO", tmp_path / "empty-zoo")
    monkeypatch.setenv("OSCAR_ZOO", str(tmp_path / "user-zoo"))
    err = run_bad([str(smollm2), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "no zoo entry" in err and "--rotations calibrate" in err


def test_user_zoo_is_searched(smollm2, shape, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(zoo, "BUNDLED_ZOO", tmp_path / "empty-zoo")
    monkeypatch.setenv("OSCAR_ZOO", str(tmp_path / "user-zoo"))
    zoo.add(tmp_path / "user-zoo", "mine", rotations_for(shape))
    assert cli.oscar_main(["zoo", "list"]) == 0
    listing = capsys.readouterr().out
    assert "mine" in listing and shape.fingerprint in listing
    out = tmp_path / "o.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", "zoo", "-o", str(out), "-q"]) == 0
    assert "zoo:mine" in capsys.readouterr().err
    assert out.exists()


def test_existing_output_needs_force(smollm2, shape, tmp_path, capsys):
    f = tmp_path / "r.npz"
    rotations_for(shape).save(f)
    out = tmp_path / "exists.gguf"
    out.write_bytes(b"keep me")
    err = run_bad([str(smollm2), "--rotations", str(f), "-o", str(out)], capsys)
    assert "already exists" in err and "--force" in err
    assert out.read_bytes() == b"keep me"
    assert cli.convert_main([str(smollm2), "--rotations", str(f), "-o", str(out), "--force", "-q"]) == 0
    assert out.read_bytes()[:4] == b"GGUF"


def test_output_is_input(smollm2, shape, tmp_path, capsys):
    f = tmp_path / "r.npz"
    rotations_for(shape).save(f)
    before = sha(smollm2)
    err = run_bad([str(smollm2), "--rotations", str(f), "-o", str(smollm2), "--force"], capsys)
    assert "is the input model" in err
    assert sha(smollm2) == before


def _fake_gguf(path, arch="rwkv6"):
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_uint32(f"{arch}.block_count", 2)
    w.add_uint32(f"{arch}.attention.head_count", 2)
    w.add_uint32(f"{arch}.attention.head_count_kv", 2)
    w.add_uint32(f"{arch}.embedding_length", 128)
    w.add_tensor("blk.0.attn_k.weight", np.zeros((128, 128), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_unsupported_architecture_for_capture(tmp_path, capsys):
    pytest.importorskip("transformers")
    src = tmp_path / "m.gguf"
    _fake_gguf(src)
    before = sha(src)
    err = run_bad([str(src), "--rotations", "calibrate", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "architecture 'rwkv6' is not supported" in err and "supported:" in err
    assert sha(src) == before


def test_not_a_model(tmp_path, capsys):
    f = tmp_path / "x.gguf"
    f.write_bytes(b"hello")
    err = run_bad([str(f), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "not a GGUF file" in err
    err = run_bad([str(tmp_path / "nope"), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "no such file or folder" in err


def test_test_split_refused_as_calibration_data(smollm2, tmp_path, capsys):
    t = tmp_path / "wiki.test.raw"
    t.write_text("text " * 1000)
    err = run_bad([str(smollm2), "--rotations", "calibrate", "--calib-data", str(t), "-o", str(tmp_path / "o.gguf")],
                  capsys)
    assert "evaluation" in err


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as e:
        cli.convert_main(["--help"])
    assert e.value.code == 0
    h = capsys.readouterr().out
    for word in ("zoo", "calibrate", "FILE", "--calib-tokens", "--per-head", "--force", "never modified"):
        assert word in h


def test_per_head_rotation_file(smollm2, shape, tmp_path, capsys):
    """Per-KV-head rotations travel as (Hkv, D, D) tensors; --per-head refuses per-layer ones."""
    r = rotations_for(shape, meta={"per_head": True})
    g = np.random.default_rng(0)
    q, _ = np.linalg.qr(g.standard_normal((30, 3, 64, 64)))
    r.rot_k = q.astype(np.float32)
    r.rot_v = np.ascontiguousarray(np.swapaxes(q, -1, -2)).astype(np.float32)
    r.save(tmp_path / "ph.npz")
    out = tmp_path / "ph.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", str(tmp_path / "ph.npz"), "--per-head", "-o", str(out), "-q"]) == 0
    rd = check_output(smollm2, out, per_head=True)
    t = [x for x in rd.tensors if x.name == "blk.4.attn_k_oscar_rot"][0]
    assert list(t.shape) == [64, 64, 3]  # ggml ne order
    np.testing.assert_array_equal(np.asarray(t.data), r.rot_k[4])
    rotations_for(shape).save(tmp_path / "pl.npz")
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "pl.npz"), "--per-head", "-o", str(tmp_path / "x.gguf")],
                  capsys)
    assert "--per-head" in err and "per layer" in err


def test_key_weighted_rotation_file(smollm2, shape, tmp_path, capsys):
    """A rotation file with a key weighting (weight_k, per KV head) converts to R_K = W R in
    attn_k_oscar_rot and R_Q = W⁻¹ R in attn_q_oscar_rot; --no-key-weighting belongs to
    --rotations calibrate only."""
    from oscar.core import rotation
    r = rotations_for(shape, meta={"per_head": True})
    g = np.random.default_rng(1)
    q, _ = np.linalg.qr(g.standard_normal((30, 3, 64, 64)))
    r.rot_k = r.rot_v = q.astype(np.float32)
    a = g.standard_normal((30, 3, 64, 64))
    cov = a @ np.swapaxes(a, -1, -2) / 64 + 0.1 * np.eye(64)
    r.weight_k = rotation.key_weighting(cov, cov[::-1]).astype(np.float32)
    r.save(tmp_path / "w.npz")
    out = tmp_path / "w.gguf"
    assert cli.convert_main([str(smollm2), "--rotations", str(tmp_path / "w.npz"), "-o", str(out), "-q"]) == 0
    assert "keys weighted" in capsys.readouterr().err
    rd = check_output(smollm2, out, per_head=True)
    t = {x.name: np.asarray(x.data) for x in rd.tensors}
    np.testing.assert_array_equal(t["blk.4.attn_k_oscar_rot"], r.key_matrix[4])
    np.testing.assert_array_equal(t["blk.4.attn_q_oscar_rot"], r.query_matrix[4])
    np.testing.assert_allclose(t["blk.4.attn_k_oscar_rot"], r.weight_k[4].astype(np.float64) @ r.rot_k[4], atol=1e-5)
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "w.npz"), "--no-key-weighting",
                   "-o", str(tmp_path / "x.gguf")], capsys)
    assert "--no-key-weighting is only used with --rotations calibrate" in err
    err = run_bad([str(smollm2), "--rotations", str(tmp_path / "w.npz"), "--key-weighting-exponent", "0.1",
                   "-o", str(tmp_path / "x.gguf")], capsys)
    assert "--key-weighting-exponent is only used with --rotations calibrate" in err
    for a in ("0", "0.6", "nan"):
        err = run_bad([str(smollm2), "--rotations", "calibrate", "--key-weighting-exponent", a,
                       "-o", str(tmp_path / "x.gguf")], capsys)
        assert f"--key-weighting-exponent {float(a):g} is out of range: use 0 < A <= 0.5" in err
    err = run_bad([str(smollm2), "--rotations", "calibrate", "--key-weighting-exponent", "quarter",
                   "-o", str(tmp_path / "x.gguf")], capsys)
    assert "--key-weighting-exponent 'quarter' is not a number: use 0 < A <= 0.5 or auto" in err
    err = run_bad([str(smollm2), "--rotations", "zoo", "--key-weighting-exponent", "auto",
                   "-o", str(tmp_path / "x.gguf")], capsys)
    assert "--key-weighting-exponent is only used with --rotations calibrate" in err
    assert not (tmp_path / "x.gguf").exists()
    with pytest.raises(SystemExit):
        cli.convert_main(["--help"])
    assert "--no-key-weighting" in capsys.readouterr().out


# ----------------------------------------------------------------------------- --rotations zoo: broken zoos

@pytest.fixture
def user_zoo(tmp_path, monkeypatch):
    """An empty user zoo folder in $OSCAR_ZOO, the bundled zoo hidden."""
    monkeypatch.setattr(zoo, "BUNDLED_ZOO", tmp_path / "empty-zoo")
    d = tmp_path / "user-zoo"
    monkeypatch.setenv("OSCAR_ZOO", str(d))
    return d


def test_zoo_manifest_unreadable(smollm2, user_zoo, tmp_path, capsys):
    user_zoo.mkdir()
    (user_zoo / "manifest.json").write_text("{not json")
    err = run_bad([str(smollm2), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert f"zoo manifest {user_zoo / 'manifest.json'} is not readable" in err and "fix it" in err
    assert cli.oscar_main(["zoo", "list"]) == 1
    assert "is not readable" in capsys.readouterr().err
    assert not (tmp_path / "o.gguf").exists()


def test_zoo_entry_file_missing(smollm2, shape, user_zoo, tmp_path, capsys):
    zoo.add(user_zoo, "gone", rotations_for(shape)).unlink()
    err = run_bad([str(smollm2), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "lists gone.npz for this model" in err and "is missing" in err and "restore the file" in err


def test_zoo_file_corrupt(smollm2, shape, user_zoo, tmp_path, capsys):
    zoo.add(user_zoo, "junk", rotations_for(shape)).write_bytes(b"not a zip")
    err = run_bad([str(smollm2), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "junk.npz for this model is broken" in err and "--rotations calibrate" in err


def test_zoo_file_for_another_model(smollm2, shape, user_zoo, tmp_path, capsys):
    """An entry filed under this model's fingerprint whose arrays are another model's."""
    r = rotations_for(shape)
    r.rot_k, r.rot_v = r.rot_k[:29], r.rot_v[:29]
    r.clip_k, r.clip_v = r.clip_k[:29], r.clip_v[:29]  # a consistent file (zoo add refuses one that is not)
    zoo.add(user_zoo, "wrong", r)
    err = run_bad([str(smollm2), "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "zoo file" in err and "wrong.npz" in err and "rot_k has shape (29, 64, 64)" in err
    assert not (tmp_path / "o.gguf").exists()


def test_zoo_per_head_asked_but_only_per_layer(smollm2, shape, user_zoo, tmp_path, capsys):
    zoo.add(user_zoo, "layers", rotations_for(shape))
    err = run_bad([str(smollm2), "--rotations", "zoo", "--per-head", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "no per-head zoo entry" in err and "--rotations calibrate" in err


def test_zoo_alias_without_model_file(monkeypatch, tmp_path, capsys):
    from oscar.core import paths
    monkeypatch.setattr(paths, "MODELS", tmp_path)
    err = run_bad(["gemma3-270m", "--rotations", "zoo", "-o", str(tmp_path / "o.gguf")], capsys)
    assert "gemma-3-270m-it-Q4_K_M.gguf is missing" in err and "fetch-models.sh gemma3" in err


def test_torch_model_checked(smollm2, tmp_path, capsys):
    err = run_bad([str(smollm2), "--rotations", "zoo", "--torch-model", str(tmp_path), "-o", str(tmp_path / "o.gguf")],
                  capsys)
    assert "--torch-model is only used with --rotations calibrate" in err
    err = run_bad([str(smollm2), "--rotations", "calibrate", "--torch-model", str(tmp_path), "-o",
                   str(tmp_path / "o.gguf")], capsys)
    assert "not a Hugging Face model folder" in err and "oscar dequantize" in err
