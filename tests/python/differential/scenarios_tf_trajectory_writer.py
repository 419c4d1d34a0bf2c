"""Differential scenarios: TrajectoryWriter items checked against table
signatures (`tf.TensorSpec`s)."""

import collections

import numpy as np


def _error(callable_, *args, **kwargs):
  try:
    callable_(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    return [type(e).__name__, str(e)]
  return None


def _signed(reverb, env, signature, **kwargs):
  table = reverb.Table(name='s', sampler=reverb.selectors.Fifo(),
                       remover=reverb.selectors.Fifo(), max_size=100,
                       rate_limiter=reverb.rate_limiters.MinSize(1),
                       signature=signature)
  client = reverb.Client(env.server([table]))
  return client, client.trajectory_writer(3, **kwargs)


def _obs_act(env):
  tf = env.tf
  return {'obs': tf.TensorSpec([None, 2], tf.float32),
          'act': tf.TensorSpec([], tf.int32)}


def _append_steps(writer):
  for t in range(3):
    writer.append({'obs': np.full([2], t, np.float32), 'act': np.int32(t),
                   'obs64': np.full([2], t, np.float64),
                   'wide': np.full([3], t, np.float32)})


def scenario_signature_match(reverb, env):
  client, writer = _signed(reverb, env, _obs_act(env))
  _append_steps(writer)
  writer.create_item('s', 1.0, {'obs': writer.history['obs'][-2:],
                                'act': writer.history['act'][-1]})
  writer.flush()
  [sample] = list(client.sample('s', num_samples=1, emit_timesteps=False))
  return [column.tolist() for column in sample.data]


def scenario_signature_mismatches(reverb, env):
  _, writer = _signed(reverb, env, _obs_act(env))
  _append_steps(writer)
  history = writer.history
  return [
      _error(writer.create_item, 's', 1.0, {'obs': history['obs'][-2:]}),
      _error(writer.create_item, 's', 1.0, {'obs': history['obs64'][-2:],
                                            'act': history['act'][-1]}),
      _error(writer.create_item, 's', 1.0, {'obs': history['wide'][-2:],
                                            'act': history['act'][-1]}),
      # A squeezed column where the signature has a time dimension.
      _error(writer.create_item, 's', 1.0, {'obs': history['obs'][-1],
                                            'act': history['act'][-1]}),
      _error(writer.create_item, 's', 1.0, {'obs': history['obs'][-2:],
                                            'act': history['act'][-1:]}),
      _error(writer.create_item, 's', 1.0, {'obs': history['obs'][-2:],
                                            'act': history['act'][-1],
                                            'x': history['act'][-1]}),
      _error(writer.create_item, 's', 1.0, [history['obs'][-2:],
                                            history['act'][-1]]),
  ]


def scenario_signature_names_and_dtypes(reverb, env):
  tf = env.tf
  pair = collections.namedtuple('Pair', ['zz', 'aa'])
  signature = {
      'x': {'a': tf.TensorSpec([None, 2], tf.float32),
            'b': tf.TensorSpec([3], tf.int64, name='named')},
      'l': [tf.TensorSpec(None, tf.string), tf.TensorSpec([None, None],
                                                          tf.bool)],
      'p': pair(tf.TensorSpec([], tf.uint8), tf.TensorSpec([1], tf.float16)),
      't': (tf.TensorSpec([], tf.complex64), tf.TensorSpec([], tf.uint64)),
  }
  _, writer = _signed(reverb, env, signature)
  writer.append({'a': np.zeros([2], np.float64), 's': np.array('x')})
  return [_error(writer.create_item, 's', 1.0, {'a': writer.history['a'][-1:],
                                                's': writer.history['s'][-1]})]


def scenario_signature_of_one_spec(reverb, env):
  tf = env.tf
  _, writer = _signed(reverb, env, tf.TensorSpec([2], tf.float32))
  writer.append(np.zeros([2], np.int16))
  return _error(writer.create_item, 's', 1.0, writer.history[-1])


def scenario_signature_check_comes_after_column_errors(reverb, env):
  _, writer = _signed(reverb, env, _obs_act(env))
  _append_steps(writer)
  history = writer.history
  mixed = reverb.TrajectoryColumn(list(history['obs'][-1]) +
                                  list(history['wide'][-1]))
  old = history['act'][-3]
  for t in range(3):
    writer.append({'act': np.int32(t)})
  outcomes = [_error(writer.create_item, 's', 1.0, {'obs': mixed}),
              _error(writer.create_item, 's', 1.0, {'obs': old}),
              _error(writer.create_item, 'missing', 1.0, {'obs': old}),
              _error(writer.create_item, 's', 1.0, reverb.TrajectoryColumn([]))]
  column = writer.history['act'][-1]
  writer.close()
  outcomes.append(_error(writer.create_item, 'missing', 1.0, column))
  return outcomes


def scenario_signature_mismatch_unvalidated(reverb, env):
  _, writer = _signed(reverb, env, _obs_act(env), validate_items=False)
  writer.append({'obs': np.zeros([2], np.float64), 'act': np.int32(0)})
  writer.create_item('s', 1.0, {'obs': writer.history['obs'][-1:],
                                'act': writer.history['act'][-1]})
  return _error(writer.flush, timeout_ms=5000)
