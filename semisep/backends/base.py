"""The backend interface: a small set of array primitives and two entry points.

Every algorithm in :mod:`semisep.algorithms` is written once, against the
primitives below (``be.exp``, ``be.cumsum``, ``be.einsum``, ...). A backend is a
twin of the others: it supplies the same primitives for its array type, so the
math lives in one place. A backend may also override an entry point
(:meth:`Backend.sss_matmul`, :meth:`Backend.ssd`) with fast kernels for the
cases it declares in :meth:`Backend.supports`; the Triton backend does that.

A new backend subclasses :class:`Backend`, implements the primitives and
registers itself with :func:`semisep.backends.register`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Array = Any


@dataclass(frozen=True)
class Case:
    """What an operation asks of a backend, for :meth:`Backend.supports`.

    Attributes
    ----------
    op : str
        ``"sss_matmul"``, ``"ssd"``, ``"segsum"`` or another primitive name.
    structure : str
        ``"scalar"``, ``"diagonal"`` or ``"full"`` (the structure of A).
    algorithm : str
        The resolved algorithm, ``"recurrent"``, ``"quadratic"`` or ``"chunked"``.
    log_form : bool
        True when A is given by log-decays (``from_log``), False for values.
    features : frozenset of str
        Optional extras asked for (``"dt"``, ``"D"``, ``"z"``, ``"seq_idx"``, ...).
    dtypes : tuple of str
        The dtypes of the data (``("float32",)``, ``("bfloat16", "float32")``, ...),
        sorted and without repeats; empty if not given.
    sizes : tuple of (str, int)
        Sizes a backend may limit, e.g. ``(("N", 64), ("P", 64))``.
    """

    op: str
    structure: str = "scalar"
    algorithm: str = "chunked"
    log_form: bool = True
    features: frozenset = field(default_factory=frozenset)
    dtypes: tuple = ()
    sizes: tuple = ()

    def describe(self) -> str:
        extra = f", features={sorted(self.features)}" if self.features else ""
        extra += f", dtypes {'/'.join(self.dtypes)}" if self.dtypes else ""
        extra += "".join(f", {k}={v}" for k, v in self.sizes)
        form = "log-decays" if self.log_form else "values of A"
        return (f"{self.op} with {self.structure} A given as {form}, "
                f"algorithm={self.algorithm!r}{extra}")


class Backend:
    """Array primitives for one array library, plus overridable entry points.

    Subclasses set :attr:`name` and implement every primitive. Shapes follow
    numpy's broadcasting rules; ``axis`` arguments are integers (negative
    allowed).
    """

    name: str = "abstract"

    # -- ownership and dtypes -------------------------------------------------
    def available(self) -> str | None:
        """None when the backend can run here, else why not (a message)."""
        return None

    def owns(self, array: Array) -> bool:
        """Whether ``array`` is of this backend's array type."""
        raise NotImplementedError

    def supports(self, case: Case) -> str | None:
        """None when this backend runs ``case``, else the reason it cannot."""
        return None

    def asarray(self, x: Array, like: Array | None = None) -> Array:
        """``x`` as this backend's array (on ``like``'s device), without copying when possible."""
        raise NotImplementedError

    def result_dtype(self, *arrays: Array):
        """The dtype of an operation's output: the promoted floating dtype of ``arrays``."""
        raise NotImplementedError

    def compute_dtype(self, dtype):
        """The dtype the arithmetic runs in for outputs of ``dtype`` (at least float32)."""
        raise NotImplementedError

    def cast(self, x: Array, dtype) -> Array:
        raise NotImplementedError

    def is_complex(self, x: Array) -> bool:
        raise NotImplementedError

    def is_floating(self, x: Array) -> bool:
        """Whether ``x`` has a real floating dtype (not bool, integer or complex)."""
        raise NotImplementedError

    # -- array primitives -------------------------------------------------------
    def zeros(self, shape, like: Array) -> Array:
        raise NotImplementedError

    def ones(self, shape, like: Array) -> Array:
        raise NotImplementedError

    def full(self, shape, value: float, like: Array) -> Array:
        raise NotImplementedError

    def tri(self, n: int, m: int, k: int, like: Array) -> Array:
        """Boolean ``(n, m)`` mask, True where ``col <= row + k`` (numpy's ``tri``)."""
        raise NotImplementedError

    def exp(self, x: Array) -> Array:
        raise NotImplementedError

    def abs(self, x: Array) -> Array:
        raise NotImplementedError

    def where(self, cond: Array, a: Array, b: Array) -> Array:
        raise NotImplementedError

    def softplus(self, x: Array) -> Array:
        """``log(1 + exp(x))``, without overflow."""
        raise NotImplementedError

    def sigmoid(self, x: Array) -> Array:
        raise NotImplementedError

    def cumsum(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def cumprod(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def sum(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def einsum(self, spec: str, *operands: Array) -> Array:
        raise NotImplementedError

    def broadcast_to(self, x: Array, shape) -> Array:
        raise NotImplementedError

    def broadcast_shapes(self, *shapes) -> tuple:
        raise NotImplementedError

    def moveaxis(self, x: Array, source: int, destination: int) -> Array:
        raise NotImplementedError

    def flip(self, x: Array, axis: int) -> Array:
        raise NotImplementedError

    def concat(self, arrays, axis: int) -> Array:
        raise NotImplementedError

    def stack(self, arrays, axis: int) -> Array:
        raise NotImplementedError

    def any(self, x: Array) -> bool:
        raise NotImplementedError

    def to_numpy(self, x: Array):
        """A float64-safe numpy copy of ``x`` (for reporting and tests)."""
        raise NotImplementedError

    # -- powers and discrete Fourier transforms (numpy's conventions) -----------
    def power(self, x: Array, y: Array) -> Array:
        """``x ** y`` elementwise; a negative ``x`` with an integral ``y`` is allowed."""
        raise NotImplementedError

    def complex_dtype(self, dtype):
        """The complex dtype of the precision of the real ``dtype`` (float32 -> complex64)."""
        raise NotImplementedError

    def fft(self, x: Array, n: int, axis: int) -> Array:
        """``X_k = sum_t x_t exp(-2 pi i k t / n)`` along ``axis`` (zero-padded or cut to n)."""
        raise NotImplementedError

    def ifft(self, x: Array, n: int, axis: int) -> Array:
        """The inverse of :meth:`fft`: ``x_t = (1/n) sum_k X_k exp(+2 pi i k t / n)``."""
        raise NotImplementedError

    def rfft(self, x: Array, n: int, axis: int) -> Array:
        """:meth:`fft` of a real ``x``, the ``n // 2 + 1`` non-negative frequencies."""
        raise NotImplementedError

    def irfft(self, x: Array, n: int, axis: int) -> Array:
        """The real inverse of :meth:`rfft`, of length ``n`` along ``axis``."""
        raise NotImplementedError

    # -- dense linear algebra over the last two axes (batched) ------------------
    def qr(self, x: Array):
        """The reduced QR of ``x`` ``(..., m, n)``: ``Q`` ``(..., m, k)``, ``R`` ``(..., k, n)``, k = min(m, n)."""
        raise NotImplementedError

    def svd(self, x: Array):
        """The reduced SVD of ``x`` ``(..., m, n)``: ``U``, ``S`` (descending), ``Vh`` with k = min(m, n)."""
        raise NotImplementedError

    def pad(self, x: Array, axis: int, after: int, value: float = 0.0) -> Array:
        """Append ``after`` entries equal to ``value`` along ``axis``."""
        if after == 0:
            return x
        shape = list(x.shape)
        shape[axis] = after
        return self.concat([x, self.full(tuple(shape), value, like=x)], axis=axis)

    # -- entry points: the generic math unless a backend brings kernels -------
    def sss_matmul(self, problem):
        """Run an :class:`semisep.algorithms.problem.SSSProblem`; returns ``(y, final_state)``."""
        from ..algorithms import run_sss

        return run_sss(self, problem)

    def ssd(self, x, log_a, B, C, **options):
        """The functional SSD (see :func:`semisep.ssd`); default: via the object path."""
        from ..ssd import ssd_via_sss

        return ssd_via_sss(self, x, log_a, B, C, **options)
