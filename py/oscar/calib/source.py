"""Where a model's rotations come from: the zoo, a Hugging Face Hub repository, a rotation
file, or a calibration run. One function, :func:`resolve_rotations`, for ``oscar-convert``
and any other caller."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import paths, plan, rotation
from ..core.rotfile import Rotations
from ..core.shape import ModelShape
from . import calibrate as cal, hub, zoo

#: what to do about a rotation file that is a folder
FILE_FIX = "give a rotation file written by --save-rotations, or use --rotations zoo or --rotations calibrate"


class SourceError(ValueError):
    """The rotations cannot be had from the source given (the message says why and what to do)."""


@dataclass(frozen=True)
class CalibrationSettings:
    """What ``--rotations calibrate`` runs with (:func:`oscar.calib.calibrate.calibrate`):
    data None is the shared WikiText-2 validation split; budget None: no precision plan."""
    data: str | None = None
    tokens: int = cal.DEFAULT_TOKENS
    heldout: int = cal.DEFAULT_HELDOUT
    ctx: int = cal.DEFAULT_CTX
    centre: bool = True
    budget: float | None = plan.DEFAULT_BUDGET
    device: str | None = None
    key_weighting: bool = True
    weight_exponent: float | str = rotation.KEY_WEIGHT_EXPONENT


def from_file(f: Path, shape: ModelShape, what: str) -> Rotations:
    """A rotation file, read and checked against the model; ``what`` names it in errors."""
    if f.is_dir():
        raise SourceError(f"--rotations {f} is a folder: {FILE_FIX}")
    try:
        rot = Rotations.load(f)
    except FileNotFoundError as e:
        raise SourceError(f"{e} (--rotations takes zoo, calibrate or a rotation file)") from e
    except ValueError as e:  # names the file, the key and the fix already
        raise SourceError(str(e)) from e
    rot.validate(shape, what)
    return rot


def from_zoo(shape: ModelShape, per_head: bool | None, instead_of: str | None = None) -> tuple[Rotations, str]:
    """The zoo's entry for the model, and its description (``zoo:NAME``)."""
    try:
        f, entry = zoo.find(shape, per_head=per_head)
        rot = Rotations.load(f)
    except (zoo.NoZooEntry, zoo.BadZoo) as e:
        raise SourceError(str(e)) from e
    except (ValueError, FileNotFoundError) as e:
        raise SourceError(f"zoo file {f} for this model is broken ({e}): restore it, or use "
                          "--rotations calibrate") from e
    rot.validate(shape, f"zoo file {f}")
    return rot, f"zoo:{entry['name']}" + ("" if instead_of is None else f" (in place of {instead_of})")


def from_hub(spec: str, shape: ModelShape, per_head: bool | None,
             warn: Callable[[str], None]) -> tuple[Rotations, str]:
    """A Hub repository's entry for the model; the local zoo's, after ``warn``, when the Hub
    cannot be reached and the file is not cached."""
    try:
        f, entry = hub.fetch(hub.parse(spec), shape, per_head=per_head)
    except hub.HubUnreachable as e:
        warn(f"{spec}: {e}; falling back to the local zoo ({', '.join(map(str, zoo.zoo_dirs()))})")
        return from_zoo(shape, per_head, instead_of=spec)
    except hub.HubError as e:
        raise SourceError(str(e)) from e
    try:
        rot = Rotations.load(f)
    except ValueError as e:
        raise SourceError(f"{spec}: {e}") from e
    rot.validate(shape, f"{spec} ({f.name})")
    return rot, spec + (f" ({entry['name']})" if entry and entry.get("name") else "")


def calibrated(model_src: Path, gguf_path: Path, shape: ModelShape, per_head: bool, s: CalibrationSettings,
               progress: bool) -> tuple[Rotations, str]:
    """Rotations calibrated on the model, and a line on how long it took and how well it fits."""
    try:
        rot, rep = cal.calibrate(model_src, gguf_path, shape, s.data or str(paths.WIKITEXT2_VALID), s.tokens,
                                 s.heldout, s.ctx, per_head, progress=progress, centre=s.centre, budget=s.budget,
                                 device=s.device, key_weighting=s.key_weighting, weight_exponent=s.weight_exponent)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        raise SourceError(str(e)) from e
    rot.check_limits("the calibrated rotations")
    how = (f"calibrated on {rep.fit_tokens}+{rep.heldout_tokens} tokens in "
           f"{rep.capture_s + rep.search_s:.0f} s on {rep.device} (capture {rep.capture_s:.0f} s, "
           + (f"{len(rep.weighting_scores)} clip searches and their scoring " if rep.weighting_scores
              else "clip search ")
           + f"{rep.search_s:.0f} s), attention-output error {100 * rep.rel_error:.2f} % "
           f"(fixed clips {100 * rep.rel_error_fixed:.2f} %)")
    if rep.weighting_scores:
        how += ", key weighting " + cal.exponent_name(rot.meta["calibration"].get(
            "key_weighting_exponent", 0.0)) + " chosen of " + ", ".join(
            f"{cal.exponent_name(x)} (KLD {k:.4f})" for x, k in rep.weighting_scores.items())
    return rot, how


def resolve_rotations(spec: str, shape: ModelShape, gguf_path: Path, model_src: Path, per_head: bool = False,
                      calibration: CalibrationSettings | None = None, progress: bool = True,
                      warn: Callable[[str], None] = lambda msg: None) -> tuple[Rotations, str]:
    """The rotations ``spec`` names for the model (``zoo``, ``calibrate``, ``hf:OWNER/REPO[:FILE]``
    or a rotation file), checked against ``shape``, and a description of where they came from.
    ``model_src``: what calibration loads in PyTorch (the GGUF, or a Hugging Face folder);
    ``per_head``: prefer (zoo, Hub) or calibrate per-KV-head rotations. :class:`SourceError`
    when they cannot be had, or are per layer where per head was asked for."""
    want = True if per_head else None
    if spec == "zoo":
        rot, how = from_zoo(shape, want)
    elif hub.is_hub_spec(spec):
        rot, how = from_hub(spec, shape, want, warn)
    elif spec == "calibrate":
        rot, how = calibrated(model_src, gguf_path, shape, per_head, calibration or CalibrationSettings(), progress)
    else:
        f = Path(spec)
        rot, how = from_file(f, shape, f"rotation file {f}"), f"file:{f.name}"
    if per_head and not rot.per_head:
        raise SourceError(f"--per-head asked for, but the rotations ({how}) are per layer")
    return rot, how
