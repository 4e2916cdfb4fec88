"""`analyze.learning.kalman_update`: the unrolled algebra is the general matrix algebra, to
rounding.

The filter's update was written as products of lists with an exact sum per entry; unrolled, each
entry is a plain sum of at most four products. Compared here with numpy's products on random
symmetric positive definite P, random H and gains: the same figures to a few units in the last
place of the largest term, and the Joseph form exactly symmetric.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.learning import kalman_update


def _setup(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-4, 2, size=4)  # the parameters' magnitudes differ widely
    root = rng.normal(size=(4, 4)) * scale[:, None]
    p = root @ root.T + np.diag(scale**2)
    h = rng.normal(size=(2, 4)) / scale
    gain = rng.normal(size=(4, 2)) * scale[:, None] * 1e-2
    return p, h, gain, float(rng.uniform(0.1, 10.0)), float(rng.uniform(0.1, 10.0))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_innovation_is_the_general_product(seed: int) -> None:
    p, h, _, _, _ = _setup(seed)
    pht, s = kalman_update.innovation(p=tuple(p.ravel()), h=tuple(h.ravel()))
    want_pht = p @ h.T
    want_s = h @ want_pht
    np.testing.assert_allclose(
        np.array(pht).reshape(4, 2),
        want_pht,
        rtol=1e-12,
        atol=1e-12 * np.abs(p).max() * np.abs(h).max(),
    )
    np.testing.assert_allclose(
        np.array(s).reshape(2, 2), want_s, rtol=1e-10, atol=1e-12 * np.abs(want_s).max()
    )


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_joseph_is_the_general_product_and_symmetric(seed: int) -> None:
    p, h, gain, r0, r1 = _setup(seed)
    got = np.array(
        kalman_update.joseph(
            p=tuple(p.ravel()), gain=tuple(gain.ravel()), h=tuple(h.ravel()), r0=r0, r1=r1
        )
    ).reshape(4, 4)
    a = np.eye(4) - gain @ h
    want = a @ p @ a.T + gain @ np.diag([r0, r1]) @ gain.T
    assert (got == got.T).all()
    # Entries of Joseph's form are sums of terms far larger than some results: the error is
    # relative to the terms (|A|·|P|·|A|ᵀ), not to the entry.
    terms = np.abs(a) @ np.abs(p) @ np.abs(a).T + np.abs(gain) @ np.diag([r0, r1]) @ np.abs(gain).T
    assert (np.abs(got - want) <= 1e-13 * terms).all()
