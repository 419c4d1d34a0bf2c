"""Messages of reverb/cc/checkpointing/checkpoint.proto."""

from reverb import _protos

globals().update(_protos.file_symbols('reverb/cc/checkpointing/checkpoint.proto'))
