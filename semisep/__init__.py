"""semisep: semiseparable matrices as objects.

>>> import numpy as np, semisep as ss
>>> rng = np.random.default_rng(0)
>>> M = ss.SSS(rng.uniform(0, 1, 8), rng.normal(size=(8, 4)), rng.normal(size=(8, 4)))
>>> x = rng.normal(size=(8, 2))
>>> np.allclose(M @ x, M.to_dense() @ x)
True

See DESIGN.md for the math and the layering; :mod:`semisep.backends` for how
a backend is chosen.
"""

from ._version import __version__
from . import masks
from .backends import available_backends, get_backend, use_backend
from .masked import masked
from .matrix import Dense, Reversed, StructuredMatrix
from .oness import OneSS, cumprodsum, segsum
from .sma import sma
from .ssd import ssd
from .sss import SSS
from .algebra import is_semiseparable, semiseparable_rank

__all__ = [
    "__version__",
    "Dense",
    "OneSS",
    "Reversed",
    "SSS",
    "StructuredMatrix",
    "available_backends",
    "cumprodsum",
    "get_backend",
    "is_semiseparable",
    "masked",
    "masks",
    "segsum",
    "semiseparable_rank",
    "sma",
    "ssd",
    "use_backend",
]
