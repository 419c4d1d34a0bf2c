"""Exceptions raised by Reverb (names and hierarchy as dm-reverb).

Besides these, bad arguments raise ValueError, and other failures reported
by the C++ core raise RuntimeError (see reverb/pybind.pyi).
"""


class ReverbError(Exception):
  """Base class for Reverb-specific errors."""


class DeadlineExceededError(ReverbError):
  """A call did not finish before its timeout."""
