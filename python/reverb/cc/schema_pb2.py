"""Messages of reverb/cc/schema.proto (TableInfo, PrioritizedItem, ...)."""

from reverb import _protos

globals().update(_protos.file_symbols('reverb/cc/schema.proto'))
