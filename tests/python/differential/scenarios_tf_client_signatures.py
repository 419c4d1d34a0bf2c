"""Differential scenarios: tables with signatures (`tf.TensorSpec` nests)
through reverb.Client, its legacy Writer, reverb.Table and server_info:
what is accepted, the errors for data that does not match, and how specs
read back.
"""

import importlib
import time

import numpy as np

import scenario_util as util


def _nested_signature(tf):
  return {'a': tf.TensorSpec([2], tf.float32, name='x'),
          'b': (tf.TensorSpec([], tf.int64),)}


def _step(a_dtype=np.float32, a_size=2):
  return {'a': np.zeros(a_size, a_dtype), 'b': (np.int64(3),)}


def _sizes(client, expected, within=10.0):
  """The sizes of the tables of `expected` (name -> size), read again for up
  to `within` seconds until they are as expected: dm-reverb confirms an
  insert before its table worker has applied it."""
  deadline = time.monotonic() + within
  while True:
    info = client.server_info()
    sizes = {name: info[name].current_size for name in expected}
    if sizes == expected or time.monotonic() > deadline:
      return sizes
    time.sleep(0.01)


def _client(reverb, env, *tables):
  return reverb.Client(env.server(list(tables)))


def _signed_client(reverb, env):
  tf = env.tf
  return _client(
      reverb, env, util.fifo_table(reverb, signature=_nested_signature(tf)),
      util.fifo_table(reverb, 'plain'),
      util.fifo_table(reverb, 'whole',
                      signature=tf.TensorSpec([3, 2], tf.float32)),
      util.fifo_table(reverb, 'any',
                      signature=tf.TensorSpec([None, 2], tf.float32)),
      util.fifo_table(reverb, 'one',
                      signature=tf.TensorSpec([1, 2], tf.float32)))


def scenario_insert_matching_then_sample(reverb, env):
  client = _signed_client(reverb, env)
  client.insert(_step(), priorities={'t': 1.0})
  [[step]] = list(client.sample('t', unpack_as_table_signature=True))
  [whole] = list(client.sample('t', emit_timesteps=False,
                               unpack_as_table_signature=True))
  return {'step': step.data, 'whole': whole.data}


def scenario_insert_with_another_dtype(reverb, env):
  client = _signed_client(reverb, env)
  client.insert(_step(a_dtype=np.float64), priorities={'t': 1.0})


def scenario_insert_with_another_shape(reverb, env):
  client = _signed_client(reverb, env)
  client.insert(_step(a_size=3), priorities={'t': 1.0})


def scenario_insert_with_fewer_columns(reverb, env):
  client = _signed_client(reverb, env)
  client.insert([np.zeros(2, np.float32)], priorities={'t': 1.0})


def scenario_insert_with_more_columns(reverb, env):
  client = _signed_client(reverb, env)
  client.insert([np.zeros(2, np.float32), np.int64(1), np.int64(1)],
                priorities={'t': 1.0})


def scenario_insert_into_tables_with_and_without_signature(reverb, env):
  client = _signed_client(reverb, env)
  client.insert(_step(), priorities={'t': 1.0, 'plain': 2.0})
  [[plain]] = list(client.sample('plain', unpack_as_table_signature=True))
  return {'plain': plain.data, 'sizes': _sizes(client, {'t': 1, 'plain': 1})}


def scenario_insert_against_shapes_of_whole_items(reverb, env):
  client = _signed_client(reverb, env)
  outcomes = [
      util.outcome(lambda: client.insert([np.zeros(2, np.float32)],
                                         priorities={'one': 1.0})),
      util.outcome(lambda: client.insert([np.zeros(2, np.float32)],
                                         priorities={'any': 1.0})),
      util.outcome(lambda: client.insert([np.zeros((5, 2), np.float32)],
                                         priorities={'any': 1.0})),
      util.outcome(lambda: client.insert([np.zeros((3, 2), np.float32)],
                                         priorities={'whole': 1.0})),
      util.outcome(lambda: client.insert([np.zeros(2, np.float32)],
                                         priorities={'whole': 1.0})),
  ]
  return {'outcomes': outcomes,
          'sizes': _sizes(client, {'one': 1, 'any': 2, 'whole': 1})}


def scenario_writer_items_checked_newest_step_first(reverb, env):
  client = _signed_client(reverb, env)
  outcomes = []
  for steps in ([_step(), _step(np.float64), _step()],
                [_step(np.float64), _step(), _step()],
                [_step(np.float64), _step(), _step(np.float64)]):
    writer = client.writer(3, chunk_length=1)
    for step in steps:
      writer.append(step)
    outcomes.append(util.outcome(lambda w=writer: w.create_item('t', 3, 1.0)))
    outcomes.append(util.outcome(lambda w=writer: w.create_item('t', 2, 1.0)))
    outcomes.append(
        util.outcome(lambda w=writer: w.create_item('plain', 3, 1.0)))
    writer.close()
  return {'outcomes': outcomes, 'sizes': _sizes(client, {'t': 1})}


def scenario_writer_items_against_shapes_of_whole_items(reverb, env):
  client = _signed_client(reverb, env)
  writer = client.writer(3, chunk_length=1)
  for _ in range(3):
    writer.append([np.zeros(2, np.float32)])
  outcomes = [util.outcome(lambda t=t, n=n: writer.create_item(t, n, 1.0))
              for t, n in (('whole', 3), ('whole', 1), ('any', 3),
                           ('one', 1), ('one', 2))]
  writer.close()
  return outcomes


def scenario_writer_sequence_sampled_unpacked(reverb, env):
  client = _signed_client(reverb, env)
  with client.writer(3) as writer:
    writer.append_sequence({'a': np.ones((3, 2), np.float32),
                            'b': (np.arange(3),)})
    writer.create_item('t', 3, 1.0)
  [steps] = list(client.sample('t', unpack_as_table_signature=True))
  return [s.data for s in steps]


def _bounded_spec(env, *args, **kwargs):
  """A BoundedTensorSpec (tf.TensorSpec's subclass, not exported by tf)."""
  del env  # The caller has imported TensorFlow (env.tf).
  tensor_spec = importlib.import_module(
      'tensorflow.python.framework.tensor_spec')
  return tensor_spec.BoundedTensorSpec(*args, **kwargs)


def scenario_server_info_signatures(reverb, env):
  tf = env.tf
  client = _client(
      reverb, env, util.fifo_table(reverb, signature=_nested_signature(tf)),
      util.fifo_table(reverb, 'bounded', signature=_bounded_spec(
          env, [2], tf.int32, minimum=0, maximum=[3, 4], name='b')),
      util.fifo_table(reverb, 'unknown_rank',
                      signature=tf.TensorSpec(None, tf.int32)),
      util.fifo_table(reverb, 'strings', signature=[tf.TensorSpec([None, 2],
                                                                  tf.string)]),
      util.fifo_table(reverb, 'plain'))
  return {name: repr(info.signature)
          for name, info in sorted(client.server_info().items())}


def scenario_table_with_signature(reverb, env):
  tf = env.tf
  table = util.fifo_table(reverb, signature={
      'x': tf.TensorSpec([3], tf.float64, name='n'),
      'y': _bounded_spec(env, [], tf.uint8, minimum=1, maximum=9)})
  # dm-reverb's decoded dicts follow the proto map's (arbitrary) order.
  return {'info': sorted((k, repr(v)) for k, v in table.info.signature.items()),
          'repr': repr(table)}


def scenario_table_queue_with_signature(reverb, env):
  tf = env.tf
  table = reverb.Table.queue('q', 3, signature=tf.TensorSpec([2], tf.int32))
  replaced = table.replace(name='r')
  return {'repr': repr(table), 'info': repr(table.info.signature),
          'replaced': repr(replaced.info.signature)}


def scenario_signature_with_a_number(reverb, env):
  del env
  util.fifo_table(reverb, signature={'a': 1})


def scenario_signature_with_a_string(reverb, env):
  del env
  util.fifo_table(reverb, signature=['abc'])


def scenario_signature_with_a_ragged_spec(reverb, env):
  tf = env.tf
  util.fifo_table(reverb, signature=tf.RaggedTensorSpec([2, None], tf.int32))
