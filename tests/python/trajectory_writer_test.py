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
    with pytest.raises(IndexError):
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
