"""Reverb's protocol buffer messages, in a descriptor pool of their own.

The messages (package `deepmind.reverb`, and our copies of TensorFlow's
`tensorflow.TensorProto`, `tensorflow.StructuredValue`, ...) are read from the
descriptor set the build writes next to this file. A private pool keeps them
apart from TensorFlow's own definitions of the same names, so `reverb` and
`tensorflow` can be imported in any order. The bytes are the same: convert
with `SerializeToString()` / `FromString()` where a TensorFlow message is
needed.
"""

import os

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory

_DESCRIPTOR_SET = 'descriptors.binpb'


def _load_pool() -> descriptor_pool.DescriptorPool:
  import reverb  # pylint: disable=g-import-not-at-top
  # The package may span several directories (editable installs), so search
  # its whole __path__ rather than this file's directory.
  for directory in reverb.__path__:
    path = os.path.join(directory, _DESCRIPTOR_SET)
    if os.path.exists(path):
      with open(path, 'rb') as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
      pool = descriptor_pool.DescriptorPool()
      for file_proto in files.file:
        pool.Add(file_proto)
      return pool
  raise ImportError(f'{_DESCRIPTOR_SET} not found in {reverb.__path__}; '
                    'is reverb installed correctly?')


POOL = _load_pool()


def file_symbols(filename: str) -> dict:
  """Message classes and enum values defined at the top level of a file."""
  file_descriptor = POOL.FindFileByName(filename)
  symbols = {}
  for name, descriptor in file_descriptor.message_types_by_name.items():
    symbols[name] = message_factory.GetMessageClass(descriptor)
  for name, descriptor in file_descriptor.enum_types_by_name.items():
    for value in descriptor.values:
      symbols[value.name] = value.number
  return symbols
