"""Attention-aware covariances, float64 (docs/method.md, "Offline: calibration", steps 2-3).

Shapes (one attention layer, one sequence): ``q`` is ``[T, Hq, D]``, ``k`` and ``v``
are ``[T, Hkv, D]``; query head ``j`` belongs to KV group ``j // G`` with
``G = Hq / Hkv`` (the grouping of Hugging Face's ``repeat_kv`` and of llama.cpp).

- ``C_h`` (``[Hkv, D, D]``): query second moment of KV group h, the mean over its G
  query heads and the tokens of ``q qᵀ``.
- ``Σ_K``: per KV head, ``C_h``; per layer, the mean over all query heads and tokens
  of ``q qᵀ`` (= the mean of the ``C_h``, the groups being equal in size).
- ``Σ_V``: per KV head, ``Σ_t w_t v_t v_tᵀ / Σ_t w_t`` with ``w_t = k_tᵀ C_h k_t``
  (i.e. the mean over tokens with the weights normalised to mean 1); per layer, the
  mean of the per-head ones.

The batch functions take whole arrays (tests, small inputs). For calibration,
:class:`LayerMoments` streams: pass 1 feeds queries (``add_queries``), pass 2 feeds
keys and values (``add_values``) once ``C_h`` is final, so the value weights use the
exact ``C_h`` of all calibration tokens and no activations are kept.

Pass 2 also sums ``k kᵀ`` per KV head, for the centred key covariance
``Cov_K = E[k kᵀ] - μ μᵀ`` (``[Hkv, D, D]``, μ the head's mean key; per layer the mean over
heads) that the key weighting compares with ``Σ_K`` (:func:`oscar.core.rotation.key_weighting`).
"""
from __future__ import annotations

import numpy as np


def _groups(q: np.ndarray, n_kv: int) -> np.ndarray:
    """``[T, Hq, D]`` -> ``[Hkv, T*G, D]`` float64, the rows of each KV group."""
    q = np.asarray(q, dtype=np.float64)
    t, hq, d = q.shape
    if hq % n_kv:
        raise ValueError(f"{hq} query heads do not divide into {n_kv} KV heads")
    g = hq // n_kv
    return q.reshape(t, n_kv, g, d).transpose(1, 0, 2, 3).reshape(n_kv, t * g, d)


def query_second_moment(q: np.ndarray, n_kv: int) -> np.ndarray:
    """``C`` ``[Hkv, D, D]``: mean over tokens and the G query heads of each group of ``q qᵀ``."""
    x = _groups(q, n_kv)
    return np.einsum("hnd,hne->hde", x, x) / x.shape[1]


def key_covariance(q: np.ndarray, n_kv: int, per_head: bool = False) -> np.ndarray:
    """``Σ_K``: ``[D, D]`` per layer, or ``[Hkv, D, D]`` per KV head (``per_head``)."""
    c = query_second_moment(q, n_kv)
    return c if per_head else c.mean(axis=0)


def value_weights(k: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``w`` ``[T, Hkv]``: ``w[t, h] = k[t, h]ᵀ C[h] k[t, h]``, normalised to mean 1 over t per head."""
    k = np.asarray(k, dtype=np.float64)
    w = np.einsum("thd,hde,the->th", k, np.asarray(c, dtype=np.float64), k)
    return w / w.mean(axis=0, keepdims=True)


def value_covariance(k: np.ndarray, v: np.ndarray, c: np.ndarray, per_head: bool = False) -> np.ndarray:
    """``Σ_V``: ``[D, D]`` per layer (mean over heads), or ``[Hkv, D, D]`` (``per_head``).

    k, v: ``[T, Hkv, D]``; c: ``[Hkv, D, D]`` (the query second moments)."""
    w = value_weights(k, c)
    v = np.asarray(v, dtype=np.float64)
    s = np.einsum("th,thd,the->hde", w, v, v) / v.shape[0]
    return s if per_head else s.mean(axis=0)


class LayerMoments:
    """Streaming sums for one attention layer (float64; O(Hkv·D²) memory).

    Pass 1: ``add_queries(q)`` for every calibration chunk; pass 2 (after pass 1 is
    complete): ``add_values(k, v)`` for the same chunks. ``sigma_k``/``sigma_v`` then
    equal the batch functions applied to all chunks concatenated.
    """

    def __init__(self, n_kv: int, head_dim: int):
        self.n_kv, self.head_dim = n_kv, head_dim
        self.q_sum = np.zeros((n_kv, head_dim, head_dim))
        self.q_rows = 0  # rows per group (tokens * G)
        self.v_sum = np.zeros((n_kv, head_dim, head_dim))
        self.w_sum = np.zeros(n_kv)
        self.k_first = np.zeros((n_kv, head_dim))  # sums of k and v (for the centring means)
        self.k_second = np.zeros((n_kv, head_dim, head_dim))  # sums of k kᵀ (for the key covariance)
        self.v_first = np.zeros((n_kv, head_dim))
        self.kv_rows = 0
        self._c: np.ndarray | None = None

    def add_queries(self, q: np.ndarray) -> None:
        """q: ``[T, Hq, D]``."""
        if self._c is not None:
            raise RuntimeError("add_queries after add_values: the query moments are already final")
        x = _groups(q, self.n_kv)
        self.q_sum += np.matmul(x.transpose(0, 2, 1), x)
        self.q_rows += x.shape[1]

    @property
    def c(self) -> np.ndarray:
        """``C_h`` ``[Hkv, D, D]`` from the queries seen so far."""
        if self.q_rows == 0:
            raise RuntimeError("no queries were added")
        return self.q_sum / self.q_rows

    def add_values(self, k: np.ndarray, v: np.ndarray) -> None:
        """k, v: ``[T, Hkv, D]``; weights use the final ``C_h`` of pass 1 (unnormalised here,
        normalised in ``sigma_v`` by the total weight)."""
        if self._c is None:
            self._c = self.c
        k = np.asarray(k, dtype=np.float64)
        v = np.asarray(v, dtype=np.float64)
        kh, vh = k.transpose(1, 0, 2), v.transpose(1, 0, 2)  # [Hkv, T, D]
        w = (np.matmul(kh, self._c) * kh).sum(axis=2)  # [Hkv, T]
        self.v_sum += np.matmul((vh * w[:, :, None]).transpose(0, 2, 1), vh)
        self.w_sum += w.sum(axis=1)
        self.k_first += kh.sum(axis=1)
        self.k_second += np.matmul(kh.transpose(0, 2, 1), kh)
        self.v_first += vh.sum(axis=1)
        self.kv_rows += kh.shape[1]

    def mean_k(self) -> np.ndarray:
        """``[Hkv, D]``: the mean key of each KV head (post-RoPE, unrotated)."""
        if self.kv_rows == 0:
            raise RuntimeError("no keys/values were added")
        return self.k_first / self.kv_rows

    def cov_k(self, per_head: bool = False) -> np.ndarray:
        """The centred key covariance ``E[k kᵀ] - μ μᵀ`` (μ the head's mean key, post-RoPE,
        unrotated): ``[Hkv, D, D]`` (``per_head``), or ``[D, D]`` the mean over the KV heads."""
        mu = self.mean_k()
        c = self.k_second / self.kv_rows - np.einsum("hd,he->hde", mu, mu)
        return c if per_head else c.mean(axis=0)

    def mean_v(self) -> np.ndarray:
        """``[Hkv, D]``: the mean value of each KV head (unrotated)."""
        if self.kv_rows == 0:
            raise RuntimeError("no keys/values were added")
        return self.v_first / self.kv_rows

    def sigma_k(self, per_head: bool = False) -> np.ndarray:
        """``Σ_K``: ``[D, D]`` or ``[Hkv, D, D]``."""
        c = self.c
        return c if per_head else c.mean(axis=0)

    def sigma_v(self, per_head: bool = False) -> np.ndarray:
        """``Σ_V``: ``[D, D]`` or ``[Hkv, D, D]``."""
        if self._c is None or np.any(self.w_sum <= 0):
            raise RuntimeError("no keys/values were added (or all value weights are zero)")
        s = self.v_sum / self.w_sum[:, None, None]
        return s if per_head else s.mean(axis=0)
