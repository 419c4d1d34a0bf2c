"""Datasets in graphs: TF1-style sessions, tensor arguments, cancellation,
SavedModels loaded in a fresh process, and devices configured after a
dataset was made.

Programs that need a TensorFlow runtime of their own (eager execution
disabled, devices configured, a fresh process loading a SavedModel) run as
subprocesses that print one JSON line.
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import reverb

# Bounds against hangs only (seconds); no test measures time.
TIMEOUT = 60
_PROCESS_TIMEOUT = 180

# Starts a server whose tables the child programs sample: 'nested' has a
# nested signature and 3 items, 'empty' nothing.
_SERVER_PRELUDE = '''
import json, threading, time
import numpy as np
import tensorflow as tf
import reverb

def make_server():
  signature = {'a': tf.TensorSpec([2], tf.float32),
               'b': (tf.TensorSpec([], tf.int64),)}
  server = reverb.Server([
      reverb.Table('nested', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   100, reverb.rate_limiters.MinSize(1), signature=signature),
      reverb.Table('empty', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 100,
                   reverb.rate_limiters.MinSize(1)),
  ])
  with server.localhost_client().trajectory_writer(1) as writer:
    for i in range(3):
      writer.append({'a': np.full([2], i, np.float32), 'b': (np.int64(i),)})
      writer.create_item('nested', 1.0, {'a': writer.history['a'][-1],
                                         'b': (writer.history['b'][0][-1],)})
  return server
'''


def _run_child(program: str) -> dict:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  proc = subprocess.run(
      [sys.executable, '-c', _SERVER_PRELUDE + textwrap.dedent(program)],
      capture_output=True, text=True, timeout=_PROCESS_TIMEOUT, env=env,
      check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith('{')]
  assert proc.returncode == 0 and lines, (
      f'exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-5000:]}')
  return json.loads(lines[-1])


def test_v1_graph_iterators_batches_and_sessions():
  result = _run_child('''
    tf.compat.v1.disable_eager_execution()
    server = make_server()
    address = f'localhost:{server.port}'
    out = {}
    dataset = reverb.TrajectoryDataset.from_table_signature(
        address, 'nested', max_in_flight_samples_per_worker=2)
    out['v1'] = isinstance(dataset, tf.compat.v1.data.Dataset)
    batch = dataset.batch(2).make_one_shot_iterator().get_next()
    with tf.compat.v1.Session() as session:
      sample = session.run(batch)
    out['batch'] = [list(sample.data['a'].shape),
                    list(sample.data['b'][0].shape),
                    sample.data['b'][0].tolist()]

    # Placeholders for the address and the table, fed to the initializer.
    address_ph = tf.compat.v1.placeholder(tf.string, [])
    table_ph = tf.compat.v1.placeholder(tf.string, [])
    iterator = reverb.TrajectoryDataset(
        address_ph, table_ph, {'a': tf.float32, 'b': (tf.int64,)},
        {'a': tf.TensorShape(None), 'b': (tf.TensorShape([]),)},
        max_in_flight_samples_per_worker=1,
        max_samples=3).make_initializable_iterator()
    step = iterator.get_next()
    values = []
    with tf.compat.v1.Session() as session:
      session.run(iterator.initializer,
                  {address_ph: address, table_ph: 'nested'})
      try:
        while True:
          values.append(int(session.run(step).data['b'][0]))
      except tf.errors.OutOfRangeError:
        pass
    out['unknown_rank'] = values

    # The rate limiter's timeout ends the iterator.
    timed_out = reverb.TrajectoryDataset(
        address, 'empty', tf.float32, tf.TensorShape([]),
        max_in_flight_samples_per_worker=1,
        rate_limiter_timeout_ms=100).make_one_shot_iterator().get_next()
    with tf.compat.v1.Session() as session:
      try:
        session.run(timed_out)
        out['timeout'] = 'returned'
      except tf.errors.OutOfRangeError:
        out['timeout'] = 'OutOfRangeError'

    # Closing a session ends a run that waits on the rate limiter.
    waiting = reverb.TrajectoryDataset(
        address, 'empty', tf.float32, tf.TensorShape([]),
        max_in_flight_samples_per_worker=1).make_one_shot_iterator().get_next()
    session = tf.compat.v1.Session()
    ended = []
    def run():
      try:
        session.run(waiting)
        ended.append('returned')
      except tf.errors.OpError as e:
        ended.append(type(e).__name__)
    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.5)
    session.close()
    thread.join(60)
    out['closed'] = ended
    print(json.dumps(out))
  ''')
  assert result['v1']
  assert result['batch'] == [[2, 2], [2], [0, 0]]
  assert result['unknown_rank'] == [0, 0, 0]  # Fifo: the oldest, 3 times.
  assert result['timeout'] == 'OutOfRangeError'
  assert result['closed'] == ['CancelledError']


def test_devices_can_be_configured_after_a_dataset_is_made():
  result = _run_child('''
    server = make_server()
    address = f'localhost:{server.port}'
    dataset = reverb.TrajectoryDataset.from_table_signature(
        address, 'nested', max_in_flight_samples_per_worker=2).batch(
            2, drop_remainder=True)
    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    per_replica = strategy.run(lambda s: tf.shape(s.data['a'])[0],
                               args=(next(iterator),))
    print(json.dumps({
        'devices': len(tf.config.list_logical_devices('CPU')),
        'rows': [int(t) for t in strategy.experimental_local_results(
            per_replica)]}))
  ''')
  assert result == {'devices': 2, 'rows': [1, 1]}


def test_a_saved_model_samples_in_a_fresh_process(tmp_path):
  server = reverb.Server([reverb.Table.queue(
      'queue', 100, signature=tf.TensorSpec([2], tf.float32))])
  address = f'localhost:{server.port}'
  try:
    client = server.localhost_client()
    for i in range(4):
      client.insert(np.full([2], i, np.float32), {'queue': 1.0})

    class Sampler(tf.Module):

      @tf.function(input_signature=[tf.TensorSpec([], tf.string)])
      def sample(self, server_address):
        dataset = reverb.TimestepDataset(
            server_address, 'queue', tf.float32, tf.TensorShape([2]),
            max_in_flight_samples_per_worker=1, max_samples=2)
        return dataset.batch(2).get_single_element().data

    path = str(tmp_path / 'model')
    tf.saved_model.save(Sampler(), path)
    program = textwrap.dedent(f'''
        import json
        import tensorflow as tf
        import reverb
        model = tf.saved_model.load({path!r})
        data = model.sample(tf.constant({address!r}))
        print(json.dumps(sorted(data.numpy()[:, 0].tolist())))
    ''')
    proc = subprocess.run([sys.executable, '-c', program],
                          capture_output=True, text=True,
                          timeout=_PROCESS_TIMEOUT, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [0.0, 1.0]
  finally:
    server.stop()


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server([
      reverb.Table('one', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   100, reverb.rate_limiters.MinSize(1)),
      reverb.Table.queue('queue', 10),
  ])
  server.localhost_client().insert(np.float32(7), {'one': 1.0})
  yield server
  server.stop()


def test_address_and_table_may_be_tensors(server):
  address = tf.constant(f'localhost:{server.port}')
  dataset = reverb.TimestepDataset(address, tf.constant('one'), tf.float32,
                                   tf.TensorShape([]),
                                     max_in_flight_samples_per_worker=1,
                                     max_samples=1)
  assert [float(s.data) for s in dataset] == [7.0]

  @tf.function
  def first(server_address, table):
    dataset = reverb.TimestepDataset(server_address, table, tf.float32,
                                     tf.TensorShape([]),
                                       max_in_flight_samples_per_worker=1,
                                       max_samples=1)
    return dataset.get_single_element().data

  assert float(first(address, tf.constant('one'))) == 7.0


def test_deleting_a_prefetching_iterator_closes_its_streams(server):
  client = server.localhost_client()
  client.insert(np.float32(1), {'queue': 1.0})
  dataset = reverb.TrajectoryDataset(
      f'localhost:{server.port}', 'queue', tf.float32, tf.TensorShape([1]),
      max_in_flight_samples_per_worker=1).prefetch(2)
  iterator = iter(dataset)
  assert next(iterator).data.numpy().tolist() == [1.0]
  time.sleep(0.5)  # Its prefetch thread waits on the empty queue.
  deleted = threading.Event()

  def delete():
    nonlocal iterator
    del iterator
    deleted.set()

  threading.Thread(target=delete, daemon=True).start()
  assert deleted.wait(TIMEOUT)
  # Nothing of it is left to take (and lose) what comes next: neither its
  # stream nor the request the stream left at the table.
  client.insert(np.float32(2), {'queue': 1.0})
  time.sleep(0.5)
  assert client.server_info()['queue'].current_size == 1


def test_a_server_that_stops_ends_a_waiting_iterator():
  server = reverb.Server([reverb.Table.queue('queue', 10)])
  iterator = iter(reverb.TrajectoryDataset(
      f'localhost:{server.port}', 'queue', tf.float32, tf.TensorShape([]),
      max_in_flight_samples_per_worker=1))

  @tf.function
  def step():
    return next(iterator)

  ended = []

  def run():
    try:
      step()
      ended.append('returned')
    except tf.errors.OpError as e:
      ended.append(type(e).__name__)

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  time.sleep(0.5)  # The step waits on the empty queue.
  server.stop()
  thread.join(TIMEOUT)
  # The server's CANCELLED ends it (a retry would end in UNAVAILABLE, after
  # the reconnect window).
  assert ended == ['CancelledError']


@pytest.mark.parametrize('drop_remainder', [False, True])
def test_batches_that_wait_come_out_whole(server, drop_remainder):
  # Items of one step: the op itself stacks the batch.
  dataset = reverb.TrajectoryDataset(
      f'localhost:{server.port}', 'queue', tf.float32, tf.TensorShape([1]),
      max_in_flight_samples_per_worker=2).batch(2, drop_remainder)
  client = server.localhost_client()

  def insert_later():
    time.sleep(0.5)  # Several of the op's waits pass with nothing.
    for value in (1, 2):
      client.insert(np.float32(value), {'queue': 1.0})

  threading.Thread(target=insert_later, daemon=True).start()
  batch = next(iter(dataset))
  assert sorted(batch.data.numpy()[:, 0].tolist()) == [1.0, 2.0]
