"""TrajectoryWriter.create_items: the same items as create_item one by one,
and the same errors."""

import numpy as np
import pytest

import reverb
from reverb import specs

TIMEOUT_MS = 30_000


@pytest.fixture(name='client')
def client_fixture():
  """A client of a server with two queues, 'batch' for create_items and
  'single' for create_item, and a queue with a signature."""
  signature = {'obs': specs.TensorSpec([None, 2], np.float32)}
  server = reverb.Server([reverb.Table.queue('batch', 1000),
                          reverb.Table.queue('single', 1000),
                          reverb.Table.queue('signed', 100, signature=signature)])
  yield server.localhost_client()
  server.stop()


def step(t):
  return {'obs': np.full([2], t, np.float32), 'act': np.int64(10 * t),
          'nest': (np.float64(t / 4), np.array([t, -t], np.int32))}


def steps(first, n):
  """Steps first..first+n-1, batched (a leading time dimension)."""
  rows = [step(t) for t in range(first, first + n)]
  return {'obs': np.stack([r['obs'] for r in rows]),
          'act': np.stack([r['act'] for r in rows]),
          'nest': (np.stack([r['nest'][0] for r in rows]),
                   np.stack([r['nest'][1] for r in rows]))}


def stop(end):
  """The stop of a slice ending at negative index `end` (inclusive)."""
  return end + 1 or None


# Trajectories ending at the history's negative index `end`: the last item
# of create_items is trajectory(history, -1).
TRAJECTORIES = {
    'squeezed': lambda h, end: {'obs': h['obs'][end], 'act': h['act'][end]},
    'window': lambda h, end: {'obs': h['obs'][end - 2:stop(end)]},
    'mixed': lambda h, end: (h['obs'][end - 1:stop(end)], h['act'][end],
                             {'x': h['nest'][1][end - 3:stop(end)]}),
    'picked': lambda h, end: [h['obs'][[end - 3, end - 1]],
                              h['nest'][0][end - 2:stop(end)][1:]],
}


def drain(client, table):
  n = client.server_info()[table].current_size
  if not n:
    return []
  return [(s.info.priority, s.data) for s in client.sample(
      table, num_samples=n, emit_timesteps=False, timeout=TIMEOUT_MS / 1000)]


def assert_same_items(got, want):
  assert len(got) == len(want)
  for (got_priority, got_data), (want_priority, want_data) in zip(got, want):
    assert got_priority == want_priority
    assert len(got_data) == len(want_data)
    for got_column, want_column in zip(got_data, want_data):
      assert got_column.dtype == want_column.dtype
      np.testing.assert_array_equal(got_column, want_column)


def create_one_by_one(writer, table, priorities, trajectory):
  n = len(priorities)
  for i, priority in enumerate(priorities):
    writer.create_item(table, priority, trajectory(writer.history, i - n))


@pytest.mark.parametrize('name', sorted(TRAJECTORIES))
@pytest.mark.parametrize('batched', [False, True])
def test_items_equal_create_item_one_by_one(client, name, batched):
  trajectory = TRAJECTORIES[name]
  batch = client.trajectory_writer(num_keep_alive_refs=20)
  single = client.trajectory_writer(num_keep_alive_refs=20)
  priorities = np.linspace(0.5, 2.0, 12)
  for writer in (batch, single):
    if batched:
      writer.append_batch(steps(0, 15))
    else:
      for t in range(15):
        writer.append(step(t))
  batch.create_items('batch', priorities=priorities,
                     trajectory=trajectory(batch.history, -1))
  create_one_by_one(single, 'single', priorities, trajectory)
  # Then a few more steps and the items of the last two, as a list.
  for writer in (batch, single):
    writer.append_batch(steps(15, 2))
  batch.create_items('batch', priorities=[3.0, 4.0],
                     trajectory=trajectory(batch.history, -1))
  create_one_by_one(single, 'single', [3.0, 4.0], trajectory)
  for writer in (batch, single):
    writer.flush(timeout_ms=TIMEOUT_MS)
    writer.close()
  want = drain(client, 'single')
  assert len(want) == 14
  assert_same_items(drain(client, 'batch'), want)


def test_items_over_a_partial_step(client):
  batch = client.trajectory_writer(num_keep_alive_refs=5)
  single = client.trajectory_writer(num_keep_alive_refs=5)
  for writer in (batch, single):
    for t in range(3):
      writer.append(step(t))
    writer.append({'obs': step(3)['obs']}, partial_step=True)
  def trajectory(h, end):
    return {'obs': h['obs'][end - 1:stop(end)]}
  batch.create_items('batch', priorities=[1.0, 2.0, 3.0],
                     trajectory=trajectory(batch.history, -1))
  create_one_by_one(single, 'single', [1.0, 2.0, 3.0], trajectory)
  # The open step's unset field reads None, as for create_item.
  with pytest.raises(ValueError, match='None data references'):
    batch.create_items('batch', priorities=[1.0],
                       trajectory={'act': batch.history['act'][-1]})
  for writer in (batch, single):
    writer.append({'act': step(3)['act'], 'nest': step(3)['nest']})
    writer.flush(timeout_ms=TIMEOUT_MS)
    writer.close()
  assert_same_items(drain(client, 'batch'), drain(client, 'single'))


def test_a_field_a_step_omitted_cannot_be_in_an_item():
  server = reverb.Server([reverb.Table.queue('q', 10)])
  writer = server.localhost_client().trajectory_writer(num_keep_alive_refs=5)
  writer.append({'a': np.int32(0), 'b': np.int32(0)})
  writer.append({'a': np.int32(1)})
  writer.append({'a': np.int32(2), 'b': np.int32(2)})
  with pytest.raises(ValueError, match='None data references.*never set'):
    writer.create_items('q', priorities=[1.0, 1.0],
                        trajectory={'b': writer.history['b'][-1]})
  writer.create_items('q', priorities=[1.0, 1.0, 1.0],
                      trajectory={'a': writer.history['a'][-1]})
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert server.localhost_client().server_info()['q'].current_size == 3
  writer.close()
  server.stop()


def test_items_across_an_episode_kept_in_the_history(client):
  batch = client.trajectory_writer(num_keep_alive_refs=10)
  single = client.trajectory_writer(num_keep_alive_refs=10)
  for writer in (batch, single):
    writer.append_batch(steps(0, 4))
    writer.end_episode(clear_buffers=False, timeout_ms=TIMEOUT_MS)
    writer.append_batch(steps(4, 3))
  def trajectory(h, end):
    return {'obs': h['obs'][end - 1:stop(end)], 'act': h['act'][end]}
  priorities = [1.0] * 6  # Items of steps 1..6: three span both episodes.
  batch.create_items('batch', priorities=priorities,
                     trajectory=trajectory(batch.history, -1))
  create_one_by_one(single, 'single', priorities, trajectory)
  for writer in (batch, single):
    writer.flush(timeout_ms=TIMEOUT_MS)
    writer.close()
  want = drain(client, 'single')
  assert [int(data[0]) for _, data in want] == [10 * t for t in range(1, 7)]
  assert_same_items(drain(client, 'batch'), want)


def test_an_ended_episode_cannot_be_in_an_item(client):
  writer = client.trajectory_writer(num_keep_alive_refs=10)
  writer.append_batch(steps(0, 4))
  stale = writer.history['obs'][-1]
  writer.end_episode(timeout_ms=TIMEOUT_MS)
  writer.append_batch(steps(4, 2))
  with pytest.raises(ValueError, match='steps from -1 on.*steps 0 to 1'):
    writer.create_items('batch', priorities=[1.0] * 3,
                        trajectory={'obs': writer.history['obs'][-1]})
  with pytest.raises(ValueError, match='no longer reads the steps'):
    writer.create_items('batch', priorities=[1.0], trajectory={'obs': stale})
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert client.server_info()['batch'].current_size == 0
  writer.close()


def test_expired_steps_are_out_of_range(client):
  writer = client.trajectory_writer(num_keep_alive_refs=3)
  writer.append_batch(steps(0, 6))
  with pytest.raises(ValueError, match='steps from 2 on.*steps 3 to 5'):
    writer.create_items('batch', priorities=[1.0] * 4,
                        trajectory={'obs': writer.history['obs'][-1]})
  writer.create_items('batch', priorities=[1.0] * 3,
                      trajectory={'obs': writer.history['obs'][-1]})
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert [int(data[0][0]) for _, data in drain(client, 'batch')] == [3, 4, 5]
  writer.close()


def error_of(call):
  with pytest.raises(Exception) as info:
    call()
  return type(info.value), str(info.value)


@pytest.mark.parametrize('case', [
    'nan', 'signature', 'unknown table', 'not a column', 'empty column',
    'closed'])
def test_errors_are_create_items(client, case):
  """create_items raises what create_item raises for the same last item,
  and queues nothing."""
  writer = client.trajectory_writer(num_keep_alive_refs=5)
  writer.append_batch({'obs': np.zeros([5, 2], np.float32),
                       'wide': np.zeros([5, 3], np.float32)})
  h = writer.history
  table, priorities, trajectory = 'signed', [1.0, 1.0], {'obs': h['obs'][-2:]}
  if case == 'nan':
    priorities = [1.0, float('nan')]
  elif case == 'signature':
    trajectory = {'obs': h['wide'][-2:]}
  elif case == 'unknown table':
    table = 'nope'
  elif case == 'not a column':
    trajectory = {'obs': np.zeros([2, 2], np.float32)}
  elif case == 'empty column':
    table, trajectory = 'batch', {'obs': h['obs'][3:1]}
  elif case == 'closed':
    writer.close()
  want = error_of(lambda: writer.create_item(table, priorities[-1],
                                             trajectory))
  got = error_of(lambda: writer.create_items(
      table, priorities=priorities, trajectory=trajectory))
  assert got == want
  if case != 'closed':
    writer.flush(timeout_ms=TIMEOUT_MS)
    writer.close()
  for name in ('signed', 'batch'):
    assert client.server_info()[name].current_size == 0


def test_bad_priorities_and_columns(client):
  writer = client.trajectory_writer(num_keep_alive_refs=5)
  writer.append_batch(steps(0, 5))
  h = writer.history
  with pytest.raises(ValueError, match=r'one-dimensional.*\(2, 1\)'):
    writer.create_items('batch', priorities=[[1.0], [2.0]],
                        trajectory=h['obs'][-1])
  with pytest.raises(ValueError, match='one-dimensional'):
    writer.create_items('batch', priorities=1.0, trajectory=h['obs'][-1])
  with pytest.raises(ValueError):
    writer.create_items('batch', priorities=['high'], trajectory=h['obs'][-1])
  made = reverb.TrajectoryColumn(list(h['obs'][-1]), squeeze=True)
  with pytest.raises(ValueError, match='indexed from the history'):
    writer.create_items('batch', priorities=[1.0], trajectory=made)
  with pytest.raises(TypeError):
    writer.create_items('batch', [1.0], h['obs'][-1])  # Keyword-only.
  # No priorities: nothing to queue.
  writer.create_items('batch', priorities=[], trajectory=h['obs'][-1])
  writer.flush(timeout_ms=TIMEOUT_MS)
  assert client.server_info()['batch'].current_size == 0
  writer.close()


def test_one_item_of_each_step_of_an_append_batch_in_step_order(client):
  """The typical case: T steps in, one item of the last 2 steps for each."""
  writer = client.trajectory_writer(num_keep_alive_refs=34)
  writer.append(step(0))
  for first in (1, 33):
    writer.append_batch(steps(first, 32))
    writer.create_items('batch', priorities=np.arange(first, first + 32),
                        trajectory={'act': writer.history['act'][-2:]})
  writer.flush(timeout_ms=TIMEOUT_MS)
  items = drain(client, 'batch')
  assert [priority for priority, _ in items] == list(range(1, 65))
  assert [list(data[0]) for _, data in items] == [
      [10 * (t - 1), 10 * t] for t in range(1, 65)]
  writer.close()

