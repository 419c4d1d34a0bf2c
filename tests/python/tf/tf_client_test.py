"""reverb.TFClient: its ops in eager mode, in tf.function and in v1 sessions,
their checks and errors, and how they end."""

import collections
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import reverb

TIMEOUT = 30  # Seconds; against hangs only.
_PACKAGE = pathlib.Path(reverb.__file__).parent

Step = collections.namedtuple('Step', ['observation', 'reward'])


def _table(name, **kwargs):
  options = dict(sampler=reverb.selectors.Fifo(),
                 remover=reverb.selectors.Fifo(), max_size=100,
                 rate_limiter=reverb.rate_limiters.MinSize(1))
  options.update(kwargs)
  return reverb.Table(name, **options)


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server([
      _table('plain'),
      _table('other'),
      _table('signed', signature={
          'a': tf.TensorSpec([2], tf.float32),
          'b': {'c': tf.TensorSpec([], tf.int64)}}),
      _table('prioritized', sampler=reverb.selectors.Prioritized(1.0)),
      reverb.Table.queue('queue', 10),
  ])
  yield server
  server.stop()


def address(server):
  return f'localhost:{server.port}'


def size(server, table):
  return server.localhost_client().server_info()[table].current_size


def insert_plain(server, *steps):
  client = server.localhost_client()
  for step in steps:
    client.insert(step, {'plain': 1.0})


def test_sample_eager_returns_first_timestep_and_info(server):
  client = server.localhost_client()
  with client.writer(3) as writer:
    for t in range(3):
      writer.append([np.float32(t), np.full([2], t, np.int64)])
    writer.create_item('plain', 3, 2.5)
  sample = reverb.TFClient(address(server)).sample('plain',
                                                    [tf.float32, tf.int64])
  assert [d.numpy().tolist() for d in sample.data] == [0.0, [0, 0]]
  assert sample.info.priority.numpy() == 2.5
  assert sample.info.table_size.numpy() == 1
  assert sample.info.times_sampled.numpy() == 1
  assert sample.info.key.dtype == tf.uint64
  assert sample.info.probability.dtype == tf.float64


def test_sample_data_nested_as_data_dtypes(server):
  client = reverb.TFClient(address(server))
  insert_plain(server, [np.float32(1.5), np.int64(2), np.array([b'x'])])
  # Dict keys in sorted order, as dm-tree flattens them.
  dict_sample = client.sample(
      'plain', {'b': (tf.int64, tf.string), 'a': tf.float32}).data
  assert dict_sample['a'].numpy() == 1.5
  assert dict_sample['b'][0].numpy() == 2
  assert dict_sample['b'][1].numpy().tolist() == [b'x']
  step = client.sample('plain', Step(tf.float32, [tf.int64, tf.string])).data
  assert isinstance(step, Step)
  assert step.reward[0].numpy() == 2
  server.localhost_client().insert([np.float32(3.0)], {'other': 1.0})
  bare = client.sample('other', tf.float32)
  assert isinstance(bare.data, tf.Tensor)


def test_sample_table_and_address_as_tensors(server):
  insert_plain(server, [np.float32(1.0)])
  client = reverb.TFClient(tf.constant(address(server)))
  sample = client.sample(tf.constant('plain'), [tf.float32])
  assert sample.data[0].numpy() == 1.0

  @tf.function
  def sample_from(table):
    return reverb.TFClient(address(server)).sample(table, [tf.float32])

  assert sample_from(tf.constant('plain')).data[0].numpy() == 1.0
  with pytest.raises(tf.errors.NotFoundError, match='nope'):
    sample_from(tf.constant('nope'))


def test_sample_in_session_with_placeholders(server):
  insert_plain(server, [np.float32(4.0)])
  with tf.Graph().as_default():
    server_address = tf.compat.v1.placeholder(tf.string, [])
    table = tf.compat.v1.placeholder(tf.string, [])
    sample = reverb.TFClient(server_address).sample(table, [tf.float32])
    assert sample.info.key.shape == []  # Info fields are scalars.
    with tf.compat.v1.Session() as session:
      feed = {server_address: address(server), table: 'plain'}
      for times_sampled in (1, 2):
        info, data = session.run(sample, feed)
        assert data == [4.0]
        assert info.times_sampled == times_sampled
      with pytest.raises(tf.errors.NotFoundError, match='nope'):
        session.run(sample, {server_address: address(server), table: 'nope'})


def test_sample_errors(server):
  client = reverb.TFClient(address(server))
  insert_plain(server, [np.float32(1.0), np.int64(2)])
  with pytest.raises(tf.errors.NotFoundError,
                     match='Priority table nope was not found'):
    client.sample('nope', [tf.float32])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Type mismatch: actual float vs. expect double'):
    client.sample('plain', [tf.float64, tf.int64])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='Got 7 but wanted 6'):
    client.sample('plain', [tf.float32])
  with server.localhost_client().trajectory_writer(2) as writer:
    for t in range(2):
      writer.append([np.float32(t)])
    writer.create_item('queue', 1.0, [writer.history[0][-1]])
    writer.create_item('queue', 1.0, [writer.history[0][-2:]])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='cannot be decomposed into timesteps'):
    # A squeezed column has no timesteps; the next item (two) has.
    client.sample('queue', [tf.float32])
  assert client.sample('queue', [tf.float32]).data[0].numpy() == 0.0


def test_insert_eager_function_and_session(server):
  client = reverb.TFClient(address(server))
  assert client.insert([tf.constant(1.0)], tf.constant(['queue', 'other']),
                       tf.constant([1.0, 2.0], tf.float64)) is None

  @tf.function
  def insert(value):
    client.insert([value], tf.constant(['queue']),
                  tf.constant([1.0], tf.float64))

  insert(tf.constant(2.0))
  insert(tf.constant(3.0))
  with tf.Graph().as_default():
    op = reverb.TFClient(address(server)).insert(
        [tf.constant(4.0)], tf.constant(['queue']),
        tf.constant([1.0], tf.float64))
    assert isinstance(op, tf.Operation)
    with tf.compat.v1.Session() as session:
      session.run(op)
  assert size(server, 'other') == 1
  values = [s.data[0] for s in server.localhost_client().sample(
      'queue', 4, emit_timesteps=False, timeout=TIMEOUT)]
  assert np.asarray(values).ravel().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_insert_checks_signature_and_inserts_nothing_on_mismatch(server):
  client = reverb.TFClient(address(server))
  good = [tf.constant([1.0, 2.0]), tf.constant(3, tf.int64)]
  client.insert(good, tf.constant(['signed']), tf.constant([1.0], tf.float64))
  assert size(server, 'signed') == 1
  tables = tf.constant(['plain', 'signed'])
  priorities = tf.constant([1.0, 1.0], tf.float64)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="flattened index 1, saw a tensor of dtype int32"):
    client.insert([good[0], tf.constant(3)], tables, priorities)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='called with 1 tensors, but table requires 2'):
    client.insert(good[:1], tables, priorities)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="expected tensor 'a' of dtype float and shape "
                     r'compatible with \[2\]'):
    client.insert([tf.constant([1.0, 2.0, 3.0]), good[1]], tables,
                  priorities)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="Unable to find signatures for table 'nope'"):
    client.insert(good, tf.constant(['plain', 'nope']), priorities)
  with pytest.raises(tf.errors.InvalidArgumentError, match='must not be nan'):
    client.insert(good, tables, tf.constant([1.0, np.nan], tf.float64))
  # The table listed first got nothing either.
  assert size(server, 'plain') == 0
  assert size(server, 'signed') == 1


def test_insert_argument_errors_at_graph_construction(server):
  client = reverb.TFClient(address(server))
  data = [tf.constant(1.0)]
  one = tf.constant([1.0], tf.float64)
  with pytest.raises(ValueError, match='tables must be a string tensor'):
    client.insert(data, tf.constant('plain'), one)
  with pytest.raises(ValueError, match='priorities must be a float64'):
    client.insert(data, tf.constant(['plain']), tf.constant([1.0]))
  with pytest.raises(ValueError, match='same shape'):
    client.insert(data, tf.constant(['plain']),
                  tf.constant([1.0, 2.0], tf.float64))
  with tf.Graph().as_default():
    tables = tf.compat.v1.placeholder(tf.string, [None])
    priorities = tf.compat.v1.placeholder(tf.float64, [None])
    op = reverb.TFClient(address(server)).insert([tf.constant(1.0)], tables,
                                                 priorities)
    with tf.compat.v1.Session() as session:
      with pytest.raises(tf.errors.InvalidArgumentError,
                         match='do not match in shape'):
        session.run(op, {tables: ['plain'], priorities: [1.0, 2.0]})
  assert size(server, 'plain') == 0


def test_update_priorities_shape_errors(server):
  client = reverb.TFClient(address(server))
  keys = tf.constant([1, 2], tf.uint64)
  one = tf.constant([1.0], tf.float64)

  @tf.function
  def update(keys, priorities):
    client.update_priorities('prioritized', keys, priorities)

  # When the graph is built...
  with pytest.raises(ValueError, match='do not match in shape'):
    update(keys, one)
  with pytest.raises(ValueError, match='must be rank 1'):
    update(tf.constant(1, tf.uint64), tf.constant(1.0, tf.float64))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='do not match in shape'):
      reverb.TFClient(address(server)).update_priorities(
          'prioritized', tf.constant([1, 2], tf.uint64),
          tf.constant([1.0], tf.float64))
  # ... and in eager mode, as dm-reverb.
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'do not match in shape \(\[2\] vs. \[1\]\)'):
    client.update_priorities('prioritized', keys, one)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='must be of rank 1'):
    client.update_priorities('prioritized', tf.constant(1, tf.uint64),
                             tf.constant(1.0, tf.float64))
  with pytest.raises(tf.errors.NotFoundError,
                     match='Priority table nope was not found'):
    client.update_priorities('nope', keys, tf.constant([1.0, 2.0], tf.float64))


def test_update_priorities_changes_what_the_server_samples(server):
  insert_plain(server, [np.float32(0.0)], [np.float32(1.0)])
  client = reverb.TFClient(address(server))
  key = client.sample('plain', [tf.float32]).info.key  # The oldest (Fifo).

  @tf.function
  def update(keys, priorities):
    client.update_priorities(tf.constant('plain'), keys, priorities)

  update(tf.reshape(key, [1]), tf.constant([5.0], tf.float64))
  # Keys of items not in the table are ignored.
  client.update_priorities('plain', tf.constant([12345], tf.uint64),
                           tf.constant([9.0], tf.float64))
  [sample] = server.localhost_client().sample('plain', emit_timesteps=False,
                                              timeout=TIMEOUT)
  assert sample.info.key == key.numpy()
  assert sample.info.priority == 5.0


def test_sample_then_update_in_one_function(server):
  server.localhost_client().insert([np.float32(2.0)], {'prioritized': 1.0})
  client = reverb.TFClient(address(server))

  @tf.function
  def learn():
    sample = client.sample('prioritized', [tf.float32])
    client.update_priorities('prioritized', tf.reshape(sample.info.key, [1]),
                             tf.reshape(sample.info.priority * 3, [1]))
    return sample.info.priority

  assert learn().numpy() == 1.0
  assert learn().numpy() == 3.0
  assert learn().numpy() == 9.0


def test_graphs_hold_no_python_callback(server):
  client = reverb.TFClient(address(server))

  @tf.function
  def step(value):
    client.insert([value], tf.constant(['plain']),
                  tf.constant([1.0], tf.float64))
    sample = client.sample('plain', [tf.float32])
    client.update_priorities('plain', tf.reshape(sample.info.key, [1]),
                             tf.constant([2.0], tf.float64))
    return sample.data[0]

  graph = step.get_concrete_function(tf.TensorSpec([], tf.float32)).graph
  op_types = {op.type for op in graph.get_operations()}
  assert {'ReverbClientInsert', 'ReverbClientSample',
          'ReverbClientUpdatePriorities'} <= op_types
  assert not op_types & {'PyFunc', 'EagerPyFunc', 'PyFuncStateless'}
  assert step(tf.constant(7.0)).numpy() == 7.0


def test_variable_container_pattern(server):
  """TF-Agents' ReverbVariableContainer: policy variables pushed as one item
  of a max_size=1 table whose signature is their nest, and pulled with
  nested dtypes into the variables of another policy."""
  def make_variables(value):
    return {'policy': (tf.Variable(tf.fill([2, 3], value)),
                       tf.Variable(value * 10, dtype=tf.float64)),
            'step': tf.Variable(int(value), dtype=tf.int64)}

  learner = make_variables(1.0)
  actor = make_variables(0.0)
  signature = tf.nest.map_structure(
      lambda v: tf.TensorSpec(v.shape, v.dtype), learner)
  variables_server = reverb.Server([reverb.Table(
      'variables', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 1,
      reverb.rate_limiters.MinSize(1), signature=signature)])
  client = reverb.TFClient(address(variables_server))
  dtypes = tf.nest.map_structure(lambda v: v.dtype, actor)

  @tf.function
  def push(values):
    tables = tf.constant(['variables'])
    client.insert(tf.nest.flatten(values), tables,
                  tf.ones_like(tables, dtype=tf.float64))

  @tf.function
  def pull(values):
    sampled = client.sample('variables', dtypes).data
    tf.nest.map_structure(lambda v, s: v.assign(s), values, sampled)

  try:
    push(learner)
    pull(actor)
    assert actor['policy'][0].numpy().tolist() == [[1.0] * 3] * 2
    assert actor['policy'][1].numpy() == 10.0
    assert actor['step'].numpy() == 1
    for v in tf.nest.flatten(learner):
      v.assign(v * 2)
    push(learner)  # Replaces the item (max_size=1).
    pull(actor)
    assert actor['policy'][1].numpy() == 20.0
    assert actor['step'].numpy() == 2
    # Variables that do not fit the signature are rejected.
    wrong = {'policy': (tf.Variable(tf.zeros([3, 2])),
                        tf.Variable(0.0, dtype=tf.float64)),
             'step': tf.Variable(0, dtype=tf.int64)}
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match='inconsistent with the table signature'):
      push(wrong)
    pull(actor)
    assert actor['step'].numpy() == 2
  finally:
    variables_server.stop()


def test_ops_reconnect_after_the_server_restarts():
  """The kernels' idle streams break when the server stops; the next calls
  reconnect to the new server on the same port."""
  server = reverb.Server([reverb.Table.queue('queue', 10)])
  port = server.port
  client = reverb.TFClient(f'localhost:{port}')
  insert = lambda value: client.insert(  # pylint: disable=g-long-lambda
      [tf.constant(value)], tf.constant(['queue']),
      tf.constant([1.0], tf.float64))
  insert(1.0)
  assert client.sample('queue', [tf.float32]).data[0].numpy() == 1.0
  server.stop()
  server = reverb.Server([reverb.Table.queue('queue', 10)], port=port)
  try:
    insert(2.0)
    assert client.sample('queue', [tf.float32]).data[0].numpy() == 2.0
  finally:
    server.stop()


def test_unreachable_server_times_out():
  """A server that cannot be reached in 10 s: UnavailableError, as every
  call without a timeout of its own."""
  client = reverb.TFClient('localhost:1')
  with pytest.raises(tf.errors.UnavailableError):
    client.update_priorities('t', tf.constant([1], tf.uint64),
                             tf.constant([1.0], tf.float64))


def _run_python(code, python=sys.executable, timeout=120, **kwargs):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  for name in ('PYTHONPATH', 'PYTHONHOME'):
    env.pop(name, None)
  return subprocess.run([str(python), '-I', '-c', textwrap.dedent(code)],
                        env=env, capture_output=True, text=True,
                        timeout=timeout, **kwargs)


def test_saved_model_samples_in_fresh_process(server, tmp_path):
  insert_plain(server, [np.float32(6.0), np.int64(7)])

  class Sampler(tf.Module):

    @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
    def sample(self, server_address):
      sample = reverb.TFClient(server_address).sample(
          'plain', {'x': tf.float32, 'y': tf.int64})
      return sample.data

  tf.saved_model.save(Sampler(), str(tmp_path))
  result = _run_python(f"""
      import tensorflow as tf
      import reverb
      model = tf.saved_model.load({str(tmp_path)!r})
      data = model.sample(tf.constant({address(server)!r}))
      print('DATA', data['x'].numpy(), data['y'].numpy())
      """)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split()[-3:] == ['DATA', '6.0', '7']


_BLOCKED = """
    import os, signal, threading, time
    import tensorflow as tf
    import reverb
    server = reverb.Server([reverb.Table.queue('empty', 10)])
    address = f'localhost:{server.port}'
    outcome = []

    def run(fn):
      try:
        fn()
        outcome.append('returned')
      except tf.errors.CancelledError as e:
        outcome.append('exiting' if 'the process is exiting' in e.message
                       else 'interrupted' if 'by an interrupt' in e.message
                       else e.message)
      print('THREAD', outcome[-1], flush=True)
    """


@pytest.mark.parametrize('mode', ['eager', 'function', 'session', 'insert'])
def test_thread_waiting_in_op_does_not_keep_process_alive(mode):
  """The interpreter's exit ends the waits: a non-daemon thread blocked in a
  sample (or in an insert the rate limiter holds back) ends with
  CancelledError."""
  calls = {
      'eager': "client.sample('empty', [tf.float32])",
      'function': "tf.function(lambda: client.sample('empty', "
                  "[tf.float32]))()",
      'session': 'session.run(graph_sample)',
      'insert': 'insert_many()',
  }
  result = _run_python(_BLOCKED + f"""
    client = reverb.TFClient(address)
    with tf.Graph().as_default() as graph:
      graph_sample = reverb.TFClient(address).sample('empty', [tf.float32])
    session = tf.compat.v1.Session(graph=graph)
    full = reverb.Server([reverb.Table(
        'full', reverb.selectors.Fifo(), reverb.selectors.Fifo(), 100,
        reverb.rate_limiters.SampleToInsertRatio(1.0, 1, 1.0))])
    full_client = reverb.TFClient(f'localhost:{{full.port}}')

    def insert_many():
      for _ in range(10):
        full_client.insert([tf.constant(1.0)], tf.constant(['full']),
                           tf.constant([1.0], tf.float64))

    threading.Thread(target=run, args=(lambda: {calls[mode]},)).start()
    time.sleep(2)
    print('MAIN done', flush=True)
    """, timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'MAIN done' in result.stdout
  assert 'THREAD exiting' in result.stdout.splitlines(), result.stdout


@pytest.mark.parametrize('mode', ['eager', 'session'])
def test_interrupt_ends_wait_in_main_thread(mode):
  """Ctrl-C while the main thread waits in an op: the op fails with
  CancelledError, Python raises KeyboardInterrupt, later ops work."""
  calls = {
      'eager': "client.sample('empty', [tf.float32])",
      'session': 'session.run(graph_sample)',
  }
  result = _run_python(_BLOCKED + f"""
    client = reverb.TFClient(address)
    with tf.Graph().as_default() as graph:
      graph_sample = reverb.TFClient(address).sample('empty', [tf.float32])
    session = tf.compat.v1.Session(graph=graph)
    threading.Timer(2, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
      run(lambda: {calls[mode]})
      time.sleep(5)  # KeyboardInterrupt comes a moment after the error.
    except KeyboardInterrupt:
      print('KEYBOARD INTERRUPT', flush=True)
    client.insert([tf.constant(1.0)], tf.constant(['empty']),
                  tf.constant([1.0], tf.float64))
    client.insert([tf.constant(2.0)], tf.constant(['empty']),
                  tf.constant([1.0], tf.float64))
    print('AFTER', client.sample('empty', [tf.float32]).data[0].numpy() > 0,
          flush=True)
    """, timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = result.stdout.splitlines()
  assert 'THREAD interrupted' in lines, lines
  assert 'KEYBOARD INTERRUPT' in lines
  assert 'AFTER True' in lines


def test_ops_run_under_another_tensorflow(server, tmp_path,
                                          other_tensorflow_python):
  """The library built against this TensorFlow runs the ops under 2.14."""
  insert_plain(server, [np.float32(1.5)])
  # That venv has dm-reverb's own `reverb`: put ours first on the path.
  (tmp_path / 'reverb').symlink_to(_PACKAGE, target_is_directory=True)
  result = _run_python(f"""
      import sys
      sys.path.insert(0, {str(tmp_path)!r})
      import reverb
      import tensorflow as tf
      assert reverb.__file__.startswith({str(tmp_path)!r}), reverb.__file__
      client = reverb.TFClient({address(server)!r})
      client.insert([tf.constant(2.5)], tf.constant(['plain']),
                    tf.constant([1.0], tf.float64))
      sample = tf.function(lambda: client.sample('plain', [tf.float32]))()
      print('OK', tf.__version__, sample.data[0].numpy())
      """, python=other_tensorflow_python)
  assert result.returncode == 0, result.stderr[-3000:]
  version, value = result.stdout.split()[-2:]
  assert version != tf.__version__
  assert value == '1.5'
  assert size(server, 'plain') == 2
