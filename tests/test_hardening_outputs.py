"""Hardening of what the package writes and of its small front doors: an existing output that
is not a regular file (a device, a FIFO, a symbolic link, a folder) is never replaced or
written through, with or without --force; bad arguments to oscar.load, oscar-convert and
oscar zoo are refused up front with one message naming the problem and the fix.

Everything runs on a tiny synthetic model (py/oscar/bench/synthetic.py): no download.
"""
from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from oscar import cli
from oscar.bench import synthetic
from oscar.calib import zoo
from oscar.core import atomic, gguf_io, rotfile
from oscar.core.rotation import hadamard
from oscar.eval import report

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return synthetic.write(tmp_path_factory.mktemp("model") / "tiny.gguf", synthetic.GEOMETRIES["tiny-hd64"], "f32")


@pytest.fixture(scope="module")
def rot_file(model, tmp_path_factory) -> Path:
    shape = gguf_io.model_shape(model)
    L, d = shape.n_layer, shape.head_dim
    meta = {"arch": shape.arch, "n_layer": L, "n_head": shape.n_head, "n_head_kv": shape.n_head_kv, "head_dim": d,
            "fingerprint": shape.fingerprint, "per_head": False, "sink_tokens": 64, "recent_tokens": 256,
            "calibration": {"data": "test", "tokens": 1, "objective": "test"}}
    h = np.stack([hadamard(d)] * L).astype(np.float32)
    r = rotfile.Rotations(h, h.copy(), np.full(L, 0.96, np.float32), np.full(L, 0.92, np.float32), meta)
    return r.save(tmp_path_factory.mktemp("rot") / "rot.npz")


def _state(p: Path):
    """What a path is, without following a link: (kind, link target or file bytes or folder listing)."""
    st = p.lstat()
    if stat.S_ISLNK(st.st_mode):
        return "link", os.readlink(p)
    if stat.S_ISCHR(st.st_mode):
        return "chr", st.st_rdev
    if stat.S_ISFIFO(st.st_mode):
        return "fifo", None
    if stat.S_ISDIR(st.st_mode):
        return "dir", sorted(os.listdir(p))
    return "file", p.read_bytes()


def _make(kind: str, tmp_path: Path, name: str = "out.gguf") -> tuple[Path, str, list[Path]]:
    """An existing output of ``kind``: (its path, the words the refusal must say, paths that must
    stay as they are: the output and, for a link, its target)."""
    if kind == "devnull":
        return Path(os.devnull), "is a character device", []
    out = tmp_path / name
    if kind == "fifo":
        os.mkfifo(out)
        return out, "is a FIFO", [out]
    if kind == "link-to-file":
        target = tmp_path / "target.gguf"
        target.write_bytes(b"the user's file")
        out.symlink_to(target)
        return out, "is a symbolic link", [out, target]
    if kind == "dangling-link":
        out.symlink_to(tmp_path / "nowhere.gguf")
        return out, "is a symbolic link", [out]
    if kind == "folder":
        out.mkdir()
        (out / "keep.txt").write_text("x")
        return out, "is a folder", [out]
    if kind == "link-to-folder":
        (tmp_path / "d").mkdir()
        out.symlink_to(tmp_path / "d")
        return out, "is a symbolic link", [out, tmp_path / "d"]
    raise AssertionError(kind)


KINDS = ["devnull", "fifo", "link-to-file", "dangling-link", "folder", "link-to-folder"]


# ----------------------------------------------------------------------------- outputs that are not regular files

@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("kind", KINDS)
def test_convert_refuses_output_that_is_not_a_regular_file(model, rot_file, tmp_path, capsys, kind, force):
    """oscar-convert -o X (with or without --force) where X is /dev/null, a FIFO, a link (to a
    file, dangling, to a folder) or a folder: exit 2, one message naming what X is and a fix
    that works (never --force), and X (and a link's target) exactly as it was; /dev/null is
    still the character device."""
    out, says, keep = _make(kind, tmp_path)
    before = {p: _state(p) for p in keep}
    devnull = os.stat(os.devnull)
    rc = cli.convert_main([str(model), "--rotations", str(rot_file), "-o", str(out), "-q"] + (["--force"] if force else []))
    err = capsys.readouterr().err
    assert rc == 2, err
    assert says in err and "not a regular file" in err, err
    assert "pass --force" not in err, err
    assert "choose another path" in err or "remove the link yourself" in err or "give a file name" in err, err
    assert err.count("error:") == 1, err
    assert {p: _state(p) for p in keep} == before
    st = os.stat(os.devnull)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == devnull.st_rdev
    assert not (tmp_path / "nowhere.gguf").exists()
    assert not list(tmp_path.glob(".*.part"))


def test_convert_still_replaces_a_regular_file_with_force(model, rot_file, tmp_path, capsys):
    out = tmp_path / "out.gguf"
    out.write_bytes(b"old")
    assert cli.convert_main([str(model), "--rotations", str(rot_file), "-o", str(out), "-q"]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert cli.convert_main([str(model), "--rotations", str(rot_file), "-o", str(out), "-q", "--force"]) == 0
    assert out.read_bytes()[:4] == b"GGUF" and not out.is_symlink()


def test_writer_refuses_what_became_a_link_during_the_write(tmp_path):
    """atomic.replace checks the output again right before the rename: a link put there while
    the temporary was written is refused, the link and the temporary stay."""
    tmp = atomic.create_temp_file(tmp_path / "out.gguf", "oscar-convert")
    (tmp_path / "out.gguf").symlink_to(tmp_path / "victim")
    with pytest.raises(atomic.NotRegularOutput, match="is a symbolic link"):
        atomic.replace(tmp, tmp_path / "out.gguf")
    assert (tmp_path / "out.gguf").is_symlink() and tmp.is_file() and not (tmp_path / "victim").exists()


@pytest.mark.parametrize("kind", ["devnull", "fifo", "link-to-file", "dangling-link", "folder"])
def test_every_file_writer_refuses(tmp_path, rot_file, kind):
    """The rotation file (--save-rotations, zoo add; its name ends in .npz, or .npz is appended),
    the JSON and markdown reports (oscar-eval, oscar-bench, oscar-sim) and the zoo manifest go
    through the same check."""
    out, says, keep = _make(kind, tmp_path, "out.npz")
    before = {p: _state(p) for p in keep}
    rot = rotfile.Rotations.load(rot_file)
    writers = [lambda: report.write_json(out, {"a": 1}), lambda: atomic.write_text(out, "text")]
    if kind != "devnull":
        writers.append(lambda: rot.save(out))
    for write in writers:
        with pytest.raises(atomic.NotRegularOutput, match=says):
            write()
    assert {p: _state(p) for p in keep} == before
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize("kind", ["file", "link-to-folder", "devnull"])
def test_folder_outputs_refuse(tmp_path, capsys, monkeypatch, kind):
    """Folder outputs (oscar zoo push DIR, oscar dequantize MODEL DIR) must be folders: an
    existing file or a link to a folder is refused with exit 1 and a message, no traceback."""
    if kind == "file":
        out = tmp_path / "out"
        out.write_text("mine")
        says, keep = "is a regular file, not a folder", [out]
    else:
        out, says, keep = _make(kind, tmp_path)
        says = says + ", not a folder"
    before = {p: _state(p) for p in keep}
    assert cli.oscar_main(["zoo", "push", str(out), "--repo", "me/rotations"]) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    gguf_path = tmp_path / "m.gguf"
    gguf_path.write_bytes(b"GGUF")
    assert cli.oscar_main(["dequantize", str(gguf_path), str(out)]) == 1
    err = capsys.readouterr().err
    assert says in err and "oscar dequantize: error:" in err, err
    assert {p: _state(p) for p in keep} == before


def test_dequantize_existing_file_from_the_command_line(tmp_path):
    """`oscar dequantize MODEL EXISTING_FILE` as a program: exit 1, one line, no traceback."""
    (tmp_path / "f").write_text("x")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    p = subprocess.run([sys.executable, "-c", "import sys; from oscar.cli import oscar_main; sys.exit(oscar_main())",
                        "dequantize", str(tmp_path / "m.gguf"), str(tmp_path / "f")], capture_output=True, text=True)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "is a regular file, not a folder" in p.stderr and (tmp_path / "f").read_text() == "x"


def test_synth_refuses_dangling_link(tmp_path, capsys):
    """oscar-synth -o LINK where LINK dangles: refused, its target is not created."""
    (tmp_path / "out.gguf").symlink_to(tmp_path / "nowhere.gguf")
    assert synthetic.main(["tiny-hd64", "-o", str(tmp_path / "out.gguf")]) == 1
    assert "exists" in capsys.readouterr().err
    assert not (tmp_path / "nowhere.gguf").exists()


# ----------------------------------------------------------------------------- oscar-convert's messages and exit status

def test_kv_bits_message_states_what_oscar2_costs(model, rot_file, tmp_path, capsys):
    """The --kv-bits range error states the bits of every layer in oscar2 as the converter's plan
    counts them: 20-byte blocks of 64 values (2.5 bits) plus the 16-bit window pool of
    64 + 256 + 64 + 1 slots per layer over 32768 cells: 2.69, not "about 2.9"."""
    rc = cli.convert_main([str(model), "--rotations", str(rot_file), "-o", str(tmp_path / "o.gguf"), "-q",
                           "--kv-bits", "1.5"])
    err = capsys.readouterr().err
    want = 8 * 20 / 64 + 16 * (64 + 256 + 64 + 1) / 32768
    assert rc == 2 and f"costs {want:.2f} at 32k tokens" in err and "2.9" not in err, err


def test_unwritable_output_exits_1(model, rot_file, tmp_path):
    """A write that fails (here: the output's folder is a file's path under /proc, where nothing
    can be created) is exit status 1 as --help says, not 2 (a refusal), and names the output."""
    out = Path("/proc/self/oscar-test-out.gguf")
    p = subprocess.run([sys.executable, "-c", "import sys; from oscar.cli import convert_main; sys.exit(convert_main())",
                        str(model), "--rotations", str(rot_file), "-o", str(out), "-q"], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert f"{out} was not written" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "exit status: 0 written; 2 refused" in subprocess.run(
        [sys.executable, "-c", "import sys; from oscar.cli import convert_main; sys.exit(convert_main())", "--help"],
        capture_output=True, text=True).stdout


# ----------------------------------------------------------------------------- oscar.load's arguments

@pytest.mark.parametrize("kw,says", [
    (dict(kv=None), "a KV cache type is a name"),
    (dict(kv=True), "a KV cache type is a name"),
    (dict(kv="oscar9"), "unknown KV cache type 'oscar9'"),
    (dict(n_ctx=-1), "n_ctx must be a number of tokens"),
    (dict(n_ctx=1.5), "n_ctx must be a number of tokens"),
    (dict(kv="oscar3", flash_attn=False), "the K and V cache in oscar3 is read by flash attention only"),
    (dict(kv="f16", kv_k="oscar2", flash_attn=False), "the K cache in oscar2 is read by flash attention only"),
    (dict(kv="q8_0", flash_attn=False), "a quantised V cache (q8_0) is read by flash attention only"),
], ids=["none", "bool", "unknown", "n_ctx-negative", "n_ctx-float", "oscar3-no-fa", "oscar2-k-no-fa", "q8_0-v-no-fa"])
def test_load_validates_up_front(model, kw, says):
    """Refused with a ValueError naming the argument before llama.cpp is called (which would say
    only "Failed to create llama_context", or raise an AttributeError for kv=None)."""
    import oscar
    with pytest.raises(ValueError) as e:
        oscar.load(model, **kw)
    assert says in str(e.value)


# ----------------------------------------------------------------------------- oscar zoo

@pytest.mark.parametrize("repo", ['"; rm -rf / #', "owner", "a/b/c", "-x/y", "o/..", "o/" + "n" * 97, "o/n m"])
def test_zoo_push_refuses_bad_repo_id(tmp_path, capsys, repo):
    assert cli.oscar_main(["zoo", "push", str(tmp_path / "out"), f"--repo={repo}"]) == 1
    err = capsys.readouterr().err
    assert "is not a Hugging Face repository id" in err and "OWNER/NAME" in err, err
    assert not (tmp_path / "out").exists()


def test_zoo_push_prints_a_quoted_command(tmp_path, capsys):
    """The printed `hf upload` command, split as a shell splits it, is exactly hf upload REPO DIR
    (DIR with a space and a quote in its name)."""
    out = tmp_path / "my zoo's copy"
    assert cli.oscar_main(["zoo", "push", str(out), "--repo", "me/rot.ations-1", "--entry", "smollm2-135m"]) == 0
    err = capsys.readouterr().err
    cmd = err.split("upload it with: ", 1)[1].strip()
    assert shlex.split(cmd) == ["hf", "upload", "me/rot.ations-1", str(out)]


def test_oscar_zoo_missing_folder_warns(tmp_path, capsys, monkeypatch):
    """OSCAR_ZOO naming no folder: one warning naming the variable and the path; the bundled zoo
    is still searched."""
    monkeypatch.setenv("OSCAR_ZOO", str(tmp_path / "no-such-zoo"))
    monkeypatch.setattr(zoo, "_WARNED_ZOO", set())
    assert zoo.zoo_dirs() == [zoo.BUNDLED_ZOO]
    zoo.zoo_dirs()
    err = capsys.readouterr().err
    assert err.count("warning") == 1, err
    assert f"OSCAR_ZOO={tmp_path / 'no-such-zoo'} does not exist" in err and "unset OSCAR_ZOO" in err, err
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv("OSCAR_ZOO", str(tmp_path / "a-file"))
    assert cli.oscar_main(["zoo", "list"]) == 0
    assert f"OSCAR_ZOO={tmp_path / 'a-file'} is not a folder" in capsys.readouterr().err
