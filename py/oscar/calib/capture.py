"""Capture post-RoPE Q, K, V of every attention layer with PyTorch + transformers.

The model runs over calibration text in chunks of ``ctx`` tokens (one unpadded
sequence per forward). A function registered with transformers'
``AttentionInterface`` (``oscar_capture``) replaces the attention of every layer: it
hands the post-RoPE ``query`` ``[1, Hq, T, D]``, ``key`` and ``value`` ``[1, Hkv, T, D]``
to an observer, then computes causal attention itself (transformers passes no mask
for one unpadded sequence, so the mask is built here: causal, plus the layer's
sliding window where it has one).

Statistics are streamed (:class:`oscar.calib.covariance.LayerMoments`); only the small
held-out set used by the clip search (:mod:`oscar.calib.clip`) is kept as activations.

Device: the model runs where :func:`load_model` puts it (``cpu``, ``cuda`` or ``mps``;
:func:`best_device` picks one), in float32 on every device. The captured Q, K and V of each
layer are handed to the observer on the CPU (float32 numpy), where the float64 moments
are summed, so the statistics are those of the CPU run up to the device's float32 rounding.

Coordinates: everything here is in Hugging Face's head layout. For architectures
whose GGUF conversion permutes the Q/K rows (llama: llama.cpp's "normal" RoPE pairs
dims (2i, 2i+1), Hugging Face's pairs (i, i+D/2)), :func:`qk_permutation` finds the
permutation so rotations can be expressed in llama.cpp's layout.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .covariance import LayerMoments

#: transformers ``model_type`` values whose attention the capture supports
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")
#: GGUF ``general.architecture`` values the capture supports (transformers loads them)
SUPPORTED_GGUF_ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma3")

CAPTURE_ATTN = "oscar_capture"

#: observer(layer_idx, q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D], scaling, sliding_window)
Observer = Callable[[int, np.ndarray, np.ndarray, np.ndarray, float, "int | None"], None]
_observer: Observer | None = None


class UnsupportedModel(ValueError):
    """The model's architecture is not one the capture supports."""


#: the devices the capture runs on, in the order :func:`best_device` prefers them
DEVICES = ("cuda", "mps", "cpu")


def best_device() -> str:
    """``cuda`` when PyTorch sees a CUDA GPU, else ``mps`` (Apple silicon), else ``cpu``."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def check_device(device: str | None) -> str:
    """``device`` (``cuda``, ``cuda:N``, ``mps``, ``cpu``; None or ``auto``: :func:`best_device`) if
    PyTorch can run on it; ValueError naming what PyTorch sees and the fix otherwise (never a
    silent move to another device)."""
    import torch
    if device in (None, "auto"):
        return best_device()
    kind, _, index = device.partition(":")
    if kind not in DEVICES or (index and (kind != "cuda" or not index.isdigit())):
        raise ValueError(f"--device {device}: use one of {', '.join(DEVICES)} (cuda:N for the N-th GPU), or "
                         "leave it out for the best available")
    if kind == "cuda":
        if not torch.cuda.is_available():
            built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ValueError(f"--device {device}: PyTorch {torch.__version__} ({built}) sees no CUDA GPU; "
                             "use --device cpu, or install a CUDA build of PyTorch on a machine with a GPU")
        if index and int(index) >= torch.cuda.device_count():
            raise ValueError(f"--device {device}: PyTorch sees {torch.cuda.device_count()} CUDA GPU(s) "
                             f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"--device mps: PyTorch {torch.__version__} has no MPS device here (Apple silicon "
                             "with macOS 12.3+ only); use --device cpu")
    return device


# ----------------------------------------------------------------------------- attention

def attention_mask(t: int, sliding_window: int | None = None, device=None):
    """Boolean ``[T, T]`` mask, True where query i may attend key j: ``j <= i`` and,
    with a sliding window, ``i - j < sliding_window`` (transformers' convention)."""
    import torch
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    m = j <= i
    if sliding_window is not None:
        m &= (i - j) < sliding_window
    return m


def reference_attention(query, key, value, scaling: float, sliding_window: int | None = None,
                        extra_mask=None, softcap: float | None = None):
    """Causal attention, ``[B, Hq, T, D]`` x ``[B, Hkv, T, D]`` -> ``[B, Hq, T, D]``
    (float32 softmax; GQA by repeating each KV head over its G query heads)."""
    import torch
    b, hq, t, d = query.shape
    g = hq // key.shape[1]
    k = key.repeat_interleave(g, dim=1)
    v = value.repeat_interleave(g, dim=1)
    s = torch.matmul(query.float(), k.float().transpose(-1, -2)) * scaling
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    s = s.masked_fill(~attention_mask(t, sliding_window, s.device), float("-inf"))
    if extra_mask is not None:
        s = s.masked_fill(~extra_mask, float("-inf")) if extra_mask.dtype == torch.bool else s + extra_mask
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v.float()).to(query.dtype)


def _capture_attention(module, query, key, value, attention_mask_, dropout=0.0, scaling=None,
                       sliding_window=None, softcap=None, **kwargs):
    """The ``oscar_capture`` attention function (AttentionInterface signature)."""
    if scaling is None:
        scaling = module.head_dim ** -0.5
    if query.shape[0] != 1:
        raise ValueError("oscar_capture runs one unpadded sequence at a time")
    if _observer is not None:
        def f(x):
            return x[0].transpose(0, 1).detach().float().cpu().numpy()  # [H, T, D] -> [T, H, D]
        _observer(int(module.layer_idx), f(query), f(key), f(value), float(scaling), sliding_window)
    out = reference_attention(query, key, value, scaling, sliding_window, attention_mask_, softcap)
    return out.transpose(1, 2).contiguous(), None


def register_attention() -> None:
    """Register ``oscar_capture`` with transformers (idempotent)."""
    from transformers import AttentionInterface
    AttentionInterface.register(CAPTURE_ATTN, _capture_attention)
    try:  # give it transformers' sdpa mask builder (which may return None: handled above)
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        AttentionMaskInterface.register(CAPTURE_ATTN, sdpa_mask)
    except ImportError:  # pragma: no cover - older transformers
        pass


@contextlib.contextmanager
def observing(observer: Observer) -> Iterator[None]:
    """Within the block, every ``oscar_capture`` attention call reports to ``observer``."""
    global _observer
    prev, _observer = _observer, observer
    try:
        yield
    finally:
        _observer = prev


# ----------------------------------------------------------------------------- loading

@dataclass
class ModelInfo:
    """Attention shapes of a loaded model."""
    model_type: str
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int


def gguf_architecture(path: str | Path) -> str:
    """``general.architecture`` of a GGUF file."""
    from gguf import GGUFReader
    r = GGUFReader(str(path))
    f = r.fields.get("general.architecture")
    if f is None:
        raise ValueError(f"{path}: not a model GGUF (no general.architecture)")
    return f.contents()


def load_model(model: str | Path, dtype: str = "float32", device: str = "cpu"):
    """Load a causal LM in PyTorch from a GGUF file or a Hugging Face folder, on ``device``.

    Returns ``(model, tokenizer, ModelInfo)``, the model in eval mode with the
    ``oscar_capture`` attention. Raises :class:`UnsupportedModel` for architectures
    the capture does not handle, naming them and the supported ones.
    """
    p = Path(model)
    kw: dict = {}
    if p.is_file():
        arch = gguf_architecture(p)
        if arch not in SUPPORTED_GGUF_ARCHS:
            raise UnsupportedModel(
                f"{p}: architecture '{arch}' is not supported by the calibration capture "
                f"(supported: {', '.join(SUPPORTED_GGUF_ARCHS)}); use --rotations FILE with a rotation "
                "file made for this model elsewhere (without OSCAR tensors llama.cpp uses its data-free Hadamard)")
        src, kw["gguf_file"] = str(p.parent), p.name
    elif p.is_dir():
        from transformers import AutoConfig
        src = str(p)
        mt = AutoConfig.from_pretrained(src).model_type
        if mt not in SUPPORTED_MODEL_TYPES and mt != "gemma3":
            raise UnsupportedModel(
                f"{p}: model_type '{mt}' is not supported by the calibration capture "
                f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    else:
        raise FileNotFoundError(f"{p}: no such model file or folder")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    register_attention()
    tok = AutoTokenizer.from_pretrained(src, **kw)
    m = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, dtype), **kw)
    m, info = prepare_model(m, str(p), device)
    return m, tok, info


def prepare_model(m, name: str = "model", device: str = "cpu"):
    """A transformers causal LM made ready for the capture: eval mode, the ``oscar_capture``
    attention, moved to ``device``. Returns ``(model, ModelInfo)``; :class:`UnsupportedModel`
    for an architecture the capture does not handle. Also for a model built from a config
    (``AutoModelForCausalLM.from_config``), as the device tests do."""
    register_attention()
    m.eval()
    m.set_attn_implementation(CAPTURE_ATTN)
    cfg = m.config.get_text_config() if hasattr(m.config, "get_text_config") else m.config
    if cfg.model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModel(f"{name}: model_type '{cfg.model_type}' is not supported by the calibration capture "
                               f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    info = ModelInfo(cfg.model_type, cfg.num_hidden_layers, cfg.num_attention_heads,
                     cfg.num_key_value_heads, int(hd))
    return m.to(device), info


def save_dequantized(gguf_path: str | Path, folder: str | Path) -> ModelInfo:
    """Load a GGUF in PyTorch once (transformers dequantises it to float32, which takes
    minutes for Q4_K models on a busy CPU) and save it as a Hugging Face folder that
    :func:`load_model` (and ``oscar-convert --torch-model``) loads in seconds.

    The saved weights are exactly the dequantised GGUF weights, so calibrating from the
    folder is the same as calibrating from the GGUF. Refuses an existing non-empty folder.
    """
    from ..core import atomic
    folder = Path(folder)
    if atomic.check_dir_output(folder) and any(folder.iterdir()):
        raise FileExistsError(f"{folder} exists and is not empty: remove it or choose another folder")
    if not Path(gguf_path).is_file():
        raise FileNotFoundError(f"{gguf_path}: no such GGUF file")
    model, tok, info = load_model(gguf_path)
    # the weights are plain float32 tensors now; drop the GGUF quantiser record, which
    # transformers refuses to serialise
    model.hf_quantizer = None
    for cfg in (model.config, getattr(model.config, "text_config", None)):
        if cfg is not None and hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
    model.config._attn_implementation = "eager"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return info


# ----------------------------------------------------------------------------- data

def load_calibration_text(spec: str | Path) -> str:
    """Calibration text: a local UTF-8 file, or ``wikitext2`` (the train split of
    WikiText-2 raw through ``datasets``, which needs the network). Refuses the
    WikiText-2 *test* text, which is the evaluation text."""
    s = str(spec)
    if s == "wikitext2":
        try:
            import datasets
        except ImportError as e:
            raise RuntimeError("--calib-data wikitext2 needs the `datasets` package (pip install datasets) "
                               "and the network; or pass a local text file") from e
        ds = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="train")
        return "".join(ds["text"])
    p = Path(s)
    if not p.is_file():
        raise FileNotFoundError(f"calibration data {p}: no such file (give a text file or 'wikitext2')")
    if re.search(r"(^|[._-])test([._-]|$)", p.name.lower()):
        raise ValueError(f"calibration data {p} looks like an evaluation (test) split: calibrate on "
                         "training or validation text, never on the text you evaluate on")
    return p.read_text(encoding="utf-8", errors="replace")


def tokenize_chunks(tok, text: str, n_tokens: int, ctx: int, skip_tokens: int = 0) -> list[np.ndarray]:
    """Token chunks (int64 ``[ctx]`` each, the last possibly shorter but >= 64) covering
    ``n_tokens`` tokens of ``text`` after the first ``skip_tokens``; each chunk begins
    with BOS when the tokenizer adds one. Raises if the text is too short."""
    bos = tok.bos_token_id
    probe = tok("a").input_ids
    add_bos = bos is not None and len(probe) > 0 and probe[0] == bos
    body = ctx - int(add_bos)
    need = skip_tokens + n_tokens
    n_chars = min(len(text), max(4096, 6 * need))
    while True:
        ids = tok(text[:n_chars], add_special_tokens=False).input_ids
        if len(ids) >= need + 1 or n_chars >= len(text):
            break
        n_chars = min(len(text), 2 * n_chars)
    ids = np.asarray(ids[skip_tokens:need], dtype=np.int64)
    if len(ids) < n_tokens:
        raise ValueError(f"calibration text has only {skip_tokens + len(ids)} tokens, {need} needed "
                         "(lower --calib-tokens or give more text)")
    out = []
    for s in range(0, len(ids), body):
        c = ids[s:s + body]
        if len(c) < 64:
            break
        out.append(np.concatenate([[bos], c]) if add_bos else c)
    return out


# ----------------------------------------------------------------------------- capture

@dataclass
class HeldOutLayer:
    """Activations of one layer on one held-out chunk (float32, Hugging Face layout)."""
    q: np.ndarray  # [T, Hq, D]
    k: np.ndarray  # [T, Hkv, D]
    v: np.ndarray  # [T, Hkv, D]
    scaling: float
    sliding_window: int | None


@dataclass
class Capture:
    """Result of :func:`calibrate_statistics`."""
    info: ModelInfo
    moments: list[LayerMoments]
    heldout: list[list[HeldOutLayer]] = field(default_factory=list)  # [chunk][layer]
    fit_tokens: int = 0
    heldout_tokens: int = 0


def model_device(model) -> str:
    """The device the model's weights are on (``cpu``, ``cuda:0``, ``mps:0``)."""
    return str(next(model.parameters()).device)


def _run(model, chunks: list[np.ndarray], observer: Observer, desc: str, progress: bool) -> None:
    import torch
    from ..core.progress import tqdm
    base = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    dev = next(model.parameters()).device
    with torch.inference_mode(), observing(observer):
        for c in tqdm(chunks, desc=desc, unit="chunk", disable=not progress):
            base(input_ids=torch.from_numpy(c)[None].to(dev), use_cache=False)


def calibrate_statistics(model, info: ModelInfo, fit_chunks: list[np.ndarray],
                         heldout_chunks: list[np.ndarray], progress: bool = True) -> Capture:
    """Two passes over ``fit_chunks`` (queries, then value weights with the final
    ``C_h``) and one over ``heldout_chunks`` (activations kept for the clip search)."""
    moments = [LayerMoments(info.n_head_kv, info.head_dim) for _ in range(info.n_layer)]
    cap = Capture(info, moments, fit_tokens=sum(map(len, fit_chunks)),
                  heldout_tokens=sum(map(len, heldout_chunks)))

    def pass_q(layer, q, k, v, scaling, sw):
        moments[layer].add_queries(q)

    def pass_v(layer, q, k, v, scaling, sw):
        moments[layer].add_values(k, v)

    _run(model, fit_chunks, pass_q, "capture 1/3 (queries)", progress)
    _run(model, fit_chunks, pass_v, "capture 2/3 (values)", progress)
    for c in heldout_chunks:
        layers: list[HeldOutLayer | None] = [None] * info.n_layer

        def keep(layer, q, k, v, scaling, sw, layers=layers):
            layers[layer] = HeldOutLayer(q.copy(), k.copy(), v.copy(), scaling, sw)

        _run(model, [c], keep, "capture 3/3 (held-out)", progress)
        cap.heldout.append(layers)  # type: ignore[arg-type]
    return cap


# ----------------------------------------------------------------------------- layouts

def rope_pair_permutation(d: int) -> np.ndarray:
    """``perm`` ``[d]`` mapping llama.cpp's head layout to Hugging Face's for llama-style
    GGUF conversion: llama.cpp dim ``i`` is Hugging Face dim ``perm[i] = (i % 2)*d/2 + i//2``."""
    i = np.arange(d)
    return (i % 2) * (d // 2) + i // 2


def qk_permutation(hf_k_weight: np.ndarray, gguf_k_weight: np.ndarray, n_head_kv: int, head_dim: int) -> np.ndarray | None:
    """Compare a layer's key projection in Hugging Face layout (``[Hkv*D, hidden]``) with
    the GGUF's (same shape, dequantised). Returns None when the layouts agree, the
    :func:`rope_pair_permutation` when the GGUF rows are permuted; raises otherwise."""
    a = np.asarray(hf_k_weight, dtype=np.float64).reshape(n_head_kv, head_dim, -1)
    b = np.asarray(gguf_k_weight, dtype=np.float64).reshape(n_head_kv, head_dim, -1)
    perm = rope_pair_permutation(head_dim)
    e_id = np.abs(b - a).max()
    e_perm = np.abs(b - a[:, perm]).max()
    scale = np.abs(a).max() + 1e-30  # quantised GGUF weights differ a little from the originals
    if e_id <= 0.25 * scale and e_id <= 0.5 * e_perm:
        return None
    if e_perm <= 0.25 * scale and e_perm <= 0.5 * e_id:
        return perm
    raise ValueError(f"the GGUF's attn_k weights match the PyTorch model neither as they are nor with the "
                     f"RoPE pair permutation (errors {e_id:.3g}, {e_perm:.3g}): the GGUF and the model differ")
