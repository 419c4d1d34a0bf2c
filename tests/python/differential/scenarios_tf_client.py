"""Differential scenarios: reverb.TFClient's ops (sample, insert,
update_priorities) in eager mode, in tf.function and in v1 sessions: what
they return, the ops they build, and their errors.

Errors in eager mode are compared whole (TensorFlow's wrapping,
"{{function_node ...}} ... [Op:...]", reads the same in both versions);
errors of graphs carry the Python stack of the op's creation, so `_op_error`
keeps their class and the op's message.
"""

import collections
import re

import numpy as np

import scenario_util as util

Step = collections.namedtuple('Step', ['observation', 'reward'])


def _server(reverb, env, *extra_tables):
  """Tables 'plain' (holding one item of [float32 1.5, int64 2]),
  'signed' (empty, signature {'a': float32[2], 'b': {'c': int64}}) and
  `extra_tables`."""
  tf = env.tf
  address = env.server([
      util.fifo_table(reverb, 'plain'),
      util.fifo_table(reverb, 'signed', signature={
          'a': tf.TensorSpec([2], tf.float32),
          'b': {'c': tf.TensorSpec([], tf.int64, name='count')}}),
  ] + list(extra_tables))
  reverb.Client(address).insert([np.float32(1.5), np.int64(2)],
                                {'plain': 1.0})
  return address


def _op_error(function):
  """As `util.outcome`, with only the op's message of a graph's error."""
  outcome = util.outcome(function)
  if 'message' in outcome:
    message = outcome['message']
    message = re.sub(r'\{\{function_node [^}]*\}\}\s*', '', message)
    message = re.split(r'\s*\[Op:', message)[0]
    # Graph errors: "Graph execution error: ... Node: 'x'\n<message>\n\t [[...".
    match = re.search(r"Node: '?[^\n']*'?\n(.*?)\n\t \[\[", message, re.S)
    if match:
      message = match.group(1)
    message = re.sub(r'\s*\[\[\{\{node [^}]*\}\}\]\]', '', message)
    outcome['message'] = message.strip()
  return outcome


def _info(sample):
  """The info fields of a sample but its (random) key."""
  info = sample.info
  return {'probability': info.probability, 'table_size': info.table_size,
          'priority': info.priority, 'times_sampled': info.times_sampled}


def _numpy(nest):
  tf_nest = __import__('tensorflow').nest
  return tf_nest.map_structure(lambda t: t.numpy(), nest)


def _sizes(reverb, address):
  return {name: info.current_size
          for name, info in reverb.Client(address).server_info().items()}


def scenario_sample_first_timestep_eager(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  with reverb.Client(address).writer(3) as writer:
    for t in range(3):
      writer.append([np.float32(t), np.full([2], t, np.int64)])
    writer.create_item('signed', 3, 2.5)  # No signature check: a writer.
  sample = reverb.TFClient(address).sample('signed', [tf.float32, tf.int64])
  return {'data': _numpy(sample.data), 'info': _numpy(_info(sample)),
          'dtypes': [t.dtype.name for t in sample.info]}


def scenario_sample_nested_data_dtypes(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)
  as_dict = client.sample('plain', {'b': tf.int64, 'a': tf.float32}).data
  as_step = client.sample('plain', Step(tf.float32, [tf.int64])).data
  as_tuple = client.sample('plain', (tf.float32, (tf.int64,))).data
  return {'dict': _numpy(as_dict), 'step': type(as_step).__name__,
          'step_values': _numpy(list(as_step)),
          'tuple': [type(as_tuple).__name__, type(as_tuple[1]).__name__],
          'tuple_values': _numpy(list(as_tuple))}


def scenario_sample_bare_dtype(reverb, env):
  tf = env.tf
  address = _server(reverb, env, util.fifo_table(reverb, 'single'))
  reverb.Client(address).insert(np.float32(4.0), {'single': 1.0})
  data = reverb.TFClient(address).sample('single', tf.float32).data
  return [type(data).__name__ == 'EagerTensor', data.numpy()]


def scenario_sample_in_function_with_table_argument(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)
  sample = tf.function(
      lambda table: client.sample(table, [tf.float32, tf.int64]))
  first = sample(tf.constant('plain'))
  second = sample(tf.constant('plain'))
  return {'data': _numpy(second.data), 'times_sampled': [
      first.info.times_sampled.numpy(), second.info.times_sampled.numpy()],
          'unknown': _op_error(lambda: sample(tf.constant('nope')))}


def scenario_sample_in_session_with_placeholder_table(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  with tf.Graph().as_default():
    table = tf.compat.v1.placeholder(tf.string, [])
    sample = reverb.TFClient(address).sample(table, [tf.float32, tf.int64])
    names = [t.name for t in tf.nest.flatten(sample)]
    with tf.compat.v1.Session() as session:
      info, data = session.run(sample, {table: 'plain'})
      unknown = _op_error(lambda: session.run(sample, {table: 'nope'}))
  return {'names': names, 'data': data, 'times_sampled': info.times_sampled,
          'unknown': unknown}


def scenario_sample_info_shapes_in_graph(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  with tf.Graph().as_default():
    sample = reverb.TFClient(address).sample('plain', [tf.float32])
  return [str(t.shape) for t in tf.nest.flatten(sample)]


def scenario_sample_errors_eager(reverb, env):
  tf = env.tf
  address = _server(reverb, env, reverb.Table.queue('queue', 10))
  with reverb.Client(address).trajectory_writer(2) as writer:
    for t in range(2):
      writer.append([np.float32(t), np.int64(t)])
    writer.create_item('queue', 1.0, [writer.history[0][-2:],
                                      writer.history[1][-1]])
  client = reverb.TFClient(address)
  return {
      'unknown_table': util.outcome(
          lambda: client.sample('nope', [tf.float32])),
      'dtype': util.outcome(
          lambda: client.sample('plain', [tf.float64, tf.int64])),
      'count': util.outcome(lambda: client.sample('plain', [tf.float32])),
      'none': util.outcome(lambda: client.sample('plain', [])),
      'squeezed': util.outcome(lambda: client.sample('queue',
                                                     [tf.float32, tf.int64])),
  }


def scenario_insert_eager_function_and_session(reverb, env):
  tf = env.tf
  address = _server(reverb, env, reverb.Table.queue('queue', 10))
  client = reverb.TFClient(address)
  eager = client.insert([tf.constant(1.0)], tf.constant(['queue']),
                        tf.constant([1.0], tf.float64))

  @tf.function
  def insert(value):
    client.insert([value], tf.constant(['queue']),
                  tf.constant([1.0], tf.float64))

  insert(tf.constant(2.0))
  with tf.Graph().as_default():
    op = reverb.TFClient(address).insert(
        [tf.constant(3.0)], tf.constant(['queue', 'plain']),
        tf.constant([1.0, 2.0], tf.float64))
    graph_op = [type(op).__name__, op.type, op.name]
    with tf.compat.v1.Session() as session:
      session.run(op)
  samples = reverb.Client(address).sample('queue', 3, emit_timesteps=False)
  return {'eager': eager, 'graph_op': graph_op,
          'queue': [s.data[0] for s in samples],
          'sizes': _sizes(reverb, address)}


def scenario_insert_nested_signature(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)
  client.insert([tf.constant([1.0, 2.0]), tf.constant(3, tf.int64)],
                tf.constant(['signed']), tf.constant([1.0], tf.float64))
  sample = client.sample('signed', {'a': tf.float32, 'b': {'c': tf.int64}})
  return _numpy(sample.data)


def scenario_insert_signature_mismatches(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)
  one = tf.constant([1.0], tf.float64)

  def insert(*data):
    return util.outcome(
        lambda: client.insert(list(data), tf.constant(['signed']), one))

  a, c = tf.constant([1.0, 2.0]), tf.constant(3, tf.int64)
  return {'dtype': insert(a, tf.constant(3)),
          'shape': insert(tf.constant([1.0, 2.0, 3.0]), c),
          'fewer': insert(a),
          'more': insert(a, c, tf.constant(True)),
          'strings': insert(tf.constant(['x']), c),
          'sizes': _sizes(reverb, address)}


def scenario_insert_into_plain_and_mismatched_table(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)
  outcome = util.outcome(lambda: client.insert(
      [tf.constant([1.0, 2.0]), tf.constant(3)], tf.constant(['plain',
                                                              'signed']),
      tf.constant([1.0, 1.0], tf.float64)))
  # dm-reverb inserts into 'plain' before it raises, but its item may or may
  # not reach the server (the op's writer goes away with the error), so only
  # 'signed' is compared; that ours inserts nothing into 'plain' either is
  # tf_client_test's test_insert_checks_signature_and_inserts_nothing_on_mismatch.
  return {'outcome': outcome, 'signed': _sizes(reverb, address)['signed']}


def scenario_insert_into_unknown_table(reverb, env):
  tf = env.tf
  address = env.server([util.fifo_table(reverb, 't')])
  client = reverb.TFClient(address)
  outcome = util.outcome(lambda: client.insert(
      [tf.constant(1.0)], tf.constant(['nope']), tf.constant([1.0],
                                                              tf.float64)))
  return {'outcome': outcome, 'sizes': _sizes(reverb, address)}


def scenario_insert_with_nan_priority(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  outcome = util.outcome(lambda: reverb.TFClient(address).insert(
      [tf.constant(1.0)], tf.constant(['plain']),
      tf.constant([np.nan], tf.float64)))
  return {'outcome': outcome, 'sizes': _sizes(reverb, address)}


def scenario_insert_argument_errors(reverb, env):
  tf = env.tf
  client = reverb.TFClient(_server(reverb, env))
  data = [tf.constant(1.0)]
  one = tf.constant([1.0], tf.float64)
  return {
      'tables_rank_0': util.outcome(
          lambda: client.insert(data, tf.constant('t'), one)),
      'tables_int': util.outcome(lambda: client.insert(data, tf.constant([1]),
                                                       one)),
      'priorities_float32': util.outcome(lambda: client.insert(
          data, tf.constant(['t']), tf.constant([1.0]))),
      'priorities_rank_0': util.outcome(lambda: client.insert(
          data, tf.constant(['t']), tf.constant(1.0, tf.float64))),
      'different_shapes': util.outcome(lambda: client.insert(
          data, tf.constant(['t']), tf.constant([1.0, 2.0], tf.float64))),
      'tables_list': util.outcome(lambda: client.insert(data, ['t'], one)),
  }


def scenario_insert_lengths_differ_at_run_time(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  with tf.Graph().as_default():
    tables = tf.compat.v1.placeholder(tf.string, [None])
    priorities = tf.compat.v1.placeholder(tf.float64, [None])
    op = reverb.TFClient(address).insert([tf.constant(1.0)], tables,
                                         priorities)
    with tf.compat.v1.Session() as session:
      outcome = _op_error(lambda: session.run(
          op, {tables: ['plain'], priorities: [1.0, 2.0]}))
  return {'outcome': outcome, 'sizes': _sizes(reverb, address)}


def scenario_update_priorities_then_sample(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  reverb.Client(address).insert([np.float32(2.5), np.int64(3)],
                                {'plain': 1.0})
  client = reverb.TFClient(address)
  key = client.sample('plain', [tf.float32, tf.int64]).info.key
  eager = client.update_priorities('plain', tf.reshape(key, [1]),
                                   tf.constant([4.0], tf.float64))
  missing = client.update_priorities('plain', tf.constant([7], tf.uint64),
                                     tf.constant([9.0], tf.float64))
  listed = client.update_priorities('plain', [7], [9.0])
  [sample] = reverb.Client(address).sample('plain', emit_timesteps=False)
  return {'returned': [eager, missing, listed],
          'same_key': sample.info.key == key.numpy(),
          'priority': sample.info.priority}


def scenario_sample_and_update_in_function(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  client = reverb.TFClient(address)

  @tf.function
  def learn():
    sample = client.sample('plain', [tf.float32, tf.int64])
    client.update_priorities('plain', tf.reshape(sample.info.key, [1]),
                             tf.reshape(sample.info.priority * 2, [1]))
    return sample.info.priority

  return [learn().numpy() for _ in range(3)]


def scenario_update_priorities_errors_eager(reverb, env):
  tf = env.tf
  client = reverb.TFClient(_server(reverb, env))
  keys = tf.constant([1, 2], tf.uint64)
  return {
      'rank_0': util.outcome(lambda: client.update_priorities(
          'plain', tf.constant(1, tf.uint64), tf.constant(1.0, tf.float64))),
      'lengths': util.outcome(lambda: client.update_priorities(
          'plain', keys, tf.constant([1.0], tf.float64))),
      'unknown_table': util.outcome(lambda: client.update_priorities(
          'nope', keys, tf.constant([1.0, 2.0], tf.float64))),
      'int64_keys': util.outcome(lambda: client.update_priorities(
          'plain', tf.constant([1], tf.int64), tf.constant([1.0],
                                                           tf.float64))),
      'float32_priorities': util.outcome(lambda: client.update_priorities(
          'plain', tf.constant([1], tf.uint64), tf.constant([1.0]))),
  }


def scenario_update_priorities_lengths_differ_in_graph(reverb, env):
  tf = env.tf
  address = _server(reverb, env)
  with tf.Graph().as_default():
    def build():
      op = reverb.TFClient(address).update_priorities(
          'plain', tf.constant([1, 2], tf.uint64),
          tf.constant([1.0], tf.float64))
      with tf.compat.v1.Session() as session:
        session.run(op)
    return _op_error(build)


def scenario_server_address_property(reverb, env):
  address = env.server([util.fifo_table(reverb, 't')])
  return reverb.TFClient(address, shared_name='shared').server_address
