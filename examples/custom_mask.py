"""A new masked-attention variant in a few lines: a banded decay mask.

    python examples/custom_mask.py

``BandedDecay(gamma, T, width)`` keeps RetNet's decay ``gamma^(i - j)`` but only
for the last ``width`` positions (``0 <= i - j < width``): a sliding-window
decay. Its product needs no new algorithm: with ``D`` the full decay mask and
``y = D x``, the band is ``y_i - gamma^width y_{i - width}``, so it costs one
decay scan, O(T) per column (the subtraction cancels history of size up to
``1 / (1 - gamma)`` times the band, so keep gamma away from 1). The class implements the mask protocol (shape,
dtype, matmul, to_dense, T, and the optional matmul_flops for the automatic
choice), is checked against its definition with ``semisep.testing``, and is
then used in ``semisep.sma`` with numpy and with torch, gradients included.
"""

import numpy as np
import torch

import semisep as ss
from semisep.backends import backend_of
from semisep.testing import MaskTestMixin, assert_close, assert_matches_dense


class BandedDecay(ss.StructuredMatrix):
    """``L[i, j] = gamma^(i - j)`` for ``0 <= i - j < width``, else 0; shape ``(T, T)``."""

    def __init__(self, gamma, T, width):
        self.decay = ss.masks.Decay(gamma, T)
        self.gamma, self.width = gamma, width

    @property
    def shape(self):
        return self.decay.shape

    @property
    def dtype(self):
        return self.decay.dtype

    def matmul(self, x):
        if x.ndim == 1:                           # a vector, as numpy's matmul
            return self.matmul(x[:, None])[:, 0]
        y = self.decay @ x                        # (..., T, m): the full decay
        if self.width >= y.shape[-2]:
            return y
        be = backend_of(y)
        w = self.width
        lagged = be.concat([be.zeros(y.shape[:-2] + (w, y.shape[-1]), like=y),
                            y[..., :-w, :]], axis=-2)
        return y - self.gamma ** w * lagged

    def matmul_flops(self, m):
        return self.decay.matmul_flops(m) + 2 * self.shape[-1] * m

    def to_dense(self):
        dense = self.decay.to_dense()
        T = self.shape[-1]
        band = np.tri(T) - np.tri(T, k=-self.width)
        return dense * (band if isinstance(dense, np.ndarray) else dense.new_tensor(band))

    @property
    def T(self):
        return ss.Reversed(self)                 # Toeplitz: L^T = J L J


def definition(gamma, T, width):
    """The float64 dense form, entry by entry."""
    return np.array([[gamma ** (i - j) if 0 <= i - j < width else 0.0 for j in range(T)]
                     for i in range(T)])


class TestBandedDecay(MaskTestMixin):
    """Under pytest this class inherits the mask property tests; here we call them by hand."""

    def make_mask(self):
        return BandedDecay(0.9, 100, width=7)

    def make_dense(self):
        return definition(0.9, 100, 7)


def main():
    T, N, P, width = 100, 16, 8, 7
    L = BandedDecay(0.9, T, width)

    # 1. the mask against its definition: to_dense, L @ x, x @ L, L.T
    assert_matches_dense(L, definition(0.9, T, width))
    suite = TestBandedDecay()
    for name in [n for n in dir(suite) if n.startswith("test_")]:
        getattr(suite, name)()
    print("BandedDecay matches its definition; the MaskTestMixin tests pass")

    # 2. in sma: linear (the mask's own product) == quadratic == dense definition
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=(T, P))
    expected = (definition(0.9, T, width) * (Q @ K.T)) @ V
    for algorithm in ("linear", "quadratic", "auto"):
        assert_close(ss.sma(Q, K, V, L, algorithm=algorithm), expected, what=algorithm)
    print("sma linear == quadratic == dense definition (numpy, float64)")

    # 3. torch, with a learnable gamma
    gamma = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    Qt, Kt, Vt = (torch.tensor(a) for a in (Q, K, V))
    Y = ss.sma(Qt, Kt, Vt, BandedDecay(gamma, T, width), algorithm="linear")
    assert_close(Y, expected)
    Y.square().sum().backward()
    print(f"torch: same result; d(sum Y^2)/d(gamma) = {gamma.grad.item():.4f}")


if __name__ == "__main__":
    main()
