"""The Kalman filter's update algebra for four parameters and two measurements, unrolled.

Why: `analyze.kalman` steps one filter per variant per cycle, and its matrices are 4 × 4 (P),
2 × 4 (H) and 4 × 2 (P·Hᵀ, the gain). Taken as general products of lists with an exact sum per
entry, the algebra cost more than the four queue solutions of the Jacobian; written out over
flat row-major tuples it is a few dozen multiplications. Each entry is a plain sum of at most
four products (in the order of the general product), which differs from the exact sum by a few
units in the last place: far below the measurement noise the filter weighs (2.5 %).

What it computes:

- `innovation`: P·Hᵀ and H·P·Hᵀ;
- `joseph`: (I − K·H)·P·(I − K·H)ᵀ + K·R·Kᵀ for the gain K actually applied, symmetric by
  construction (the upper triangle, mirrored), as `kalman.step` needs it for every gain, the
  optimal one or a shrunk one.

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
    pht: list[float] = []
    for i in range(0, 16, 4):
        p0, p1, p2, p3 = p[i : i + 4]
        pht.append(p0 * a0 + p1 * a1 + p2 * a2 + p3 * a3)
        pht.append(p0 * b0 + p1 * b1 + p2 * b2 + p3 * b3)
    c0, d0, c1, d1, c2, d2, c3, d3 = pht
    return tuple(pht), (
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
    rows: list[tuple[float, float, float, float]] = []  # rows of I − K·H
    products: list[tuple[float, float, float, float]] = []  # rows of (I − K·H)·P
    for i in range(4):
        k0, k1 = gain[2 * i], gain[2 * i + 1]
        e0 = (i == 0) - (k0 * a0 + k1 * b0)
        e1 = (i == 1) - (k0 * a1 + k1 * b1)
        e2 = (i == 2) - (k0 * a2 + k1 * b2)
        e3 = (i == 3) - (k0 * a3 + k1 * b3)
        rows.append((e0, e1, e2, e3))
        products.append(
            (
                e0 * p00 + e1 * p10 + e2 * p20 + e3 * p30,
                e0 * p01 + e1 * p11 + e2 * p21 + e3 * p31,
                e0 * p02 + e1 * p12 + e2 * p22 + e3 * p32,
                e0 * p03 + e1 * p13 + e2 * p23 + e3 * p33,
            )
        )
    out = [0.0] * 16
    for i in range(4):
        q0, q1, q2, q3 = products[i]
        g0, g1 = gain[2 * i], gain[2 * i + 1]
        for j in range(i, 4):
            e0, e1, e2, e3 = rows[j]
            value = q0 * e0 + q1 * e1 + q2 * e2 + q3 * e3
            value += g0 * gain[2 * j] * r0 + g1 * gain[2 * j + 1] * r1
            out[4 * i + j] = out[4 * j + i] = value
    return tuple(out)
