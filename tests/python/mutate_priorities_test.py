"""Client.mutate_priorities with arrays (keys, priorities): the same results
and errors as the dict form, on the in-process path and over gRPC."""

import numpy as np
import pytest

import reverb

TIMEOUT = 30
NUM_ITEMS = 12


def prioritized_table(name):
  return reverb.Table(
      name=name,
      sampler=reverb.selectors.Prioritized(1.0),
      remover=reverb.selectors.Fifo(),
      max_size=100,
      rate_limiter=reverb.rate_limiters.MinSize(1))


@pytest.fixture(name='server')
def server_fixture(transport):
  del transport  # Clients of the test take its path.
  server = reverb.Server(tables=[
      prioritized_table('dict'),
      prioritized_table('arrays'),
      reverb.Table(
          name='uniform',
          sampler=reverb.selectors.Uniform(),
          remover=reverb.selectors.Fifo(),
          max_size=100,
          rate_limiter=reverb.rate_limiters.MinSize(1)),
  ])
  yield server
  server.stop()


@pytest.fixture(name='client')
def client_fixture(server):
  return server.localhost_client()


def fill(client, table):
  """NUM_ITEMS items of data 0..NUM_ITEMS-1, priority 1; their keys by
  data."""
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for i in range(NUM_ITEMS):
      writer.append({'x': np.int64(i)})
      writer.create_item(table, 1.0, {'x': writer.history['x'][-1]})
  keys = {}
  while len(keys) < NUM_ITEMS:
    for sample in client.sample(table, num_samples=100, emit_timesteps=False,
                                timeout=TIMEOUT):
      keys[int(sample.data[0])] = sample.info.key
  return keys


def state(client, table):
  """{data: (priority, probability)} of every item, from samples (each item
  is drawn: every priority is > 0 and 1,000 samples are taken)."""
  seen = {}
  for sample in client.sample(table, num_samples=1000, emit_timesteps=False,
                              timeout=TIMEOUT):
    seen[int(sample.data[0])] = (float(sample.info.priority),
                                   float(sample.info.probability))
  return seen


def test_arrays_give_the_dict_forms_results(client):
  dict_keys = fill(client, 'dict')
  array_keys = fill(client, 'arrays')
  # Data 0, 1 deleted (with an unknown key), the others updated; data 2 is
  # given twice (the later priority wins) and an unknown key is ignored.
  new = {i: 1.5 + i for i in range(2, NUM_ITEMS)}
  client.mutate_priorities(
      'dict', updates={**{dict_keys[i]: p for i, p in new.items()}, 7: 3.0},
      deletes=[dict_keys[0], dict_keys[1], 99])
  keys = np.array([array_keys[2]] + [array_keys[i] for i in new] + [7],
                  dtype=np.uint64)
  priorities = np.array([0.25] + list(new.values()) + [3.0], dtype=np.float32)
  client.mutate_priorities(
      'arrays', updates=(keys, priorities),
      deletes=np.array([array_keys[0], array_keys[1], 99], dtype=np.uint64))
  want = state(client, 'dict')
  assert set(want) == set(new)
  assert {i: p for i, (p, _) in want.items()} == new
  assert state(client, 'arrays') == want
  assert client.server_info()['arrays'].current_size == NUM_ITEMS - 2


def test_int64_keys_lists_and_integer_priorities(client):
  keys = fill(client, 'arrays')
  client.mutate_priorities(
      'arrays',
      updates=([int(keys[i]) for i in range(NUM_ITEMS)],
               np.arange(1, NUM_ITEMS + 1, dtype=np.int32)))
  assert {i: p for i, (p, _) in state(client, 'arrays').items()} == {
      i: i + 1.0 for i in range(NUM_ITEMS)}
  # int64 keys (as a view of the uint64 keys would be, when below 2**63).
  small = [i for i in range(NUM_ITEMS) if keys[i] < 2**63]
  client.mutate_priorities(
      'arrays', updates=(np.array([keys[i] for i in small], np.int64),
                         np.full(len(small), 2.0)))
  got = state(client, 'arrays')
  assert all(got[i][0] == 2.0 for i in small)


def test_deletes_alone_as_an_array(client):
  keys = fill(client, 'arrays')
  client.mutate_priorities(
      'arrays', deletes=np.array([keys[i] for i in range(NUM_ITEMS - 1)],
                                 dtype=np.uint64))
  assert set(state(client, 'arrays')) == {NUM_ITEMS - 1}


def test_a_selector_that_ignores_priorities_keeps_them(client):
  keys = fill(client, 'uniform')
  client.mutate_priorities(
      'uniform', updates=(np.array([keys[3]], np.uint64), np.array([9.0])))
  got = state(client, 'uniform')
  assert got[3][0] == 9.0 and got[4][0] == 1.0
  assert got[3][1] == pytest.approx(1 / NUM_ITEMS)


@pytest.mark.parametrize('bad', [float('nan'), -1.0])
def test_nan_and_negative_priorities_raise_as_the_dict_form(client, bad):
  keys = fill(client, 'arrays')
  text = 'NaN' if np.isnan(bad) else 'negative'
  with pytest.raises(ValueError, match=rf'^Priority must not be {text}\.$'):
    client.mutate_priorities('arrays', updates={keys[0]: bad})
  with pytest.raises(ValueError, match=rf'^Priority must not be {text}\.$'):
    client.mutate_priorities(
        'arrays', updates=(np.array([keys[0], keys[1]], np.uint64),
                           np.array([bad, 4.0])))
  got = state(client, 'arrays')
  assert got[0][0] == 1.0  # Rejected: unchanged.
  assert got[1][0] == 4.0  # The others are applied.


def test_bad_arrays_raise_and_change_nothing(client):
  keys = fill(client, 'arrays')
  one = np.array([keys[0]], np.uint64)
  cases = [
      (ValueError, 'got 2 keys and 1 priorities',
       (np.array([keys[0], keys[1]], np.uint64), np.array([5.0]))),
      (ValueError, 'keys must be 1-D', (one.reshape(1, 1), np.array([5.0]))),
      (ValueError, 'keys must be 1-D', (np.uint64(keys[0]), np.array([5.0]))),
      (ValueError, 'priorities must be 1-D', (one, np.array([[5.0]]))),
      (ValueError, 'keys must not be negative',
       (np.array([-1], np.int64), np.array([5.0]))),
      (TypeError, 'keys must have an integer dtype; got float64',
       (one.astype(np.float64), np.array([5.0]))),
      (TypeError, 'keys must have an integer dtype; got bool',
       (np.array([True]), np.array([5.0]))),
      (TypeError, 'priorities must have a float or integer dtype; got <U1',
       (one, np.array(['x']))),
      (TypeError, 'priorities must have a float or integer dtype; got object',
       (one, np.array([None]))),
      (ValueError, 'a pair', (one, np.array([5.0]), one)),
  ]
  for error, text, updates in cases:
    with pytest.raises(error, match=text):
      client.mutate_priorities('arrays', updates=updates)
  with pytest.raises(TypeError, match='deletes must have an integer dtype'):
    client.mutate_priorities('arrays', deletes=np.array([1.0]))
  assert {p for p, _ in state(client, 'arrays').values()} == {1.0}
  assert client.server_info()['arrays'].current_size == NUM_ITEMS


def test_unknown_table_is_the_dict_forms_error(client):
  with pytest.raises(RuntimeError) as dict_error:
    client.mutate_priorities('nosuch', updates={1: 1.0})
  with pytest.raises(RuntimeError) as array_error:
    client.mutate_priorities(
        'nosuch', updates=(np.array([1], np.uint64), np.array([1.0])))
  assert str(array_error.value) == str(dict_error.value)
