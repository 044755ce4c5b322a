"""Rotations from the Hugging Face Hub: ``--rotations hf:OWNER/REPO[:FILE]``.

A hub repository of OSCAR rotations is a zoo folder as ``oscar zoo push`` writes it:
rotation files (safetensors) and ``manifest.json`` (:mod:`oscar.calib.zoo`). ``hf:OWNER/REPO``
takes the manifest entry whose fingerprint is the model's; ``hf:OWNER/REPO:FILE`` takes that
file (checked against the model like any rotation file).

Files come through huggingface_hub and its cache (``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``,
``HF_ENDPOINT`` and ``HF_TOKEN`` as huggingface_hub reads them), so a repository fetched once
is used offline afterwards. When the hub cannot be reached (offline mode, no network, the
endpoint down) and the file is not in the cache, :func:`fetch` raises :class:`HubUnreachable`,
on which ``oscar-convert`` falls back to the bundled zoo and says so. A repository that does
not exist, or holds no rotation for the model, is an error (:class:`HubError`), never a
fallback: the hub answered, and what it said is what the user must fix.
"""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..core.gguf_io import ModelShape

PREFIX = "hf:"
#: seconds the reachability probe of the endpoint waits
PROBE_TIMEOUT_S = 5.0
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class HubError(ValueError):
    """The hub answered, and the repository or file cannot serve this model (the message says why)."""


class HubUnreachable(OSError):
    """The hub cannot be reached and the file is not in the local cache."""


@dataclass(frozen=True)
class HubSpec:
    """``hf:OWNER/REPO[:FILE]`` parsed."""
    repo: str
    file: str | None = None

    def __str__(self) -> str:
        return f"{PREFIX}{self.repo}" + (f":{self.file}" if self.file else "")


def check_repo_id(repo: str, what: str = "repository") -> str:
    """``repo`` if it is a Hub repository id ``OWNER/NAME`` (letters, digits, ``-``, ``_``, ``.``;
    neither part starting with ``-`` or ``.``, no ``..``, at most 96 characters a part), else
    :class:`HubError` naming it."""
    if not isinstance(repo, str) or not _REPO_RE.match(repo) or ".." in repo \
            or any(len(part) > 96 for part in repo.split("/")):
        raise HubError(f"{what} {repo!r} is not a Hugging Face repository id: give OWNER/NAME, each part letters, "
                       "digits, '-', '_' or '.' (not starting with '-' or '.', no '..', at most 96 characters), "
                       "e.g. oscar-kv/rotations")
    return repo


def is_hub_spec(s: str) -> bool:
    return s.startswith(PREFIX)


def parse(spec: str) -> HubSpec:
    """Parse ``hf:OWNER/REPO[:FILE]``; :class:`HubError` names what is wrong and the form."""
    form = "hf:OWNER/REPO (the manifest's entry for the model) or hf:OWNER/REPO:FILE"
    if not spec.startswith(PREFIX):
        raise HubError(f"--rotations {spec}: not a hub path: use {form}")
    body = spec[len(PREFIX):]
    repo, _, file = body.partition(":")
    if not _REPO_RE.match(repo):
        raise HubError(f"--rotations {spec}: '{repo}' is not a repository id: use {form}, e.g. hf:oscar-kv/rotations")
    if _ and (not file or file.startswith("/") or ".." in Path(file).parts):
        raise HubError(f"--rotations {spec}: '{file}' is not a file in a repository: use {form}")
    return HubSpec(repo, file or None)


def _offline() -> bool:
    from huggingface_hub import constants
    return bool(constants.HF_HUB_OFFLINE)


def endpoint() -> str:
    from huggingface_hub import constants
    return constants.ENDPOINT


def cache_dir() -> str:
    from huggingface_hub import constants
    return str(constants.HF_HUB_CACHE)


def probe() -> str | None:
    """None when the endpoint answers HTTP at all (any status), else why it cannot be reached.
    One request, :data:`PROBE_TIMEOUT_S` seconds at most (huggingface_hub itself retries a
    refused connection for about 20 s per file)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(endpoint(), method="HEAD"), timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{endpoint()} cannot be reached ({reason})"


def _download(spec: HubSpec, filename: str, why_offline: str | None) -> Path:
    """One file of the repository through huggingface_hub: from the hub, or from the cache only
    when ``why_offline`` says the hub cannot be reached."""
    from huggingface_hub import errors, hf_hub_download
    remote_missing = tuple(c for c in (getattr(errors, "RemoteEntryNotFoundError", None), errors.EntryNotFoundError)
                           if c is not None)
    try:
        return Path(hf_hub_download(spec.repo, filename, local_files_only=why_offline is not None))
    except errors.LocalEntryNotFoundError as e:
        why = why_offline or "the download failed"
        raise HubUnreachable(f"{spec.repo}/{filename} is not in the local hub cache ({cache_dir()}) and {why}") from e
    except errors.OfflineModeIsEnabled as e:
        raise HubUnreachable(f"{spec.repo}/{filename}: HF_HUB_OFFLINE is set and the file is not cached") from e
    except errors.RepositoryNotFoundError as e:
        raise HubError(f"hf:{spec.repo}: no such repository on {endpoint()} (or it is private or gated: log in "
                       "with `hf auth login` or set HF_TOKEN); check the name") from e
    except errors.RevisionNotFoundError as e:
        raise HubError(f"hf:{spec.repo}: the repository has no main revision ({e})") from e
    except remote_missing as e:
        raise HubError(f"hf:{spec.repo} has no file {filename}") from e
    except errors.HfHubHTTPError as e:  # 5xx and the like: reachable, but not serving
        raise HubUnreachable(f"{endpoint()} failed on {spec.repo}/{filename} ({e})") from e


def _match(spec: HubSpec, manifest: Path, shape: ModelShape, per_head: bool | None) -> dict:
    """The manifest entry for ``shape`` (by fingerprint, of the kind asked for)."""
    try:
        items = json.loads(manifest.read_text())["entries"]
        if not isinstance(items, list) or not all(isinstance(e, dict) and isinstance(e.get("file"), str)
                                                  for e in items):
            raise ValueError("'entries' must be a list of objects with a 'file'")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise HubError(f"hf:{spec.repo}: its manifest.json is not an OSCAR zoo manifest ({e}); give the file as "
                       f"hf:{spec.repo}:FILE") from e
    hits = [e for e in items if e.get("fingerprint") == shape.fingerprint]
    if per_head is not None:
        hits = [e for e in hits if bool(e.get("per_head")) == per_head]
    if not hits:
        held = ", ".join(f"{e.get('name', e['file'])} ({e.get('arch', '?')}, fingerprint {e.get('fingerprint', '?')})"
                         for e in items) or "no entries"
        kind = "" if per_head is None else (" per-head" if per_head else " per-layer")
        raise HubError(f"hf:{spec.repo} holds no{kind} rotation for this model (fingerprint {shape.fingerprint}, "
                       f"{shape.describe()}); it holds {held}: use --rotations calibrate, or a repository made "
                       "for this model")
    return hits[0]


def fetch(spec: HubSpec, shape: ModelShape, per_head: bool | None = None) -> tuple[Path, dict | None]:
    """The local path of the rotation file for ``shape`` named by ``spec``, and its manifest
    entry (None for ``hf:OWNER/REPO:FILE``). Raises :class:`HubError` (the repository or file
    cannot serve this model) or :class:`HubUnreachable` (offline, and not in the cache)."""
    try:
        import huggingface_hub  # noqa: F401
    except ImportError as e:
        raise HubError("--rotations hf:... needs the huggingface_hub package: pip install huggingface_hub") from e
    why_offline = "HF_HUB_OFFLINE is set" if _offline() else probe()
    if spec.file:
        return _download(spec, spec.file, why_offline), None
    try:
        manifest = _download(spec, "manifest.json", why_offline)
    except HubError as e:
        if "no file manifest.json" not in str(e):
            raise
        raise HubError(f"hf:{spec.repo} has no manifest.json (it is not a zoo as `oscar zoo push` writes one): "
                       f"name the rotation file, hf:{spec.repo}:FILE") from e
    entry = _match(spec, manifest, shape, per_head)
    return _download(spec, entry["file"], why_offline), entry
