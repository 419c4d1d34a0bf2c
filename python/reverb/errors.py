"""Exceptions raised by Reverb (names and hierarchy as dm-reverb).

Besides these, bad arguments raise ValueError, and other failures reported
by the C++ core raise RuntimeError (see reverb/pybind.pyi).
"""

import contextlib
import datetime
from typing import Optional


class ReverbError(Exception):
  """Base class for Reverb-specific errors."""


class DeadlineExceededError(ReverbError):
  """A call did not finish before its timeout."""


@contextlib.contextmanager
def writer_call_timeout(call: str, timeout_ms: Optional[int]):
  """Raises a writer's timeout (the C++ "Timeout exceeded ...") inside the
  block as dm-reverb's writers do: DeadlineExceededError "<call> call did
  not complete within provided timeout of <timedelta>". Without a timeout
  (None) errors pass unchanged."""
  try:
    yield
  except (RuntimeError, DeadlineExceededError) as e:
    if timeout_ms is None or 'Timeout exceeded' not in str(e):
      raise
    raise DeadlineExceededError(
        f'{call} call did not complete within provided timeout of '
        f'{datetime.timedelta(milliseconds=timeout_ms)}') from e
