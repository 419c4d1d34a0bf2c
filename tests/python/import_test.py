"""`import reverb`: what it exports and what it must not import."""

import subprocess
import sys

import reverb


def test_exports_upstream_names():
  for name in ('selectors', 'rate_limiters', 'Table', 'ReverbError',
               'DeadlineExceededError', 'errors', 'item_selectors', 'pybind',
               'reverb_types', 'server'):
    assert hasattr(reverb, name), name
  assert reverb.selectors is reverb.item_selectors
  assert issubclass(reverb.DeadlineExceededError, reverb.ReverbError)


def test_proto_modules_have_upstream_names():
  from reverb.cc import schema_pb2
  from reverb.cc.checkpointing import checkpoint_pb2
  info = schema_pb2.TableInfo(name='x', max_size=3)
  assert schema_pb2.TableInfo.FromString(info.SerializeToString()) == info
  assert info.DESCRIPTOR.full_name == 'deepmind.reverb.TableInfo'
  assert (checkpoint_pb2.PriorityTableCheckpoint.DESCRIPTOR.full_name ==
          'deepmind.reverb.PriorityTableCheckpoint')


def test_import_does_not_import_tensorflow_or_ray():
  code = ('import sys, reverb; '
          'assert "tensorflow" not in sys.modules, "tensorflow imported"; '
          'assert "ray" not in sys.modules, "ray imported"')
  subprocess.run([sys.executable, '-c', code], check=True, timeout=120)


def test_reverb_ray_without_ray_says_how_to_install_it():
  code = ('import sys; sys.modules["ray"] = None\n'  # As if not installed.
          'try:\n'
          '  import reverb.ray\n'
          'except ImportError as e:\n'
          '  print(e)')
  result = subprocess.run([sys.executable, '-c', code], check=True,
                          timeout=120, capture_output=True, text=True)
  assert 'pip install reverb[ray]' in result.stdout
