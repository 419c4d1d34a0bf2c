"""libreverb's log lines go to `logging.getLogger('reverb')` with their level.

So users silence, filter or redirect them as any Python logging (by default
only warnings and errors show, on stderr). At exit they go back to stderr, as
libreverb's threads may outlive the interpreter's logging.
"""

import atexit
import logging

from reverb import pybind

LOGGER = logging.getLogger('reverb')
_LEVELS = (logging.INFO, logging.WARNING, logging.ERROR)


def _log(severity: int, line: str) -> None:
  LOGGER.log(_LEVELS[severity], line)


pybind.set_log_sink(_log)
atexit.register(pybind.set_log_sink, None)
