"""Signatures given as tf.TensorSpec, when TensorFlow is installed.

Each case runs in a subprocess: once TensorFlow is imported, signatures
decode to TensorFlow specs, which would change what the other tests see.
"""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec('tensorflow') is None,
    reason='TensorFlow is not installed')


def run(code: str):
  result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]


def test_tf_specs_round_trip_as_tf_specs():
  run("""
      import tensorflow as tf
      import reverb
      signature = {
          'obs': tf.TensorSpec([None, 4], tf.float32, 'obs'),
          'action': tf.TensorSpec([], tf.int64, 'action'),
      }
      table = reverb.Table('t', reverb.selectors.Uniform(),
                           reverb.selectors.Fifo(), 10,
                           reverb.rate_limiters.MinSize(1),
                           signature=signature)
      assert table.info.signature == signature, table.info.signature
      """)


def test_reverb_first_then_tensorflow_then_tables():
  run("""
      import sys
      import reverb
      assert 'tensorflow' not in sys.modules
      import tensorflow as tf
      table = reverb.Table.queue('q', 3,
                                 signature=tf.TensorSpec([2], tf.uint8))
      assert table.info.signature == tf.TensorSpec([2], tf.uint8)
      """)


def test_encoding_matches_tensorflows_own_coder():
  run("""
      import collections
      import tensorflow as tf
      from tensorflow.python.saved_model import nested_structure_coder
      from reverb import structured_value
      Step = collections.namedtuple('Step', ['o', 'r'])
      nest = {'s': Step(tf.TensorSpec([None, 2], tf.float32, 'o'),
                        tf.TensorSpec([], tf.int32, 'r')),
              'l': [tf.TensorSpec([3], tf.uint8)]}
      ours = structured_value.encode(nest).SerializeToString()
      theirs = nested_structure_coder.encode_structure(nest)
      from reverb import tf_protos
      assert tf_protos.StructuredValue.FromString(ours) == (
          tf_protos.StructuredValue.FromString(theirs.SerializeToString()))
      assert structured_value.decode(
          tf_protos.StructuredValue.FromString(
              theirs.SerializeToString())) == nest
      """)


def test_client_with_tf_signatures_and_sample_info_dtypes():
  run("""
      import numpy as np
      import tensorflow as tf
      import reverb
      signature = {'obs': tf.TensorSpec([2], tf.float32),
                   'step': tf.TensorSpec([], tf.int64)}
      table = reverb.Table('t', reverb.selectors.Fifo(),
                           reverb.selectors.Fifo(), 10,
                           reverb.rate_limiters.MinSize(1),
                           signature=signature)
      with reverb.Server([table]) as server:
        client = server.localhost_client()
        client.insert({'obs': np.ones(2, np.float32), 'step': np.int64(3)},
                      priorities={'t': 1.0})
        try:
          client.insert({'obs': np.ones(2, np.float64), 'step': np.int64(3)},
                        priorities={'t': 1.0})
          raise AssertionError('a float64 obs matched a float32 signature')
        except ValueError:
          pass
        [step] = next(client.sample('t', unpack_as_table_signature=True,
                                    timeout=30))
        assert step.data['step'] == 3, step
        assert client.server_info()['t'].signature == signature
      assert reverb.SampleInfo.tf_dtypes() == reverb.SampleInfo(
          tf.uint64, tf.double, tf.int64, tf.double, tf.int32)
      assert all(s == tf.TensorShape([]) for s in reverb.SampleInfo.tf_shapes())
      """)


def test_specs_handed_to_users_are_tensorflows_when_it_is_installed():
  run("""
      import sys
      import numpy as np
      import reverb
      from reverb import structured_writer as sw
      assert 'tensorflow' not in sys.modules
      step = {'a': np.zeros((), np.int32), 'b': np.zeros(3, np.float32)}
      ref = sw.create_reference_step(step)
      configs = [sw.create_config({'x': ref['a'][-2:], 'y': ref['b'][-1]}, 't'),
                 sw.create_config({'x': ref['a'][-3:], 'y': ref['b'][-1]}, 't')]
      signature = sw.infer_signature(configs, step)
      import tensorflow as tf
      assert signature == {'x': tf.TensorSpec([None], tf.int32, 'x'),
                           'y': tf.TensorSpec([3], tf.float32, 'y')}
      assert signature['x'].is_compatible_with(tf.zeros([2], tf.int32))
      table = reverb.Table.queue('t', 10, signature=signature)
      assert table.info.signature == signature
      with reverb.Server([table]) as server:
        client = server.localhost_client()
        assert client.server_info()['t'].signature == signature
      """)


def test_item_validation_does_not_import_tensorflow():
  run("""
      import sys
      import numpy as np
      import reverb
      signature = {'obs': reverb.specs.TensorSpec([2], np.float32)}
      table = reverb.Table.queue('t', 10, signature=signature)
      with reverb.Server([table]) as server:
        client = server.localhost_client()
        client.insert({'obs': np.ones(2, np.float32)}, priorities={'t': 1.0})
        with client.trajectory_writer(1) as writer:
          writer.append({'obs': np.ones(2, np.float32)})
          writer.create_item('t', 1.0, {'obs': writer.history['obs'][-1]})
        [sample] = next(client.sample('t', unpack_as_table_signature=True))
        assert sample.data['obs'].shape == (2,)
      assert 'tensorflow' not in sys.modules
      """)


def test_specs_are_reverbs_without_tensorflow():
  run("""
      import importlib.abc, importlib.machinery, sys

      class NoTensorFlow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        # TensorFlow as if it were not importable.
        def find_spec(self, name, path=None, target=None):
          if name == 'tensorflow':
            return importlib.machinery.ModuleSpec(name, self)
          return None

        def exec_module(self, module):
          raise ImportError('No module named tensorflow')

      sys.meta_path.insert(0, NoTensorFlow())
      import numpy as np
      import reverb
      from reverb import structured_writer as sw
      ref = sw.create_reference_step({'a': None})
      signature = sw.infer_signature(
          [sw.create_config({'a': ref['a'][-2:]}, 't')],
          {'a': np.zeros(3, np.uint8)})
      assert signature == {
          'a': reverb.specs.TensorSpec([2, 3], np.uint8, 'a')}, signature
      table = reverb.Table.queue('t', 10, signature=signature)
      assert table.info.signature == signature
      """)
