"""TrajectoryWriter through a real server: the ways Acme's adders use it."""

import time

import numpy as np
import pytest

import reverb
from reverb import specs

TIMEOUT = 30
TIMEOUT_MS = TIMEOUT * 1000


@pytest.fixture(name='server')
def server_fixture():
  server = reverb.Server(tables=[
      reverb.Table.queue('queue', 1000),
      reverb.Table.queue('tiny', 1),
      reverb.Table.queue(
          'signed', 10,
          signature={'obs': specs.TensorSpec([None, 2], np.float32)}),
  ])
  yield server
  server.stop()


@pytest.fixture(name='client')
def client_fixture(server):
  return server.localhost_client()


def obs(t):
  return np.full([2], t, np.float32)


def drain(client, table='queue', n=None):
  if n is None:
    n = client.server_info()[table].current_size
  if not n:
    return []
  return [s.data for s in client.sample(table, num_samples=n,
                                        emit_timesteps=False, timeout=TIMEOUT)]


def test_one_step_transitions(client):
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for t in range(4):
      writer.append({'obs': obs(t), 'action': np.int32(t)})
      if t:
        writer.create_item('queue', 1.0, {
            'obs': writer.history['obs'][-2],
            'next_obs': writer.history['obs'][-1],
            'action': writer.history['action'][-2],
        })
  items = drain(client)
  assert len(items) == 3
  for t, (action, next_obs, o) in enumerate(items):  # Sorted keys.
    assert action.dtype == np.int32 and action.shape == ()
    assert action == t
    np.testing.assert_array_equal(o, obs(t))
    np.testing.assert_array_equal(next_obs, obs(t + 1))


def test_n_step_and_overlapping_sequences(client):
  n = 3
  with client.trajectory_writer(num_keep_alive_refs=4) as writer:
    for t in range(10):
      writer.append({'obs': obs(t), 'reward': np.float64(t)})
      if t >= n - 1:
        writer.create_item('queue', 1.0, {
            'rewards': writer.history['reward'][-n:],
            'first': writer.history['obs'][-n],
        })
      if t >= 3 and t % 2 == 1:  # Sequences of 4, period 2.
        writer.create_item('queue', 2.0, writer.history['obs'][-4:])
  items = drain(client)
  n_step = [i for i in items if isinstance(i, list) and len(i) == 2]
  sequences = [i[0] for i in items if len(i) == 1]
  assert len(n_step) == 8 and len(sequences) == 4
  for t, (first, rewards) in enumerate(n_step):
    np.testing.assert_array_equal(first, obs(t))
    np.testing.assert_array_equal(rewards, np.arange(t, t + n))
  for k, sequence in enumerate(sequences):
    start = 2 * k
    np.testing.assert_array_equal(
        sequence, np.stack([obs(t) for t in range(start, start + 4)]))


def test_whole_episodes_and_episode_steps(client):
  writer = client.trajectory_writer(num_keep_alive_refs=6)
  for episode in range(3):
    for t in range(4 + episode):
      writer.append({'obs': obs(10 * episode + t)})
    assert writer.episode_steps == 4 + episode
    writer.create_item('queue', 1.0, writer.history['obs'][:])
    writer.end_episode(timeout_ms=TIMEOUT_MS)
    assert writer.episode_steps == 0
    assert not writer.history['obs']  # Cleared: no steps.
    with pytest.raises(ValueError, match='None'):  # As dm-reverb.
      writer.history['obs'][-1]  # pylint: disable=pointless-statement
  writer.close()
  items = drain(client)
  for episode, (column,) in enumerate(items):
    np.testing.assert_array_equal(
        column, np.stack([obs(10 * episode + t) for t in range(4 + episode)]))
  assert client.server_info()['queue'].num_episodes == 0  # Drained.


def test_partial_steps_fill_one_step(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'obs': obs(0)}, partial_step=True)
  with pytest.raises(ValueError, match='already been set'):
    writer.append({'obs': obs(1)}, partial_step=True)
  writer.append({'action': np.int64(7)})
  assert writer.episode_steps == 1
  writer.create_item('queue', 1.0, {
      'obs': writer.history['obs'][-1],
      'action': writer.history['action'][-1],
  })
  writer.flush(timeout_ms=TIMEOUT_MS)
  [(action, o)] = drain(client)
  assert action == 7
  np.testing.assert_array_equal(o, obs(0))
  writer.close()


def test_history_expiry_padding_and_errors(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'a': np.int32(0)})
  writer.append({'a': np.int32(1), 'b': np.int32(10)})  # 'b' appears later.
  writer.append({'a': np.int32(2), 'b': np.int32(11)})
  assert len(writer.history['b']) == 3
  with pytest.raises(ValueError, match='None'):
    writer.history['a'][0]  # pylint: disable=pointless-statement  # Expired.
  with pytest.raises(ValueError, match='None'):
    writer.history['a'][-3:]  # pylint: disable=pointless-statement
  with pytest.raises(IndexError):
    writer.history['a'][5]  # pylint: disable=pointless-statement
  with pytest.raises(TypeError):
    writer.history['a']['x']  # pylint: disable=pointless-statement
  column = writer.history['b'][-2:]
  assert column.shape == (2,) and column.dtype == np.int32
  np.testing.assert_array_equal(column.numpy(), [10, 11])
  assert writer.history['b'][-1].numpy() == 11
  assert writer.history['b'][[1, 2]].shape == (2,)
  with pytest.raises(TypeError):
    writer.create_item('queue', 1.0, {'a': np.int32(1)})
  with pytest.raises(RuntimeError):
    client.trajectory_writer(1).history  # pylint: disable=expression-not-assigned
  writer.close()


def test_dtype_and_shape_errors_name_the_field(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'x': {'obs': obs(0)}})
  with pytest.raises(ValueError, match="dtype.*'x', 'obs'"):
    writer.append({'x': {'obs': np.zeros([2], np.float64)}})
  with pytest.raises(ValueError, match="shape.*'x', 'obs'"):
    writer.append({'x': {'obs': np.zeros([3], np.float32)}})
  writer.append({'x': {'obs': obs(1)}})  # Still usable.
  assert writer.episode_steps == 2
  writer.close()


def test_items_are_validated_against_signatures(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  for t in range(3):
    writer.append({'obs': obs(t), 'bad': np.zeros([2], np.float64)})
  writer.create_item('signed', 1.0, {'obs': writer.history['obs'][-2:]})
  with pytest.raises(ValueError, match='signature'):
    writer.create_item('signed', 1.0, {'obs': writer.history['bad'][-2:]})
  with pytest.raises(ValueError, match='signature'):
    writer.create_item('signed', 1.0, {'obs': writer.history['obs'][-1]})
  with pytest.raises(ValueError, match="'nope'"):
    writer.create_item('nope', 1.0, writer.history['obs'][-1])
  writer.flush(timeout_ms=TIMEOUT_MS)
  unchecked = client.trajectory_writer(num_keep_alive_refs=1,
                                       validate_items=False)
  unchecked.append(obs(0))
  unchecked.create_item('nope', 1.0, unchecked.history[-1])
  with pytest.raises(RuntimeError, match='nope was not found'):
    unchecked.flush(timeout_ms=TIMEOUT_MS)
  writer.close()
  unchecked.close()


def test_flush_timeout_then_writer_stays_usable(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for t in range(2):
    writer.append(obs(t))
    writer.create_item('tiny', 1.0, writer.history[-1])
  with pytest.raises(reverb.DeadlineExceededError):
    writer.flush(timeout_ms=200)
  writer.flush(block_until_num_items=1, timeout_ms=TIMEOUT_MS)
  assert [int(d[0][0]) for d in drain(client, 'tiny', 1)] == [0]
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert [int(d[0][0]) for d in drain(client, 'tiny', 1)] == [1]
  with pytest.raises(reverb.DeadlineExceededError):
    writer.append(obs(2))
    writer.create_item('tiny', 1.0, writer.history[-1])
    writer.append(obs(3))
    writer.create_item('tiny', 1.0, writer.history[-1])
    writer.end_episode(timeout_ms=200)
  with pytest.raises(ValueError):
    writer.flush(block_until_num_items=-1)
  writer.close()


def test_append_batch_equals_steps(client):
  writer = client.trajectory_writer(num_keep_alive_refs=5)
  frames = np.arange(5 * 3, dtype=np.uint8).reshape(5, 3)
  writer.append_batch({'f': frames, 't': np.arange(5)})
  assert writer.episode_steps == 5
  writer.create_item('queue', 1.0, writer.history['f'][:])
  writer.flush(timeout_ms=TIMEOUT_MS)
  [(column,)] = drain(client)
  np.testing.assert_array_equal(column, frames)
  with pytest.raises(ValueError, match='leading dimension'):
    writer.append_batch({'f': frames, 't': np.arange(4)})
  # Steps appended one by one and in batches share one history.
  writer.append({'f': frames[0], 't': np.int64(5)})
  writer.append_batch({'f': frames[:2], 't': np.arange(6, 8)})
  assert writer.episode_steps == 8
  np.testing.assert_array_equal(writer.history['t'][-3:].numpy(), [5, 6, 7])
  writer.append({'f': frames[0]}, partial_step=True)
  with pytest.raises(ValueError, match='partial'):
    writer.append_batch({'f': frames[:2], 't': np.arange(2)})
  writer.close()


@pytest.mark.parametrize('max_chunk_length', [1, 3])
def test_arrays_changed_after_append_do_not_change_the_data(
    client, max_chunk_length):
  # Steps are compressed from the caller's arrays or copied to a buffer,
  # both during the call: reusing the arrays afterwards is safe.
  writer = client.trajectory_writer(num_keep_alive_refs=6)
  writer.configure(('obs',), num_keep_alive_refs=6,
                   max_chunk_length=max_chunk_length)
  step = np.zeros([2], np.float32)
  batch = np.zeros([3, 2], np.float32)
  for t in range(3):
    step[:] = obs(t)
    writer.append({'obs': step})
  batch[:] = np.stack([obs(t) for t in range(3, 6)])
  writer.append_batch({'obs': batch})
  step[:] = -1
  batch[:] = -1
  writer.create_item('queue', 1.0, writer.history['obs'][:])
  writer.flush(timeout_ms=TIMEOUT_MS)
  [(column,)] = drain(client)
  np.testing.assert_array_equal(column, np.stack([obs(t) for t in range(6)]))
  writer.close()


def test_configure_chunking(client):
  writer = client.trajectory_writer(num_keep_alive_refs=4)
  with pytest.raises(ValueError):
    writer.configure(('obs',), num_keep_alive_refs=0, max_chunk_length=None)
  with pytest.raises(ValueError):
    writer.configure(('obs',), num_keep_alive_refs=2, max_chunk_length=3)
  writer.configure(('obs',), num_keep_alive_refs=8, max_chunk_length=4)
  for t in range(8):
    writer.append({'obs': obs(t)})
  writer.create_item('queue', 1.0, writer.history['obs'][-8:])
  writer.flush(timeout_ms=TIMEOUT_MS)
  [(column,)] = drain(client)
  np.testing.assert_array_equal(column, np.stack([obs(t) for t in range(8)]))
  writer.close()


def test_memory_stays_bounded_over_a_long_episode(client):
  writer = client.trajectory_writer(num_keep_alive_refs=4)
  for t in range(3000):
    writer.append({'obs': obs(t)})
    if t >= 3:
      writer.create_item('queue', 1.0, writer.history['obs'][-4:])
    if t % 500 == 0:
      # Every item stored first: a drain takes what the table holds then,
      # and items still in flight would pile up past the queue's 1000
      # (where inserts wait for room: the last flush timed out so in CI).
      writer.flush(timeout_ms=TIMEOUT_MS)
      drain(client)
      # Chunks the stream keeps on the server: only those recent items use.
      assert writer._writer.num_streamed_chunks <= 8  # pylint: disable=protected-access
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert writer._writer.num_pending_items == 0  # pylint: disable=protected-access
  writer.close()


def test_server_restart_resends_unconfirmed_items():
  def start(port=None):
    return reverb.Server([reverb.Table.queue('queue', 1000)], port=port)

  server = start()
  port = server.port
  client = reverb.Client(f'localhost:{port}')
  writer = client.trajectory_writer(num_keep_alive_refs=4,
                                    validate_items=False)
  for t in range(10):
    writer.append(obs(t))
    writer.create_item('queue', 1.0, writer.history[-1])
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert server.localhost_client().server_info()['queue'].current_size == 10
  server.stop()
  del server
  server = start(port)
  try:
    for t in range(10, 20):
      writer.append(obs(t))
      # Spans steps streamed to the old server and new ones.
      writer.create_item('queue', 1.0, writer.history[-3:])
    writer.flush(timeout_ms=TIMEOUT_MS)
    items = drain(server.localhost_client())
    assert len(items) == 10
    for k, (column,) in enumerate(items):
      t = 10 + k
      np.testing.assert_array_equal(column,
                                    np.stack([obs(s) for s in (t - 2, t - 1, t)]))
  finally:
    writer.close()
    server.stop()


def test_flush_and_end_episode_raise_when_the_server_is_gone(server, client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  writer.append(obs(0))
  writer.create_item('queue', 1.0, writer.history[-1])
  writer.flush(timeout_ms=TIMEOUT_MS)
  server.stop()
  writer.append(obs(1))
  writer.create_item('queue', 1.0, writer.history[-1])
  start = time.monotonic()
  with pytest.raises(RuntimeError):
    writer.flush()  # No timeout: still must not hang.
  with pytest.raises(RuntimeError):
    writer.end_episode()
  assert time.monotonic() - start < TIMEOUT
  writer.close()


class FakeCellRef:
  """What the internal writer's Append returns: a cell reference."""

  def __init__(self, value):
    self.value = value
    self.expired = False
    self.shape = list(np.shape(value))
    self.dtype = np.asarray(value).dtype

  def numpy(self):
    return np.asarray(self.value)


class FakeInternalWriter:
  """The internal writer's interface as dm-reverb's TrajectoryWriter uses
  it, recording every call (a plain class, as users' tests write one)."""

  max_num_keep_alive_refs = 3

  def __init__(self):
    self.calls = []
    self.returned = []  # What each Append and AppendPartial returned.
    self.episode_steps = 0

  def _refs(self, data):
    refs = [None if x is None else FakeCellRef(x) for x in data]
    self.returned.append(refs)
    return refs

  def Append(self, data):  # pylint: disable=invalid-name
    self.calls.append(('Append', data))
    self.episode_steps += 1
    return self._refs(data)

  def AppendPartial(self, data):  # pylint: disable=invalid-name
    self.calls.append(('AppendPartial', data))
    return self._refs(data)

  def CreateItem(self, table, priority, trajectory, squeeze_column):  # pylint: disable=invalid-name
    self.calls.append(('CreateItem', table, priority, trajectory,
                       squeeze_column))

  def Flush(self, ignore_last_num_items, timeout_ms):  # pylint: disable=invalid-name
    self.calls.append(('Flush', ignore_last_num_items, timeout_ms))

  def EndEpisode(self, clear_buffers, timeout_ms):  # pylint: disable=invalid-name
    self.calls.append(('EndEpisode', clear_buffers, timeout_ms))
    self.episode_steps = 0

  def ConfigureChunker(self, column, options):  # pylint: disable=invalid-name
    self.calls.append(('ConfigureChunker', column,
                       options.num_keep_alive_refs))

  def Close(self):  # pylint: disable=invalid-name
    self.calls.append(('Close',))


def values(column):
  return [None if ref is None else ref.value for ref in column]


def test_a_plain_python_internal_writer_is_called_as_dm_reverb_calls_it():
  internal = FakeInternalWriter()
  writer = reverb.TrajectoryWriter(internal)
  writer.configure(('b',), num_keep_alive_refs=5, max_chunk_length=2)
  writer.append({'a': 1})
  writer.append({'a': 2, 'b': 20}, partial_step=True)
  writer.append({'c': 30})
  history = writer.history
  assert [values(history[k]) for k in 'abc'] == [[1, 2], [None, 20],
                                                 [None, 30]]
  # The history holds exactly the references Append/AppendPartial returned.
  first, partial, last = internal.returned
  for column, expected in ((history['a'], [first[0], partial[0]]),
                           (history['b'], [None, partial[1]]),
                           (history['c'], [None, last[2]])):
    assert all(ref is want for ref, want in zip(column, expected))
  refs = list(history['a'])
  writer.create_item('t', 0.5, {'x': history['a'][-2:], 'y': history['c'][-1]})
  writer.flush()
  writer.flush(1, 100)
  writer.end_episode()
  writer.end_episode(False, 50)
  assert writer.episode_steps == 0
  writer.close()
  assert internal.calls[:3] == [
      ('Append', [1]),
      ('ConfigureChunker', 1, 5),  # Once the column exists.
      ('AppendPartial', [2, 20]),
  ]
  assert internal.calls[3] == ('Append', [None, None, 30])
  name, table, priority, trajectory, squeeze = internal.calls[4]
  assert (name, table, priority, squeeze) == ('CreateItem', 't', 0.5,
                                              [False, True])
  assert all(type(column) is list for column in trajectory)  # pylint: disable=unidiomatic-typecheck
  assert trajectory[0] == refs and trajectory[1][0].value == 30
  assert internal.calls[5:] == [('Flush', 0, -1), ('Flush', 1, 100),
                                ('EndEpisode', True, None),
                                ('EndEpisode', False, 50), ('Close',)]


def test_timeouts_of_a_plain_python_internal_writer():
  class Blocked(FakeInternalWriter):

    def Flush(self, ignore_last_num_items, timeout_ms):  # pylint: disable=invalid-name
      raise RuntimeError('Timeout exceeded with 1 items waiting.')

    def EndEpisode(self, clear_buffers, timeout_ms):  # pylint: disable=invalid-name
      raise RuntimeError('Timeout exceeded with 1 items waiting.')

  writer = reverb.TrajectoryWriter(Blocked())
  with pytest.raises(reverb.DeadlineExceededError,
                     match=r'^Flush call did not complete within provided '
                     r'timeout of 0:00:00.020000$'):
    writer.flush(timeout_ms=20)
  with pytest.raises(reverb.DeadlineExceededError, match='End episode call'):
    writer.end_episode(timeout_ms=30)
  with pytest.raises(RuntimeError, match='Timeout exceeded'):
    writer.end_episode()  # No timeout given: the error as it is.


@pytest.mark.parametrize('steps, expected', [
    # New dict key; a field omitted later.
    ([{'a': 1}, {'a': 2, 'b': 3}, {'b': 4}],
     {'a': [1, 2, None], 'b': [None, 3, 4]}),
    ([[1], [2, 3], [4, 5, 6]], [[1, 2, 4], [None, 3, 5], [None, None, 6]]),
    ([(1,), (2, 3)], ([1, 2], [None, 3])),
    # A list then a longer tuple: the list type stays.
    ([[1], (2, 3)], [[1, 2], [None, 3]]),
    ([[1, 2, 3], [4]], [[1, 4], [2, None], [3, None]]),
    # Nested growth, a new nest in a longer list, int keys.
    ([{'x': {'a': 1}}, {'x': {'a': 2, 'b': 3}, 'y': [4]},
      {'x': {'b': 5}, 'y': [6, {'z': 7}]}],
     {'x': {'a': [1, 2, None], 'b': [None, 3, 5]},
      'y': [[None, 4, 6], {'z': [None, None, 7]}]}),
    ([{1: 1}, {1: 2, 2: 3}], {1: [1, 2], 2: [None, 3]}),
])
def test_history_structure_grows_with_the_data(steps, expected):
  writer = reverb.TrajectoryWriter(FakeInternalWriter())
  for step in steps:
    writer.append(step)

  def as_values(node):
    if isinstance(node, dict):
      return {k: as_values(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
      return type(node)(as_values(v) for v in node)
    return values(node)

  assert as_values(writer.history) == expected


def test_partial_steps_grow_the_open_step():
  writer = reverb.TrajectoryWriter(FakeInternalWriter())
  writer.append({'a': 1, 'b': 10})
  writer.append({'a': 2}, partial_step=True)
  writer.append({'c': 30}, partial_step=True)
  writer.append({'b': 20, 'd': [40]})
  writer.append({'a': 3})
  history = writer.history
  assert [values(history[k]) for k in 'abc'] == [[1, 2, 3], [10, 20, None],
                                                 [None, 30, None]]
  assert values(history['d'][0]) == [None, 40, None]


@pytest.mark.parametrize('first, second', [
    ({'a': 1}, [2]), ({'a': 1}, 2), (1, {'a': 2}), ({'a': [1]}, {'a': 2})])
def test_structures_that_cannot_grow_raise_value_error(first, second):
  writer = reverb.TrajectoryWriter(FakeInternalWriter())
  writer.append(first)
  with pytest.raises(ValueError, match='Cannot merge structures'):
    writer.append(second)


def test_history_indices_as_dm_reverb():
  writer = reverb.TrajectoryWriter(FakeInternalWriter())  # Keeps 3 steps.
  for t in range(4):
    writer.append(t)
  history = writer.history
  assert values(history[[1, 3]]) == [1, 3]
  assert values(history[-3:]) == [1, 2, 3] == values(history[1:4])
  assert values(history[::-2]) == [3, 1]
  assert not values(history[4:9])
  assert list(history) == [None] + list(history[1:])  # Raw references.
  # Expired steps and positions before step 0 read None: ValueError.
  for index in (0, -4, -5, slice(None), slice(-6, None), slice(None, -1)):
    with pytest.raises(ValueError, match='cannot contain any None'):
      history[index]  # pylint: disable=pointless-statement
  for index in (4, [4]):
    with pytest.raises(IndexError, match='list index out of range'):
      history[index]  # pylint: disable=pointless-statement
  with pytest.raises(TypeError, match="_ColumnHistory indices must be "
                     "integers or slices, not <class 'str'>"):
    history['x']  # pylint: disable=pointless-statement
  assert values(history[np.int64(-1)]) == [3]  # Unlike dm-reverb.


def test_end_episode_closes_an_open_partial_step():
  writer = reverb.TrajectoryWriter(FakeInternalWriter())
  writer.append({'a': 1}, partial_step=True)
  writer.end_episode(clear_buffers=False)
  writer.append({'a': 2})  # dm-reverb: "already been set".
  assert values(writer.history['a']) == [1, 2]


def test_error_messages_are_dm_reverbs(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'scalar': np.int64(1), 'f': np.zeros([2], np.float32)})
  with pytest.raises(ValueError) as error:
    writer.append({'scalar': np.float64(1)})
  assert str(error.value) == (
      "Tensor of wrong dtype provided for column ('scalar',). Got double but "
      'expected int64.')
  with pytest.raises(ValueError) as error:
    writer.append({'f': np.zeros([3], np.float32)})
  assert str(error.value) == (
      "Tensor of incompatible shape provided for column ('f',). Got [3] "
      'which is incompatible with [2].')
  history = writer.history
  mixed = reverb.TrajectoryColumn(list(history['scalar'][-1]) +
                                  list(history['f'][-1]))
  with pytest.raises(ValueError) as error:
    writer.create_item('queue', 1.0, mixed)
  assert str(error.value) == (
      'Error in column 0: Column references tensors with different dtypes: '
      'int64 (index 0) != float (index 1).')
  with pytest.raises(ValueError, match='^trajectory must not be empty.$'):
    writer.create_item('queue', 1.0, reverb.TrajectoryColumn([]))
  old = history['f'][-1]
  [ref] = list(old)
  for _ in range(2):
    writer.append({'f': np.zeros([2], np.float32)})
  with pytest.raises(ValueError) as error:
    writer.create_item('queue', 1.0, [writer.history['f'][-1], old])
  assert str(error.value) == (
      'Error in column 1: Column contains expired CellRef.')
  with pytest.raises(RuntimeError,
                     match='^Cannot access data from expired WeakCellRef$'):
    ref.numpy()
  with pytest.raises(ValueError) as error:
    writer.create_item('nope', 1.0, writer.history['f'][-1])
  assert str(error.value) == (
      "Unable to create item in table 'nope' since the table could not be "
      'found.')
  with pytest.raises(RuntimeError,
                     match='^history cannot be accessed before `append`'):
    client.trajectory_writer(1).history  # pylint: disable=expression-not-assigned
  writer.close()
  for call in (lambda: writer.append({'f': np.zeros([2], np.float32)}),
               lambda: writer.create_item('queue', 1.0,
                                          writer.history['f'][-1]),
               writer.flush, writer.end_episode):
    with pytest.raises(RuntimeError,
                       match='^TrajectoryWriter::Close has been called.$'):
      call()


def test_signature_errors_spell_both_signatures_out(client):
  writer = client.trajectory_writer(num_keep_alive_refs=2)
  writer.append({'obs': np.zeros([3], np.float64)})
  with pytest.raises(ValueError) as error:
    writer.create_item('signed', 1.0, {'obs': writer.history['obs'][-1:]})
  assert str(error.value) == (
      "Unable to create item in table 'signed' since the provided trajectory "
      'is inconsistent with the table signature. The table expects column 0 '
      'to be a float [?,2] tensor but got a double [1,3] tensor.\n\nThe table '
      "signature is:\n\t0: Tensor<name: 'obs', dtype: float, shape: [?,2]>"
      "\n\nThe provided trajectory signature is:\n\t0: Tensor<name: '0', "
      'dtype: double, shape: [1,3]>.\n')
  with pytest.raises(ValueError, match='The trajectory has 2 columns but the '
                     'table signature has 1 columns'):
    writer.create_item('signed', 1.0, [writer.history['obs'][-1]] * 2)
  writer.close()


def test_timeouts_as_dm_reverb(client):
  writer = client.trajectory_writer(num_keep_alive_refs=1)
  for t in range(2):
    writer.append(obs(t))
    writer.create_item('tiny', 1.0, writer.history[-1])
  with pytest.raises(reverb.DeadlineExceededError) as error:
    writer.flush(timeout_ms=100)
  assert str(error.value) == (
      'Flush call did not complete within provided timeout of 0:00:00.100000')
  for timeout_ms in (0, -5):  # No time at all.
    with pytest.raises(reverb.DeadlineExceededError, match='End episode call'):
      writer.end_episode(timeout_ms=timeout_ms)
  assert writer.episode_steps == 2  # The episode goes on.
  writer.close()
