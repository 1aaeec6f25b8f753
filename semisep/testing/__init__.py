"""Testing tools for semisep and its users: references, assertions, hypothesis strategies.

* :func:`dense_reference`, :func:`recurrence_reference`: float64 oracles from the definition.
* :func:`assert_matches_dense`, :func:`assert_close`, :func:`relative_error`.
* strategies (need hypothesis): :func:`sss_matrices`, :func:`one_ss`, :func:`log_decays`,
  :func:`shapes`, :func:`inputs`.
"""

from .assertions import (TOLERANCES, assert_close, assert_matches_dense, assert_module_gradcheck,
                         default_rtol, relative_error)
from .reference import dense_reference, recurrence_reference, to_numpy64

__all__ = ["TOLERANCES", "assert_close", "assert_matches_dense", "assert_module_gradcheck",
           "default_rtol",
           "dense_reference", "recurrence_reference", "relative_error", "to_numpy64"]

try:
    from .strategies import inputs, log_decays, one_ss, shapes, sss_matrices
except ImportError:  # hypothesis is a test extra
    pass
else:
    __all__ += ["inputs", "log_decays", "one_ss", "shapes", "sss_matrices"]
    from .algebra import redundant_form, sss_pairs  # noqa: E402 - needs hypothesis too
    __all__ += ["redundant_form", "sss_pairs"]

from .masks import MaskTestMixin, masks  # noqa: E402 - the strategy needs hypothesis, the mixin not
__all__ += ["MaskTestMixin", "masks"]
