"""Command-line entry points of the oscar package."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .core.models import BUNDLED


def eval_main(argv: list[str] | None = None) -> int:
    """``oscar-eval``: quality of KV cache types against f16 (see :mod:`oscar.eval.evaluate`)."""
    from .eval import evaluate
    return evaluate.main(argv)


def bench_main(argv: list[str] | None = None) -> int:
    """``oscar-bench``: llama-bench speed and KV memory against depth (see :mod:`oscar.bench.bench`)."""
    from .bench import bench
    return bench.main(argv)


def synth_main(argv: list[str] | None = None) -> int:
    """``oscar-synth``: write a synthetic GGUF model with real shapes (see :mod:`oscar.bench.synthetic`)."""
    from .bench import synthetic
    return synthetic.main(argv)


# ----------------------------------------------------------------------------- oscar-convert

class ConvertError(Exception):
    """A user-facing error of oscar-convert (printed without a traceback, exit status 2)."""


#: exit status of oscar-convert on an error it explains (argparse's, for a usage error)
EXIT_ERROR = 2


def _resolve_model(spec: str, workdir, cleanup=None) -> tuple[Path, Path]:
    """``(gguf, pytorch_source)`` for MODEL: a zoo alias, a GGUF file, or a Hugging Face
    folder (converted to an f16 GGUF in ``workdir()``, a temporary folder made on first use,
    with llama.cpp's converter, which ``cleanup`` (an :class:`oscar.core.atomic.Cleanup`) stops
    on a signal before it removes the folder)."""
    import subprocess
    from .core import paths
    if spec in BUNDLED:
        m = BUNDLED[spec]
        p = paths.MODELS / m.file
        if not p.is_file():
            raise ConvertError(f"{spec}: {p} is missing: run scripts/fetch-models.sh {m.fetch}")
        folder = paths.MODELS / m.torch_folder
        return p, (folder if (folder / "config.json").is_file() else p)
    p = Path(spec)
    if p.is_file():
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ConvertError(f"{p} is not a GGUF file (give a .gguf, a Hugging Face folder, or one of "
                                   f"{', '.join(BUNDLED)})")
        return p, p
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ConvertError(f"{p} is a folder without config.json: not a Hugging Face model folder")
        conv = paths.ROOT / "llama.cpp" / "convert_hf_to_gguf.py"
        if not conv.is_file():
            raise ConvertError(f"{conv} is missing: run scripts/fetch-llama.sh to converting Hugging Face folders")
        out = workdir() / (p.name + "-f16.gguf")
        print(f"oscar-convert: converting {p} to GGUF with {conv.name}", file=sys.stderr)
        proc = subprocess.Popen([sys.executable, str(conv), str(p), "--outfile", str(out), "--outtype", "f16"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if cleanup is not None:
            cleanup.add_process(proc)
        try:
            _, stderr = proc.communicate()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if proc.returncode != 0:
            raise ConvertError(f"{conv.name} failed on {p}:\n{stderr[-2000:]}")
        return out, p
    raise ConvertError(f"MODEL {spec}: no such file or folder, and not a zoo alias ({', '.join(BUNDLED)})")


def convert_main(argv: list[str] | None = None) -> int:
    """``oscar-convert``: a GGUF with calibrated OSCAR rotations and clip ratios embedded.
    Returns 0, or 2 (``oscar-convert: error: ...`` on stderr, nothing written)."""
    from .calib import calibrate as cal, zoo
    from .core import rotation

    ap = argparse.ArgumentParser(
        prog="oscar-convert",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write a copy of a model GGUF that carries OSCAR's calibrated KV rotations "
                    "(blk.N.attn_k_oscar_rot, blk.N.attn_v_oscar_rot, and blk.N.attn_q_oscar_rot with a key "
                    "weighting) and per-layer clip ratios "
                    "(oscar.clip_k, oscar.clip_v), which our llama.cpp applies to an oscar2 KV cache "
                    "in place of its data-free Hadamard rotation. All original tensors and metadata are "
                    "copied unchanged; the input is never modified.",
        epilog="rotations:\n"
               "  zoo        use the bundled (or $OSCAR_ZOO) rotation file whose fingerprint matches the model\n"
               "  calibrate  run the model in PyTorch over --calib-data (on --device: a CUDA GPU, Apple's MPS or the\n"
               "             CPU; SmolLM2-135M with 32k tokens needs ~18 CPU-minutes: about 10 min on 2 idle cores),\n"
               "             compute attention-aware covariances,\n"
               "             rotations U*H*P, and search the clip ratios per layer against the attention-output error\n"
               "  hf:OWNER/REPO[:FILE]\n"
               "             from a Hugging Face Hub repository written by `oscar zoo push` (the manifest entry whose\n"
               "             fingerprint is the model's, or FILE) through huggingface_hub and its cache (HF_HUB_CACHE,\n"
               "             HF_HUB_OFFLINE); when the hub cannot be reached and the file is not cached, the local zoo's\n"
               "             entry is used, with a warning\n"
               "  FILE       a rotation file (.safetensors or .npz) written by --save-rotations (checked against the model)\n\n"
               "examples:\n"
               "  oscar-convert smollm2-135m --rotations zoo -o smollm2-oscar.gguf\n"
               "  oscar-convert model.gguf --rotations calibrate --calib-data valid.txt -o model-oscar.gguf\n"
               "  oscar zoo list\n\n"
               "exit status: 0 written; 2 refused (the message names what is wrong and the fix; nothing is written);\n"
               "1 a read or write failed (disk full, permissions; nothing is written); killed by SIGINT/SIGTERM:\n"
               "that signal's status, and no partial output is left behind.\n"
               "Every value written is checked against the limits llama.cpp enforces (py/oscar/limits.json).")
    ap.add_argument("model", metavar="MODEL",
                    help=f"GGUF file, Hugging Face folder, or zoo alias ({', '.join(BUNDLED)})")
    ap.add_argument("--rotations", required=True, metavar="{zoo,calibrate,hf:OWNER/REPO[:FILE],FILE}",
                    help="where the rotations come from")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.gguf", help="output GGUF (must not exist unless --force)")
    ap.add_argument("--calib-data", default=None,
                    help="calibration text: a text file or 'wikitext2' (needs network and `datasets`); "
                         "default: the shared WikiText-2 validation split. Never the text you evaluate on.")
    ap.add_argument("--calib-tokens", type=int, default=cal.DEFAULT_TOKENS,
                    help=f"tokens for the covariances (default {cal.DEFAULT_TOKENS})")
    ap.add_argument("--heldout-tokens", type=int, default=cal.DEFAULT_HELDOUT,
                    help=f"further tokens that score the clip search (default {cal.DEFAULT_HELDOUT})")
    ap.add_argument("--calib-ctx", type=int, default=cal.DEFAULT_CTX, help=f"tokens per chunk (default {cal.DEFAULT_CTX})")
    ap.add_argument("--per-head", action="store_true", help="one rotation per layer and KV head (default: per layer)")
    ap.add_argument("--device", default=None, metavar="{cuda,cuda:N,mps,cpu}",
                    help="with --rotations calibrate: where PyTorch runs the model (default: the best available, "
                         "cuda, then mps, then cpu; a device PyTorch does not see is an error)")
    ap.add_argument("--torch-model", metavar="DIR", default=None,
                    help="with --rotations calibrate: load this Hugging Face folder in PyTorch instead of dequantising "
                         "the GGUF (it must hold the same weights, e.g. written by `oscar dequantize MODEL.gguf DIR`; "
                         "checked against the GGUF's key projection)")
    ap.add_argument("--fold-v", action="store_true",
                    help="fold the V rotation into attn_v and attn_output instead of storing it (float weights only: "
                         "F32, F16, BF16), so that llama.cpp multiplies neither V nor the attention output by a rotation "
                         "at run time: two fewer matrix products per layer and token. Quantize the output afterwards "
                         "(llama-quantize keeps the OSCAR tensors and metadata)")
    ap.add_argument("--kv-bits", type=float, default=None, metavar="B",
                    help="the budget of the precision plan, in bits per value over the whole cache at 32k tokens "
                         "(windows and every layer counted; default 3.0 for --rotations calibrate, else the rotation "
                         "file's own plan): layers whose cache a sliding window bounds are stored in q8_0 (q4_0 where the "
                         "budget needs it), and the growing layers' keys are raised from oscar2 to oscar3, q4_0 or q8_0 where calibration "
                         "measured the largest gain per bit (a rotation file keeps those measurements, so its plan is made "
                         "again). Under every layer in oscar2 (about 2.7 bits with the default windows) the growing layers' "
                         "K and V start from oscar2s (2.25 bits; llama.cpp runs it on the CPU only) and are raised from there")
    ap.add_argument("--kv-plan", choices=("auto", "off"), default="auto",
                    help="auto: write the precision plan (from the calibration or the rotation file) into the GGUF, "
                         "so that -ctk oscar2 -ctv oscar2 stores each layer as planned (llama.cpp's --kv-plan off "
                         "overrides it at run time); off: no plan, every layer in oscar2 (default: auto)")
    ap.add_argument("--no-centre", action="store_true",
                    help="with --rotations calibrate: no centring means (by default each KV head's mean key and value "
                         "are subtracted before the 2-bit quantiser, exactly, and written into the GGUF)")
    ap.add_argument("--no-key-weighting", action="store_true",
                    help="with --rotations calibrate: keys and queries share the orthogonal rotation R (by default "
                         "keys use W R and queries W^-1 R, W = U diag((λ/s)^1/4) Uᵀ from the query energy λ and the key "
                         "variance s along each eigen-direction U of the queries: exact for attention, it spends the "
                         "2-bit levels on the key directions the queries read; blk.N.attn_q_oscar_rot is then written)")
    ap.add_argument("--key-weighting-exponent", metavar="A", default=None,
                    help="with --rotations calibrate: the key weighting's d = (λ/s)^A, 0 < A <= 0.5 (default "
                         f"{rotation.KEY_WEIGHT_EXPONENT:g}; 1/4 is best for the average query, a smaller A is milder "
                         "toward the rare queries that read the directions it shrinks); 'auto': calibrate with no "
                         "weighting, 1/8 and 1/4, simulate each result's 2-bit cache on "
                         f"{cal.SCORE_TOKENS} further tokens of the calibration text and keep the one closest to the "
                         "unquantised model's outputs (KL divergence; about three times the clip search's time)")
    ap.add_argument("--save-rotations", metavar="FILE.safetensors",
                    help="also write the rotations as a rotation file (safetensors, or .npz by its name)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing output")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    a = ap.parse_args(argv)
    out = Path(a.output)
    from .core import atomic
    try:
        return _convert(a, out)
    except atomic.WriteError as e:  # creating or renaming the output failed: nothing was written
        print(f"oscar-convert: error: {e}; {out} was not written", file=sys.stderr)
        return 1
    except (ConvertError, ValueError, FileExistsError, FileNotFoundError, zoo.NoZooEntry) as e:
        print(f"oscar-convert: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:  # reading or writing failed (disk full, permissions): nothing was written
        print(f"oscar-convert: error: {e}; {out} was not written", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # the partial output and work folder are already removed (oscar.core.atomic.Cleanup)
        print(f"oscar-convert: interrupted: {out} was not written", file=sys.stderr)
        if argv is None:  # the command line: end by SIGINT (no traceback), so the exit status says so
            import signal
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise


def _weighting_exponent(spec: str) -> float | str:
    """``--key-weighting-exponent``: ``auto``, or a number in (0, 0.5]."""
    if spec.strip().lower() == "auto":
        return "auto"
    try:
        x = float(spec)
    except ValueError:
        raise ConvertError(f"--key-weighting-exponent {spec!r} is not a number: use 0 < A <= 0.5 or auto") from None
    if not 0 < x <= 0.5:  # (also refuses nan)
        raise ConvertError(f"--key-weighting-exponent {spec} is out of range: use 0 < A <= 0.5, auto, "
                           "or --no-key-weighting for none")
    return x


def _check_flags(a: argparse.Namespace, out: Path) -> None:
    """Every refusal of the command line that needs neither the model nor the rotations."""
    from .core import atomic
    if atomic.check_file_output(out) and not a.force:  # refuses a link, folder, device or FIFO, --force or not
        raise ConvertError(f"output {out} already exists: pass --force to overwrite it, or choose another -o")
    if not out.resolve().parent.is_dir():
        raise ConvertError(f"the folder of output {out} ({out.resolve().parent}) does not exist: create it first")
    if a.calib_tokens < 64 or a.heldout_tokens < 400:
        raise ConvertError("--calib-tokens must be >= 64 and --heldout-tokens >= 400 (the clip search needs "
                           "queries beyond the 64 sink + 256 recent 16-bit tokens)")
    if a.kv_bits is not None and not 2.0 <= a.kv_bits <= 16.0:
        from .core import plan as kvplan
        # every layer in oscar2 with the default windows (64 sink + 256 recent), as the plan counts it
        o2 = kvplan.bits_per_value([kvplan.LayerShape(64, 64)], ["oscar2"], ["oscar2"], kvplan.BUDGET_CTX)
        raise ConvertError(f"--kv-bits {a.kv_bits}: the budget is in bits per value, between 2 and 16 "
                           f"(every layer in oscar2 with the default windows costs {o2:.2f} at "
                           f"{kvplan.BUDGET_CTX // 1024}k tokens)")


def _check_calibration_flags(a: argparse.Namespace) -> float | str:
    """The flags that only ``--rotations calibrate`` takes; returns the key weighting exponent."""
    from .core import rotation
    if a.no_key_weighting and a.rotations != "calibrate":
        raise ConvertError("--no-key-weighting is only used with --rotations calibrate (a rotation file keeps "
                           "the weighting it was calibrated with)")
    exponent: float | str = rotation.KEY_WEIGHT_EXPONENT
    if a.key_weighting_exponent is not None:
        if a.rotations != "calibrate" or a.no_key_weighting:
            raise ConvertError("--key-weighting-exponent is only used with --rotations calibrate and the key "
                               "weighting on (a rotation file keeps the weighting it was calibrated with)")
        exponent = _weighting_exponent(a.key_weighting_exponent)
    if a.device and a.rotations != "calibrate":
        raise ConvertError("--device is only used with --rotations calibrate (where PyTorch runs the model)")
    if a.torch_model:
        if a.rotations != "calibrate":
            raise ConvertError("--torch-model is only used with --rotations calibrate")
        if not (Path(a.torch_model) / "config.json").is_file():
            raise ConvertError(f"--torch-model {a.torch_model}: not a Hugging Face model folder (no config.json); "
                               "write one with `oscar dequantize MODEL.gguf DIR`")
    return exponent


def _calibration_settings(a: argparse.Namespace, exponent: float | str):
    """``--calib-*``, ``--kv-bits``/``--kv-plan``, ``--no-centre``, ``--device`` and the key
    weighting as :class:`oscar.calib.source.CalibrationSettings`."""
    from .calib.source import CalibrationSettings
    from .core import plan as kvplan
    budget = None if a.kv_plan == "off" else (kvplan.DEFAULT_BUDGET if a.kv_bits is None else a.kv_bits)
    return CalibrationSettings(a.calib_data, a.calib_tokens, a.heldout_tokens, a.calib_ctx, not a.no_centre, budget,
                               a.device, not a.no_key_weighting, exponent)


def _replan(rot, a: argparse.Namespace, how: str) -> None:
    """``--kv-bits`` on rotations that were not calibrated in this run: their plan made again
    for that budget from the measurements they keep (``rot.meta["plan"]`` replaced)."""
    if a.kv_bits is None or a.rotations == "calibrate" or a.kv_plan != "auto":
        return
    from .core import plan as kvplan
    try:
        new = kvplan.replan(rot.meta.get("plan"), a.kv_bits, rot.meta.get("sink_tokens", 64),
                            rot.meta.get("recent_tokens", 256))
    except ValueError as e:
        raise ConvertError(f"--kv-bits {a.kv_bits} with {how}: {e}") from e
    rot.meta["plan"] = {**rot.meta["plan"], **new.as_meta(a.kv_bits)}


def _summary(rot, shape, out: Path, fold_v: bool, plan: dict | None, how: str, seconds: float) -> list[str]:
    """What oscar-convert prints when it has written ``out``: notes and warnings on the plan,
    then one line on what was written."""
    lines = []
    kind = ("per-head" if rot.per_head else "per-layer") + (", V's folded into the weights" if fold_v else "")
    extra = ", centred" if rot.mean_k is not None else ""
    extra += ", keys weighted (R_K = W R, R_Q = W^-1 R)" if rot.weight_k is not None else ""
    extra += f", windows {rot.meta.get('sink_tokens', 64)} sink + {rot.meta.get('recent_tokens', 256)} recent"
    if plan:
        base = plan.get("base", "oscar2")
        n_b = sum(t == base for t in plan["type_k"]), sum(t == base for t in plan["type_v"])
        extra += (f", plan: {base} for K in {n_b[0]} and V in {n_b[1]} of {shape.n_layer} layers, "
                  f"{plan.get('bits_per_value', float('nan')):.2f} bits/value at 32k")
        if base == "oscar2s":
            lines.append("oscar-convert: note: the plan stores layers in oscar2s (2.25 bits), which llama.cpp runs on "
                         "the CPU only (a GPU refuses it; -nkvo keeps the cache on the CPU); a budget of "
                         f"{plan.get('bits_all_oscar2', 2.69):.2f} bits or more keeps every layer on oscar2 and above")
        if plan.get("bits_per_value", 0) > plan.get("budget_bits", float("inf")) + 1e-9:
            if base == "oscar2" and any(t == "oscar2" for t in plan["type_k"]) and not plan.get("low_measured", True):
                why = ("every growing layer is oscar2, and the rotation file holds no measurements of oscar2s (2.25 "
                       "bits), which a budget under every layer in oscar2 needs; recalibrate (--rotations calibrate "
                       f"--kv-bits {plan['budget_bits']:g})")
            else:
                why = (f"every growing layer is {base} and every sliding layer q4_0 already; a larger --kv-bits states "
                       "what the cache costs")
            lines.append(f"oscar-convert: warning: the plan needs {plan['bits_per_value']:.2f} bits/value at 32k, over "
                         f"its budget of {plan['budget_bits']:g}: {why}")
    lines.append(f"oscar-convert: wrote {out} ({shape.arch}, {shape.n_layer} layers, {kind} rotations "
                 f"D={shape.head_dim}{extra}, clip K {rot.clip_k.min():.3f}-{rot.clip_k.max():.3f} "
                 f"V {rot.clip_v.min():.3f}-{rot.clip_v.max():.3f}; {how}) in {seconds:.1f} s")
    return lines


def _convert(a: argparse.Namespace, out: Path) -> int:
    """The body of :func:`convert_main`, which reports the errors raised here: check the flags,
    resolve the model and the rotations, make the plan again for ``--kv-bits``, write, summarise.

    Temporaries: the output is written to ``.OUT.oscar-convert-<pid>-<random>.part`` and a
    Hugging Face MODEL is converted in a folder ``.OUT.oscar-convert-<pid>-<random>.d``, both
    beside OUT; both are removed at the end, on an exception and on SIGINT/SIGTERM, and a
    SIGKILL's leftovers are removed by the next run for the same OUT (:mod:`oscar.core.atomic`)."""
    import time
    from .calib import source
    from .core import atomic, gguf_io
    t0 = time.time()
    _check_flags(a, out)
    atomic.remove_stale(out, gguf_io.TEMP_TOOL)  # what a killed run left (its .part file, its work folder)
    with atomic.Cleanup() as cleanup:
        work: list[Path] = []

        def workdir() -> Path:
            if not work:
                work.append(cleanup.add(atomic.create_temp_dir(out, gguf_io.TEMP_TOOL)))
            return work[0]
        try:
            gguf_path, src = _resolve_model(a.model, workdir, cleanup)
            exponent = _check_calibration_flags(a)
            if a.torch_model:
                src = Path(a.torch_model)
            if out.exists() and out.resolve() == gguf_path.resolve():
                raise ConvertError(f"output {out} is the input model: the input is never modified, choose another -o")
            shape = gguf_io.model_shape(gguf_path)
            if a.fold_v:  # before any calibration: nothing is lost on a refusal
                gguf_io.check_foldable(gguf_io.open_reader(gguf_path), gguf_path)
            try:
                rot, how = source.resolve_rotations(
                    a.rotations, shape, gguf_path, src, a.per_head, _calibration_settings(a, exponent),
                    progress=not a.quiet, warn=lambda msg: print(f"oscar-convert: warning: {msg}", file=sys.stderr))
            except source.SourceError as e:
                raise ConvertError(str(e)) from e
            _replan(rot, a, how)
            if a.save_rotations:  # (with the plan written into the GGUF)
                rot.save(a.save_rotations)
            gguf_io.write_oscar_gguf(gguf_path, out, rot, force=a.force, progress=not a.quiet, fold_v=a.fold_v,
                                     plan=a.kv_plan == "auto")
        finally:
            cleanup.remove_all()  # the work folder (the .part file is gone: renamed, or removed by the writer)
    plan = rot.meta.get("plan") if a.kv_plan == "auto" else None
    for line in _summary(rot, shape, out, a.fold_v, plan, how, time.time() - t0):
        print(line, file=sys.stderr)
    return 0


def oscar_main(argv: list[str] | None = None) -> int:
    """``oscar``: small utilities (``oscar zoo list``)."""
    from .calib import zoo
    from .core import rotfile

    ap = argparse.ArgumentParser(prog="oscar", description="OSCAR utilities.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    z = sub.add_parser("zoo", help="the rotation zoo (bundled zoo/ and $OSCAR_ZOO)")
    zs = z.add_subparsers(dest="zoo_cmd", required=True)
    zs.add_parser("list", help="print the zoo entries")
    za = zs.add_parser("add", help="add a rotation file (from oscar-convert --save-rotations) to a zoo folder")
    za.add_argument("name", help="entry name, e.g. my-model-7b")
    za.add_argument("file", help="rotation .npz")
    za.add_argument("--dir", default=None, help="zoo folder (default: $OSCAR_ZOO)")
    za.add_argument("--half", action="store_true",
                    help="store the rotations as float16 (half the file; made orthogonal again on load)")
    zp = zs.add_parser("push", help="write a folder ready to upload to a Hugging Face Hub repository (safetensors "
                                    "rotation files, manifest.json, README.md model card)",
                       description="Write DIR with every zoo entry (or those named with --entry) as NAME.safetensors, "
                                   "the manifest and a model card; upload it with `hf upload OWNER/REPO DIR`, after "
                                   "which `oscar-convert MODEL --rotations hf:OWNER/REPO` finds the model's entry.")
    zp.add_argument("folder", metavar="DIR", help="output folder (must not exist or be empty)")
    zp.add_argument("--repo", default="OWNER/REPO", help="the repository id the model card's examples name")
    zp.add_argument("--entry", action="append", default=None, metavar="NAME", help="push only this entry (repeatable)")
    zp.add_argument("--half", action="store_true", help="store the rotations as float16 (half the size)")
    dq = sub.add_parser("dequantize", help="save a GGUF model as a float32 Hugging Face folder, so calibration "
                                           "loads it in seconds (oscar-convert --torch-model DIR)")
    dq.add_argument("gguf", help="model GGUF")
    dq.add_argument("folder", help="output folder (must not exist or be empty)")
    a = ap.parse_args(argv)
    if a.cmd == "dequantize":
        import time
        from .calib import capture
        t0 = time.time()
        try:
            info = capture.save_dequantized(a.gguf, a.folder)
        except (ValueError, FileNotFoundError, FileExistsError) as e:
            print(f"oscar dequantize: error: {e}", file=sys.stderr)
            return 1
        print(f"oscar dequantize: wrote {a.folder} ({info.model_type}, {info.n_layer} layers, head_dim "
              f"{info.head_dim}) in {time.time() - t0:.0f} s", file=sys.stderr)
        return 0
    if a.cmd == "zoo" and a.zoo_cmd == "list":
        # a broken manifest or entry file is reported and the listing goes on; exit status 1 then
        rows, problems = zoo.list_rows()
        print(zoo.format_rows(rows))
        for msg in problems:
            print(f"oscar zoo list: error: {msg}", file=sys.stderr)
        if problems:
            return 1
    elif a.cmd == "zoo" and a.zoo_cmd == "push":
        try:
            files = zoo.push_folder(a.folder, a.repo, a.entry, half=a.half)
        except (ValueError, LookupError, OSError) as e:
            print(f"oscar zoo push: error: {e}", file=sys.stderr)
            return 1
        n = sum(f.suffix == ".safetensors" for f in files)
        mib = sum(f.stat().st_size for f in files) / 2**20
        print(f"oscar zoo push: wrote {a.folder} ({n} rotation files, manifest.json, README.md; {mib:.1f} MiB); "
              f"upload it with: hf upload {shlex.quote(a.repo)} {shlex.quote(a.folder)}", file=sys.stderr)
    elif a.cmd == "zoo" and a.zoo_cmd == "add":
        import os
        d = a.dir or os.environ.get("OSCAR_ZOO")
        if not d:
            print("oscar zoo add: error: give --dir or set OSCAR_ZOO to your zoo folder", file=sys.stderr)
            return 1
        try:
            f = zoo.add(d, a.name, rotfile.Rotations.load(a.file), half=a.half)
        except (ValueError, OSError) as e:
            print(f"oscar zoo add: error: {e}", file=sys.stderr)
            return 1
        print(f"oscar zoo add: wrote {f} ({f.stat().st_size/2**20:.1f} MiB, {'float16' if a.half else 'float32'} "
              f"rotations) and its manifest entry", file=sys.stderr)
    return 0
