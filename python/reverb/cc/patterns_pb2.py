"""Messages of reverb/cc/patterns.proto (StructuredWriter configs)."""

from reverb import _protos

globals().update(_protos.file_symbols('reverb/cc/patterns.proto'))
