"""Quality metrics of a KV cache type against an f16 reference, from logits.

These are the statistics llama.cpp's ``llama-perplexity --kl-divergence`` reports,
written out in numpy so that they can be checked by hand and recomputed from logits
obtained some other way (the bindings). Shapes: ``logits`` are ``[T, V]`` (T scored
positions, V vocabulary), ``targets`` ``[T]`` token ids (the token that follows each
scored position).

Error bars are standard errors of the mean over scored tokens (the sample standard
deviation divided by sqrt(T)); the perplexity error is propagated from the standard
error of the mean negative log-likelihood (``PPL * sem(nll)``), as llama-perplexity does.
Tokens of one text are correlated, so these bars understate the spread between texts.
"""
from __future__ import annotations

import math

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities ``[T, V]`` of logits ``[T, V]`` (float64, numerically stable)."""
    x = np.asarray(logits, dtype=np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def token_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Negative log-likelihood ``[T]`` of ``targets [T]`` under ``logits [T, V]``."""
    lp = log_softmax(logits)
    t = np.asarray(targets, dtype=np.int64)
    return -lp[np.arange(lp.shape[0]), t]


def kld_per_token(base_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """KL(base || test) per position ``[T]``: ``sum_v p_base (log p_base - log p_test)``."""
    lb = log_softmax(base_logits)
    lt = log_softmax(logits)
    return (np.exp(lb) * (lb - lt)).sum(axis=-1)


def top1_agree(base_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Boolean ``[T]``: does the most likely token of ``logits`` equal the reference's?"""
    return np.argmax(base_logits, axis=-1) == np.argmax(logits, axis=-1)


def mean_sem(x: np.ndarray) -> tuple[float, float]:
    """Mean of ``x [T]`` and its standard error ``std(x, ddof=1) / sqrt(T)`` (0 when T < 2)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("mean_sem of an empty array")
    if x.size < 2:
        return float(x[0]), 0.0
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


def perplexity(nll: np.ndarray) -> tuple[float, float]:
    """Perplexity ``exp(mean nll)`` of per-token NLLs ``[T]`` and its error ``PPL * sem(nll)``."""
    m, s = mean_sem(nll)
    ppl = math.exp(m)
    return ppl, ppl * s


def percentile(x: np.ndarray, fraction: float) -> float:
    """``fraction`` quantile of ``x [T]`` by linear interpolation between sorted values
    (position ``fraction * (T - 1)``), the rule llama-perplexity uses for its 99 % KLD."""
    v = np.sort(np.asarray(x, dtype=np.float64).ravel())
    if v.size == 0:
        raise ValueError("percentile of an empty array")
    p = min(max(fraction, 0.0), 1.0) * (v.size - 1)
    i = int(math.floor(p))
    j = min(i + 1, v.size - 1)
    return float((1 - (p - i)) * v[i] + (p - i) * v[j])


def quality(base_logits: np.ndarray, logits: np.ndarray, targets: np.ndarray) -> dict[str, float]:
    """All metrics of one configuration against the reference on the same positions.

    Returns ``ppl``, ``ppl_err``, ``kld``, ``kld_err``, ``kld_p99``, ``same_top`` and
    ``same_top_err`` (percent), the keys of oscar-eval's rows."""
    ppl, ppl_err = perplexity(token_nll(logits, targets))
    kld = kld_per_token(base_logits, logits)
    k, k_err = mean_sem(kld)
    top, top_err = mean_sem(top1_agree(base_logits, logits).astype(np.float64))
    return {"ppl": ppl, "ppl_err": ppl_err, "kld": k, "kld_err": k_err, "kld_p99": percentile(kld, 0.99),
            "same_top": 100 * top, "same_top_err": 100 * top_err}


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95 % (z = 1.96) Wilson score interval ``(low, high)`` of a success fraction;
    meaningful for the few trials of a passkey test, where ``p(1-p)/n`` collapses to 0."""
    if trials <= 0:
        raise ValueError("wilson_interval needs at least one trial")
    p = successes / trials
    d = 1 + z * z / trials
    c = (p + z * z / (2 * trials)) / d
    h = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / d
    return max(0.0, c - h), min(1.0, c + h)
