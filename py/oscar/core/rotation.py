"""Calibrated rotations ``R = U·H·P`` (docs/method.md, "Offline: calibration", step 4).

Row-vector convention throughout: a key row ``k`` (shape ``[D]``) is rotated as
``k' = k @ R``; the query the same way, ``q' = q @ R``, so ``q'·k' = q·k`` because R
is orthogonal. Values: ``v' = v @ R_V`` and the attention output is rotated back,
``o = o' @ R_Vᵀ``.

- ``U`` ([D, D]): eigenvectors of the symmetrised covariance, one per column, sorted
  by decreasing eigenvalue (column 0 is the direction of largest energy). Each
  column's sign is fixed so that its largest-magnitude entry is positive, which
  makes the result deterministic.
- ``H`` ([D, D]): the normalised Sylvester Hadamard matrix, ``H[i, j] =
  (-1)^popcount(i & j) / sqrt(D)``; D must be a power of two.
- ``P`` ([D, D]): the permutation matrix with ``P[i, bitrev(i)] = 1``: column i of
  ``U·H`` (which belongs to the i-th largest eigen-direction) lands in output
  coordinate ``bitrev(i)``, i.e. the eigen-directions are laid out in bit-reversed
  order of decreasing eigenvalue.

Key weighting (:func:`key_weighting`): keys and queries may use different matrices,
``R_K = W·R`` and ``R_Q = W⁻¹·R`` with ``W = U·diag(d)·Uᵀ`` symmetric positive definite,
so ``(q R_Q)·(k R_K) = q W⁻¹ R Rᵀ W kᵀ = q·k`` still holds exactly. ``d_i = (λ_i / s_i)^{1/4}``
(``λ_i`` the query energy along ``u_i``, ``s_i = u_iᵀ Cov_K u_i`` the centred keys' variance
there), normalised to ``mean(d_i²) = 1``: key directions the queries read are stretched and
those they ignore shrunk, so the 2-bit levels are spent where the scores need them.
"""
from __future__ import annotations

import numpy as np

#: largest |RᵀR - I| accepted for a rotation we compute ourselves (float64)
ORTHO_TOL = 1e-6
#: largest |RᵀR - I| accepted for a rotation read from a file (float32 storage)
ORTHO_TOL_STORED = 1e-5
#: relative floor of λ_i and s_i in :func:`key_weighting` (of their largest value)
WEIGHT_FLOOR = 1e-12
#: the default exponent of :func:`key_weighting`: ``d_i = (λ_i / s_i)^KEY_WEIGHT_EXPONENT``
KEY_WEIGHT_EXPONENT = 0.25
#: largest spread max(d) / min(d) (the condition number of W) :func:`key_weighting` makes:
#: keeps R_Q R_Kᵀ = I to float32 accuracy well inside the 1e-3 that llama.cpp checks
WEIGHT_COND_MAX = 1e3


def _check_pow2(d: int) -> None:
    if d < 1 or d & (d - 1):
        raise ValueError(f"head_dim must be a power of two for the Hadamard factor, got {d}")


def hadamard(d: int) -> np.ndarray:
    """Normalised Sylvester Hadamard matrix, float64 ``[d, d]``, symmetric and orthogonal."""
    _check_pow2(d)
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(d)


def bit_reverse(d: int) -> np.ndarray:
    """int64 ``[d]``: ``out[i]`` is i with its log2(d) bits reversed."""
    _check_pow2(d)
    bits = d.bit_length() - 1
    i = np.arange(d)
    out = np.zeros(d, dtype=np.int64)
    for b in range(bits):
        out |= ((i >> b) & 1) << (bits - 1 - b)
    return out


def permutation(d: int) -> np.ndarray:
    """The permutation matrix ``P`` ([d, d] float64) with ``P[i, bitrev(i)] = 1``."""
    p = np.zeros((d, d))
    p[np.arange(d), bit_reverse(d)] = 1.0
    return p


def eigenbasis(sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of ``(Σ + Σᵀ)/2`` in float64.

    sigma: ``[D, D]``. Returns ``(eigenvalues [D] decreasing, U [D, D])`` with
    ``U[:, i]`` the i-th eigenvector, sign-fixed (largest-magnitude entry positive).
    """
    s = np.asarray(sigma, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"covariance must be square [D, D], got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("covariance has NaN or Inf entries")
    s = 0.5 * (s + s.T)
    w, u = np.linalg.eigh(s)
    order = np.argsort(-w, kind="stable")
    w, u = w[order], u[:, order]
    idx = np.argmax(np.abs(u), axis=0)
    signs = np.sign(u[idx, np.arange(u.shape[1])])
    signs[signs == 0] = 1.0
    return w, u * signs


def rotation_from_covariance(sigma: np.ndarray) -> np.ndarray:
    """``R = U·H·P`` (float64 ``[D, D]``) for one covariance ``[D, D]``; or a stack.

    sigma: ``[D, D]`` or ``[..., D, D]`` (e.g. ``[Hkv, D, D]`` for per-KV-head
    rotations); returns the same shape. Raises if the result is not orthogonal to
    ``ORTHO_TOL``.
    """
    s = np.asarray(sigma, dtype=np.float64)
    if s.ndim > 2:
        return np.stack([rotation_from_covariance(x) for x in s.reshape(-1, *s.shape[-2:])]).reshape(s.shape)
    d = s.shape[0]
    _, u = eigenbasis(s)
    r = u @ hadamard(d) @ permutation(d)
    check_orthogonal(r, ORTHO_TOL)
    return r


def key_weighting(sigma_k: np.ndarray, cov_k: np.ndarray, exponent: float = KEY_WEIGHT_EXPONENT) -> np.ndarray:
    """``W = U·diag(d)·Uᵀ`` (float64 ``[D, D]``, symmetric positive definite), or a stack.

    sigma_k: the query second moment ``Σ_K`` (``[D, D]`` or ``[..., D, D]``; U and λ its
    :func:`eigenbasis`, the U of :func:`rotation_from_covariance`); cov_k: the centred key
    covariance of the same shape. ``d_i = (λ_i / s_i)^exponent`` with ``s_i = u_iᵀ Cov_K u_i``
    (1/4 minimises the average query's score error; smaller is milder, 0 is W = I),
    λ and s floored at ``WEIGHT_FLOOR`` of their largest value, d raised to at least
    ``max(d) / WEIGHT_COND_MAX``, then scaled to ``mean(d_i²) = 1``.
    """
    s = np.asarray(sigma_k, dtype=np.float64)
    c = np.asarray(cov_k, dtype=np.float64)
    if s.shape != c.shape:
        raise ValueError(f"Σ_K has shape {s.shape} but the key covariance {c.shape}: they must match")
    if s.ndim > 2:
        flat = zip(s.reshape(-1, *s.shape[-2:]), c.reshape(-1, *c.shape[-2:]))
        return np.stack([key_weighting(a, b, exponent) for a, b in flat]).reshape(s.shape)
    lam, u = eigenbasis(s)
    var = np.einsum("di,de,ei->i", u, 0.5 * (c + c.T), u)
    lam = np.maximum(lam, WEIGHT_FLOOR * max(float(lam.max()), 1e-300))
    var = np.maximum(var, WEIGHT_FLOOR * max(float(var.max()), 1e-300))
    d = (lam / var) ** exponent
    d = np.maximum(d, d.max() / WEIGHT_COND_MAX)
    d /= np.sqrt(np.mean(d * d))
    return (u * d) @ u.T


def weighting_basis(r: np.ndarray) -> np.ndarray:
    """The eigenbasis U of a calibrated rotation ``R = U·H·P`` (``[..., D, D]``): ``U = R·(H·P)ᵀ``
    (float64, same shape). Holds for a key rotation in the GGUF layout too (rows permuted alike)."""
    r = np.asarray(r, dtype=np.float64)
    d = r.shape[-1]
    return r @ (hadamard(d) @ permutation(d)).T


def weighting_scales(w: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, float]:
    """The scales d of a key weighting ``W = U·diag(d)·Uᵀ`` in the basis of ``r``
    (:func:`weighting_basis`; ``w``, ``r`` ``[..., D, D]``): ``(d [..., D] float64, residual)``,
    residual the largest off-diagonal of ``Uᵀ W U`` relative to ``max |d|`` (0 when W is
    diagonal in that basis, as :func:`key_weighting` makes it)."""
    u = weighting_basis(r)
    m = np.swapaxes(u, -1, -2) @ np.asarray(w, dtype=np.float64) @ u
    d = np.diagonal(m, axis1=-2, axis2=-1).copy()
    off = m - d[..., :, None] * np.eye(m.shape[-1])
    return d, float(np.abs(off).max() / max(float(np.abs(d).max()), 1e-300))


def weighting_from_scales(d: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``W = U·diag(d)·Uᵀ`` (float64 ``[..., D, D]``) with U the basis of ``r`` (:func:`weighting_basis`);
    d ``[..., D]`` as :func:`weighting_scales` returns."""
    u = weighting_basis(r)
    return (u * np.asarray(d, dtype=np.float64)[..., None, :]) @ np.swapaxes(u, -1, -2)


def weighted_rotations(w: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R_K, R_Q) = (W·R, W⁻¹·R)`` float64, for ``w`` and ``r`` of one shape ``[..., D, D]``
    (rows are input dims: ``k' = k @ R_K``, ``q' = q @ R_Q``, so ``q'·k' = q·k``)."""
    w = np.asarray(w, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    if w.shape != r.shape:
        raise ValueError(f"key weighting has shape {w.shape} but the rotation {r.shape}: they must match")
    return w @ r, np.linalg.solve(w, r)


def pair_error(r_k: np.ndarray, r_q: np.ndarray) -> np.ndarray:
    """``max |R_Q R_Kᵀ - I|`` of each matrix pair (``[..., D, D]`` each), float64, shape ``[...]``:
    0 when ``(q R_Q)·(k R_K) = q·k`` for all q, k."""
    r_k = np.asarray(r_k, dtype=np.float64)
    r_q = np.asarray(r_q, dtype=np.float64)
    p = r_q @ np.swapaxes(r_k, -1, -2) - np.eye(r_k.shape[-1])
    return np.abs(p).max(axis=(-1, -2))


def hadamard_rotation(d: int) -> np.ndarray:
    """The data-free baseline: ``R = H`` ([d, d] float64)."""
    return hadamard(d)


def orthogonality_error(r: np.ndarray) -> float:
    """``max |RᵀR - I|`` over all matrices of ``r`` (``[D, D]`` or ``[..., D, D]``), in float64."""
    r = np.asarray(r, dtype=np.float64)
    eye = np.eye(r.shape[-1])
    return float(np.max(np.abs(np.swapaxes(r, -1, -2) @ r - eye)))


def nearest_orthogonal(r: np.ndarray) -> np.ndarray:
    """The orthogonal matrix nearest to each of ``r`` (``[..., D, D]``) in the Frobenius norm:
    the polar factor ``U Vᵀ`` of ``r = U S Vᵀ``, in float64. Restores a rotation that was
    stored rounded (float16) to an exact one that differs from it by the rounding."""
    u, _, vt = np.linalg.svd(np.asarray(r, dtype=np.float64))
    return u @ vt


def check_orthogonal(r: np.ndarray, tol: float = ORTHO_TOL, what: str = "rotation") -> None:
    """Raise ``ValueError`` naming ``what`` if ``r`` is not square, finite and orthogonal to ``tol``."""
    r = np.asarray(r)
    if r.ndim < 2 or r.shape[-1] != r.shape[-2]:
        raise ValueError(f"{what}: expected square matrices [.., D, D], got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError(f"{what}: has NaN or Inf entries")
    err = orthogonality_error(r)
    if err > tol:
        raise ValueError(
            f"{what} is not orthogonal (max |RᵀR - I| = {err:.3g} > {tol:g}); "
            "a rotation must be orthogonal or attention changes: recompute it with --rotations calibrate"
        )
