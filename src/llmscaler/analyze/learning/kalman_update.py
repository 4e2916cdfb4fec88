"""The Kalman filter's update algebra for four parameters and two measurements, unrolled.

Why: `analyze.learning.kalman` steps one filter per variant per cycle, and its matrices are 4 × 4
(P), 2 × 4 (H) and 4 × 2 (P·Hᵀ, the gain). Taken as general products of lists with an exact sum per
entry, the algebra cost more than the four queue solutions of the Jacobian; written out over
flat row-major tuples it is a few dozen multiplications. Each entry is a plain sum of at most
four products (in the order of the general product), which differs from the exact sum by a few
units in the last place: far below the measurement noise the filter weighs (2.5 %).

What it computes:

- `innovation`: P·Hᵀ and H·P·Hᵀ;
- `joseph`: (I − K·H)·P·(I − K·H)ᵀ + K·R·Kᵀ for the gain K actually applied, symmetric by
  construction (the upper triangle, mirrored), as `kalman.step` needs it for every gain, the
  optimal one or a shrunk one;
- `innovation_any`, `joseph_any`: the same for any number of parameters by plain loops, for the
  three-parameter model (WVA main's α, β, γ), whose tuner is not the hot path the four-parameter
  one was tuned for.

Layout: P is 16 floats row-major, H is 8 (the TTFT row, then the ITL row), P·Hᵀ and K are 8
(row i at 2i, 2i + 1). What fails: nothing raises; non-finite inputs give non-finite outputs,
which `kalman.step` rejects.
"""

from __future__ import annotations

from collections.abc import Sequence

Flat = tuple[float, ...]


def innovation(
    *, p: Sequence[float], h: Sequence[float]
) -> tuple[Flat, tuple[float, float, float, float]]:
    """(P·Hᵀ as 8 floats, H·P·Hᵀ as (s00, s01, s10, s11))."""
    a0, a1, a2, a3, b0, b1, b2, b3 = h
    p00, p01, p02, p03, p10, p11, p12, p13, p20, p21, p22, p23, p30, p31, p32, p33 = p
    c0, d0 = p00 * a0 + p01 * a1 + p02 * a2 + p03 * a3, p00 * b0 + p01 * b1 + p02 * b2 + p03 * b3
    c1, d1 = p10 * a0 + p11 * a1 + p12 * a2 + p13 * a3, p10 * b0 + p11 * b1 + p12 * b2 + p13 * b3
    c2, d2 = p20 * a0 + p21 * a1 + p22 * a2 + p23 * a3, p20 * b0 + p21 * b1 + p22 * b2 + p23 * b3
    c3, d3 = p30 * a0 + p31 * a1 + p32 * a2 + p33 * a3, p30 * b0 + p31 * b1 + p32 * b2 + p33 * b3
    return (c0, d0, c1, d1, c2, d2, c3, d3), (
        a0 * c0 + a1 * c1 + a2 * c2 + a3 * c3,
        a0 * d0 + a1 * d1 + a2 * d2 + a3 * d3,
        b0 * c0 + b1 * c1 + b2 * c2 + b3 * c3,
        b0 * d0 + b1 * d1 + b2 * d2 + b3 * d3,
    )


def joseph(
    *, p: Sequence[float], gain: Sequence[float], h: Sequence[float], r0: float, r1: float
) -> Flat:
    """(I − K·H)·P·(I − K·H)ᵀ + K·diag(r0, r1)·Kᵀ as 16 floats, exactly symmetric."""
    a0, a1, a2, a3, b0, b1, b2, b3 = h
    p00, p01, p02, p03, p10, p11, p12, p13, p20, p21, p22, p23, p30, p31, p32, p33 = p
    k00, k01, k10, k11, k20, k21, k30, k31 = gain
    # E = I − K·H, row by row (written out: a loop over rows cost a third more).
    e00, e01 = 1.0 - (k00 * a0 + k01 * b0), -(k00 * a1 + k01 * b1)
    e02, e03 = -(k00 * a2 + k01 * b2), -(k00 * a3 + k01 * b3)
    e10, e11 = -(k10 * a0 + k11 * b0), 1.0 - (k10 * a1 + k11 * b1)
    e12, e13 = -(k10 * a2 + k11 * b2), -(k10 * a3 + k11 * b3)
    e20, e21 = -(k20 * a0 + k21 * b0), -(k20 * a1 + k21 * b1)
    e22, e23 = 1.0 - (k20 * a2 + k21 * b2), -(k20 * a3 + k21 * b3)
    e30, e31 = -(k30 * a0 + k31 * b0), -(k30 * a1 + k31 * b1)
    e32, e33 = -(k30 * a2 + k31 * b2), 1.0 - (k30 * a3 + k31 * b3)
    # Row i of E·P, then its products with the rows j ≥ i of E (the upper triangle).
    q0 = e00 * p00 + e01 * p10 + e02 * p20 + e03 * p30
    q1 = e00 * p01 + e01 * p11 + e02 * p21 + e03 * p31
    q2 = e00 * p02 + e01 * p12 + e02 * p22 + e03 * p32
    q3 = e00 * p03 + e01 * p13 + e02 * p23 + e03 * p33
    m00 = q0 * e00 + q1 * e01 + q2 * e02 + q3 * e03 + (k00 * k00 * r0 + k01 * k01 * r1)
    m01 = q0 * e10 + q1 * e11 + q2 * e12 + q3 * e13 + (k00 * k10 * r0 + k01 * k11 * r1)
    m02 = q0 * e20 + q1 * e21 + q2 * e22 + q3 * e23 + (k00 * k20 * r0 + k01 * k21 * r1)
    m03 = q0 * e30 + q1 * e31 + q2 * e32 + q3 * e33 + (k00 * k30 * r0 + k01 * k31 * r1)
    q0 = e10 * p00 + e11 * p10 + e12 * p20 + e13 * p30
    q1 = e10 * p01 + e11 * p11 + e12 * p21 + e13 * p31
    q2 = e10 * p02 + e11 * p12 + e12 * p22 + e13 * p32
    q3 = e10 * p03 + e11 * p13 + e12 * p23 + e13 * p33
    m11 = q0 * e10 + q1 * e11 + q2 * e12 + q3 * e13 + (k10 * k10 * r0 + k11 * k11 * r1)
    m12 = q0 * e20 + q1 * e21 + q2 * e22 + q3 * e23 + (k10 * k20 * r0 + k11 * k21 * r1)
    m13 = q0 * e30 + q1 * e31 + q2 * e32 + q3 * e33 + (k10 * k30 * r0 + k11 * k31 * r1)
    q0 = e20 * p00 + e21 * p10 + e22 * p20 + e23 * p30
    q1 = e20 * p01 + e21 * p11 + e22 * p21 + e23 * p31
    q2 = e20 * p02 + e21 * p12 + e22 * p22 + e23 * p32
    q3 = e20 * p03 + e21 * p13 + e22 * p23 + e23 * p33
    m22 = q0 * e20 + q1 * e21 + q2 * e22 + q3 * e23 + (k20 * k20 * r0 + k21 * k21 * r1)
    m23 = q0 * e30 + q1 * e31 + q2 * e32 + q3 * e33 + (k20 * k30 * r0 + k21 * k31 * r1)
    q0 = e30 * p00 + e31 * p10 + e32 * p20 + e33 * p30
    q1 = e30 * p01 + e31 * p11 + e32 * p21 + e33 * p31
    q2 = e30 * p02 + e31 * p12 + e32 * p22 + e33 * p32
    q3 = e30 * p03 + e31 * p13 + e32 * p23 + e33 * p33
    m33 = q0 * e30 + q1 * e31 + q2 * e32 + q3 * e33 + (k30 * k30 * r0 + k31 * k31 * r1)
    return (m00, m01, m02, m03, m01, m11, m12, m13, m02, m12, m22, m23, m03, m13, m23, m33)


def innovation_any(
    *, p: Sequence[float], h: Sequence[float], n: int
) -> tuple[Flat, tuple[float, float, float, float]]:
    """`innovation` for n parameters (the three-parameter model's 3 × 3 P), by plain loops:
    (P·Hᵀ as 2n floats, row i at 2i, 2i + 1; H·P·Hᵀ)."""
    a, b = h[:n], h[n:]
    pht: list[float] = []
    for i in range(n):
        row = p[n * i : n * i + n]
        pht.append(sum(row[j] * a[j] for j in range(n)))
        pht.append(sum(row[j] * b[j] for j in range(n)))
    c, d = pht[0::2], pht[1::2]
    return tuple(pht), (
        sum(a[i] * c[i] for i in range(n)),
        sum(a[i] * d[i] for i in range(n)),
        sum(b[i] * c[i] for i in range(n)),
        sum(b[i] * d[i] for i in range(n)),
    )


def joseph_any(
    *, p: Sequence[float], gain: Sequence[float], h: Sequence[float], r0: float, r1: float, n: int
) -> Flat:
    """`joseph` for n parameters by plain loops, symmetric by construction."""
    a, b = h[:n], h[n:]
    e = [
        [(1.0 if i == j else 0.0) - (gain[2 * i] * a[j] + gain[2 * i + 1] * b[j]) for j in range(n)]
        for i in range(n)
    ]
    ep = [[sum(e[i][k] * p[n * k + j] for k in range(n)) for j in range(n)] for i in range(n)]
    out = [0.0] * (n * n)
    for i in range(n):
        for j in range(i, n):
            value = sum(ep[i][k] * e[j][k] for k in range(n)) + (
                gain[2 * i] * gain[2 * j] * r0 + gain[2 * i + 1] * gain[2 * j + 1] * r1
            )
            out[n * i + j] = out[n * j + i] = value
    return tuple(out)
