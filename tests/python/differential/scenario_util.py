"""Helpers the differential scenario modules (and runner.py) share.

Like the scenario modules, this imports only the standard library: the
`reverb` module under test is passed in. It is imported by its name from
this folder, which runner.py puts on sys.path (`python -I` leaves the
script's folder out).
"""


def error_outcome(e: BaseException) -> dict:
  """A raised exception as an outcome: its class name, the builtin exception
  classes it is an instance of, and its message."""
  return {
      'raised': type(e).__name__,
      'builtins': sorted({c.__name__ for c in type(e).__mro__
                          if c.__module__ == 'builtins' and
                          c not in (object, BaseException)}),
      'message': str(e),
  }


def type_error(fn):
  """Calls `fn`, which must raise TypeError: its error outcome without the
  message (pybind's "incompatible function arguments" texts print the
  bindings' internal signatures, which differ)."""
  try:
    fn()
  except TypeError as e:
    outcome = error_outcome(e)
    del outcome['message']
    return outcome
  return 'no TypeError'


def outcome(fn):
  """What `fn()` returns, or its exception's class and message (for
  scenarios that go on after an error)."""
  try:
    return {'returned': fn()}
  except Exception as e:  # pylint: disable=broad-except
    return {'raised': type(e).__name__, 'message': str(e)}


def table(reverb, name='t', **kwargs):
  """A reverb.Table of at most 100 items, sampled uniformly, removed first
  in first out, MinSize(1); `kwargs` replace any of these options."""
  options = dict(sampler=reverb.selectors.Uniform(),
                 remover=reverb.selectors.Fifo(), max_size=100,
                 rate_limiter=reverb.rate_limiters.MinSize(1))
  options.update(kwargs)
  return reverb.Table(name=name, **options)


def fifo_table(reverb, name='t', **kwargs):
  """As `table`, but sampled first in first out, so that samples come in a
  known order."""
  kwargs.setdefault('sampler', reverb.selectors.Fifo())
  return table(reverb, name, **kwargs)
