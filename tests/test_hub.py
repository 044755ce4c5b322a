"""Rotations from the Hugging Face Hub (`--rotations hf:OWNER/REPO[:FILE]`), offline.

The hub repository is what `oscar zoo push` writes from the bundled zoo, laid out by the test
as huggingface_hub's cache lays out a downloaded repository (refs/main naming a commit,
snapshots/COMMIT/FILE linking to blobs/SHA256), in a temporary HF_HUB_CACHE, with
HF_HUB_OFFLINE=1. oscar-convert runs as a user runs it, in a process of its own with that
environment. The reference is the same model converted with `--rotations zoo`: the same
rotations must give a byte-identical GGUF.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from oscar import cli
from oscar.calib import zoo
from oscar.core import rotfile
from server import free_port

REPO = "oscar-test/rotations"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def convert(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from oscar.cli import convert_main; "
                           "sys.exit(convert_main())", *args, "-q"], env=env, capture_output=True, text=True,
                          timeout=300)


def lay_out_cache(cache: Path, repo: str, folder: Path) -> Path:
    """``folder``'s files as huggingface_hub caches a download of ``repo`` at main; the snapshot folder."""
    base = cache / ("models--" + repo.replace("/", "--"))
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(COMMIT)
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (base / "blobs").mkdir()
    for f in sorted(folder.iterdir()):
        blob = base / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copyfile(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    return snap


def hub_env(cache: Path, offline: bool = True, endpoint: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "OSCAR_ZOO"}
    env.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1" if offline else "0", HF_HUB_DISABLE_TELEMETRY="1")
    if endpoint:
        env["HF_ENDPOINT"] = endpoint
    return env


@pytest.fixture(scope="module")
def pushed(tmp_path_factory) -> Path:
    """`oscar zoo push` of the bundled zoo's smollm2 and gemma3 entries."""
    out = tmp_path_factory.mktemp("push") / "rotations"
    assert cli.oscar_main(["zoo", "push", str(out), "--repo", REPO, "--entry", "smollm2-135m",
                           "--entry", "gemma3-270m"]) == 0
    return out


@pytest.fixture(scope="module")
def zoo_gguf(smollm2, tmp_path_factory) -> Path:
    """The reference: SmolLM2 converted with the bundled zoo."""
    out = tmp_path_factory.mktemp("ref") / "zoo.gguf"
    p = convert([str(smollm2), "--rotations", "zoo", "-o", str(out)], hub_env(tmp_path_factory.mktemp("nohub")))
    assert p.returncode == 0, p.stderr
    return out


def test_push_folder_is_a_zoo_in_safetensors(pushed):
    """The pushed folder: safetensors files (numpy and torch read the same arrays; the header is
    JSON, no pickle), a manifest naming them, a model card naming the repository."""
    from safetensors import safe_open
    from safetensors.numpy import load_file
    names = sorted(f.name for f in pushed.iterdir())
    assert names == ["README.md", "gemma3-270m.safetensors", "manifest.json", "smollm2-135m.safetensors"]
    entries = json.loads((pushed / "manifest.json").read_text())["entries"]
    assert [e["file"] for e in entries] == ["gemma3-270m.safetensors", "smollm2-135m.safetensors"]
    card = (pushed / "README.md").read_text()
    assert f"--rotations hf:{REPO}" in card and "16f2154c4fbbff4c" in card and card.startswith("---\n")
    f = pushed / "smollm2-135m.safetensors"
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])  # the whole header is JSON
    assert json.loads(header["__metadata__"][rotfile.ST_META_KEY])["fingerprint"] == "16f2154c4fbbff4c"
    ref = rotfile.Rotations.load(zoo.BUNDLED_ZOO / "smollm2-135m.npz")  # .npz still read
    arrays = load_file(str(f))
    for k in rotfile.ARRAYS:
        np.testing.assert_array_equal(arrays[k], getattr(ref, k))
    torch = pytest.importorskip("torch")
    with safe_open(str(f), framework="pt") as t:
        assert isinstance(t.get_tensor("rot_k"), torch.Tensor)
        np.testing.assert_array_equal(t.get_tensor("rot_k").numpy(), ref.rot_k)
    got = rotfile.Rotations.load(f)
    assert got.meta == ref.meta and np.array_equal(got.clip_v, ref.clip_v)


def test_push_refuses_a_used_folder_and_unknown_entries(pushed, tmp_path, capsys):
    assert cli.oscar_main(["zoo", "push", str(pushed)]) == 1
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert cli.oscar_main(["zoo", "push", str(tmp_path / "x"), "--entry", "no-such-model"]) == 1
    err = capsys.readouterr().err
    assert "no zoo entry named no-such-model" in err and "smollm2-135m" in err and not (tmp_path / "x").exists()


def test_hub_repo_entry_for_the_model(smollm2, pushed, zoo_gguf, tmp_path):
    """hf:OWNER/REPO picks the manifest entry by fingerprint; the result is the zoo's, to the byte."""
    lay_out_cache(tmp_path / "cache", REPO, pushed)
    out = tmp_path / "hf.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)], hub_env(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr
    assert f"hf:{REPO} (smollm2-135m)" in p.stderr and "warning" not in p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()


def test_hub_repo_named_file(smollm2, pushed, zoo_gguf, tmp_path):
    lay_out_cache(tmp_path / "cache", REPO, pushed)
    out = tmp_path / "hf.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}:smollm2-135m.safetensors", "-o", str(out)],
                hub_env(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()
    # a file of the repository made for another model is refused, naming what differs
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}:gemma3-270m.safetensors", "-o", str(tmp_path / "g.gguf")],
                hub_env(tmp_path / "cache"))
    assert p.returncode == 2 and "is for another model" in p.stderr and "n_layer 18" in p.stderr
    assert not (tmp_path / "g.gguf").exists()


def test_offline_and_not_cached_falls_back_to_the_zoo(smollm2, zoo_gguf, tmp_path):
    """HF_HUB_OFFLINE=1 and the repository never fetched: the bundled zoo's entry, with a warning
    that says why and where it looked."""
    (tmp_path / "cache").mkdir()
    out = tmp_path / "fb.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)], hub_env(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "HF_HUB_OFFLINE is set" in p.stderr and str(tmp_path / "cache") in p.stderr
    assert "falling back to the local zoo" in p.stderr and f"zoo:smollm2-135m (in place of hf:{REPO})" in p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()


def test_unreachable_hub_falls_back_to_the_zoo(smollm2, zoo_gguf, tmp_path):
    """Online mode, but the endpoint refuses connections (a closed port on 127.0.0.1)."""
    (tmp_path / "cache").mkdir()
    out = tmp_path / "fb.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)],
                hub_env(tmp_path / "cache", offline=False, endpoint=f"http://127.0.0.1:{free_port()}"))
    assert p.returncode == 0, p.stderr
    assert "cannot be reached" in p.stderr and "falling back to the local zoo" in p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()


def test_unreachable_hub_and_no_zoo_entry_is_an_error(tmp_path, pushed):
    """No fallback to fall to: a model the zoo lacks (a synthetic one) is refused, nothing written."""
    from oscar.bench import synthetic
    model = tmp_path / "tiny.gguf"
    synthetic.write(model, synthetic.GEOMETRIES["tiny-hd64"])
    (tmp_path / "cache").mkdir()
    out = tmp_path / "o.gguf"
    p = convert([str(model), "--rotations", f"hf:{REPO}", "-o", str(out)], hub_env(tmp_path / "cache"))
    assert p.returncode == 2 and "falling back to the local zoo" in p.stderr
    assert "no zoo entry for this model" in p.stderr and "--rotations calibrate" in p.stderr
    assert not out.exists()


def test_repo_without_a_rotation_for_the_model(smollm2, pushed, tmp_path):
    """The repository answers but holds only other models: an error naming the fingerprints, no fallback."""
    only = tmp_path / "only-gemma"
    only.mkdir()
    shutil.copy(pushed / "gemma3-270m.safetensors", only)
    m = json.loads((pushed / "manifest.json").read_text())
    m["entries"] = [e for e in m["entries"] if e["name"] == "gemma3-270m"]
    (only / "manifest.json").write_text(json.dumps(m))
    lay_out_cache(tmp_path / "cache", REPO, only)
    out = tmp_path / "o.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)], hub_env(tmp_path / "cache"))
    assert p.returncode == 2, p.stderr
    assert f"hf:{REPO} holds no rotation for this model (fingerprint 16f2154c4fbbff4c" in p.stderr
    assert "gemma3-270m (gemma3, fingerprint dca1dfe8a30023bd)" in p.stderr and "falling back" not in p.stderr
    assert not out.exists()


class HubEmulator:
    """The part of the Hugging Face Hub's HTTP interface that hf_hub_download uses, on 127.0.0.1:
    HEAD and GET of /OWNER/REPO/resolve/REV/FILE, with the commit and ETag headers, and 404s with
    the hub's X-Error-Code (RepoNotFound, EntryNotFound). ``repos``: repository id -> folder."""

    def __init__(self, repos: dict[str, Path]):
        import http.server
        import threading
        emu = self
        self.requests: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _answer(self, body: bool) -> None:
                emu.requests.append(f"{self.command} {self.path}")
                parts = self.path.split("?")[0].strip("/").split("/")
                repo, f = "/".join(parts[:2]), None
                if len(parts) >= 5 and parts[2] == "resolve":
                    f = repos.get(repo, Path("/nonexistent")) / "/".join(parts[4:])
                if repo not in repos:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "RepoNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if f is None or not f.is_file():
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("X-Repo-Commit", COMMIT)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = f.read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(pushed, tmp_path):
    """The emulated hub serving REPO (the pushed folder) and oscar-test/bare (a rotation file, no manifest)."""
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(pushed / "smollm2-135m.safetensors", bare)
    emu = HubEmulator({REPO: pushed, "oscar-test/bare": bare})
    yield emu
    emu.close()


def test_download_then_offline(smollm2, hub, zoo_gguf, tmp_path):
    """Online, the manifest and the model's file are downloaded into the cache; afterwards the
    same command works with HF_HUB_OFFLINE=1 from the cache alone."""
    cache = tmp_path / "cache"
    out = tmp_path / "on.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)],
                hub_env(cache, offline=False, endpoint=hub.url))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()
    got = [r for r in hub.requests if r.startswith("GET")]
    assert any(r.endswith("/resolve/main/manifest.json") for r in got), hub.requests
    assert any(r.endswith("/resolve/main/smollm2-135m.safetensors") for r in got), hub.requests
    assert not any("gemma3" in r for r in hub.requests)  # only the model's entry is fetched
    n = len(hub.requests)
    out2 = tmp_path / "off.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out2)], hub_env(cache, endpoint=hub.url))
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
    assert len(hub.requests) == n and out2.read_bytes() == zoo_gguf.read_bytes()


def test_hub_answers_no_such_repo_or_no_manifest(smollm2, hub, tmp_path):
    """Errors, not fallbacks: the hub answered."""
    env = hub_env(tmp_path / "cache", offline=False, endpoint=hub.url)
    out = tmp_path / "o.gguf"
    p = convert([str(smollm2), "--rotations", "hf:oscar-test/missing", "-o", str(out)], env)
    assert p.returncode == 2 and "hf:oscar-test/missing: no such repository" in p.stderr, p.stderr
    p = convert([str(smollm2), "--rotations", "hf:oscar-test/bare", "-o", str(out)], env)
    assert p.returncode == 2 and "has no manifest.json" in p.stderr and "hf:oscar-test/bare:FILE" in p.stderr
    p = convert([str(smollm2), "--rotations", "hf:oscar-test/bare:other.safetensors", "-o", str(out)], env)
    assert p.returncode == 2 and "hf:oscar-test/bare has no file other.safetensors" in p.stderr, p.stderr
    assert "falling back" not in p.stderr and not out.exists()
    p = convert([str(smollm2), "--rotations", "hf:oscar-test/bare:smollm2-135m.safetensors", "-o", str(out)], env)
    assert p.returncode == 0, p.stderr


def test_cached_repo_lacking_the_file_offline_falls_back(smollm2, pushed, zoo_gguf, tmp_path):
    """Offline, a cached snapshot without manifest.json (fetched with hf:OWNER/REPO:FILE only):
    whether the hub has one cannot be known, so it is the fallback, naming the missing file."""
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(pushed / "smollm2-135m.safetensors", bare)
    lay_out_cache(tmp_path / "cache", REPO, bare)
    out = tmp_path / "o.gguf"
    p = convert([str(smollm2), "--rotations", f"hf:{REPO}", "-o", str(out)], hub_env(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr
    assert f"{REPO}/manifest.json is not in the local hub cache" in p.stderr and "falling back" in p.stderr
    assert out.read_bytes() == zoo_gguf.read_bytes()


@pytest.mark.parametrize("spec, words", [(f"hf:{REPO}:", "is not a file in a repository"),
                                         ("hf:justaname", "is not a repository id"),
                                         (f"hf:{REPO}:../x.safetensors", "is not a file in a repository")])
def test_bad_hub_specs(smollm2, tmp_path, capsys, spec, words):
    assert cli.convert_main([str(smollm2), "--rotations", spec, "-o", str(tmp_path / "o.gguf"), "-q"]) == 2
    err = capsys.readouterr().err
    assert words in err and "hf:OWNER/REPO" in err, err
    assert not (tmp_path / "o.gguf").exists()
