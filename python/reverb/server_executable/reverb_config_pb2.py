"""Messages of reverb/server_executable/reverb_config.proto."""

from reverb import _protos

globals().update(_protos.file_symbols(
    'reverb/server_executable/reverb_config.proto'))
