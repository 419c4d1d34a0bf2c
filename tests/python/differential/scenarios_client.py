"""Differential scenarios: reverb.Client calls (insert, sample,
mutate_priorities, reset, server_info, checkpoint), the legacy Writer of
`Client.writer`, and the errors they raise.

Some outcomes are normalized where they legitimately differ: item keys
(random), times, pybind's "incompatible function arguments" texts (they
print the bindings' internal signatures, so only the exception class is
compared), and checkpoint paths.
"""

import os
import pickle
import re
import tempfile
import threading
import time

import numpy as np

import scenario_util as util


def _client(reverb, env, *tables):
  return reverb.Client(env.server(list(tables) or [util.table(reverb)]))


def _within(seconds, fn):
  """`util.outcome(fn)`, or 'did not finish' if it takes longer than `seconds`
  (for calls that block forever under one of the packages)."""
  result = []
  thread = threading.Thread(target=lambda: result.append(util.outcome(fn)),
                            daemon=True)
  thread.start()
  thread.join(seconds)
  return result[0] if result else 'did not finish'


def _without_numbers(text):
  return re.sub(r'\d{6,}', 'N', text)


def _info(info):
  """A SampleInfo with its key (random) reduced to whether it is set."""
  return {'key_set': int(info.key) != 0,
          'probability': round(float(info.probability), 6),
          'table_size': int(info.table_size),
          'priority': float(info.priority),
          'times_sampled': int(info.times_sampled)}


def _stats(stats):
  return {'completed': stats.completed,
          'fields': sorted(f.name for f in stats.DESCRIPTOR.fields)}


def _table_info(info):
  """A TableInfo as JSON, without times."""
  limiter = info.rate_limiter_info
  return {
      'name': info.name,
      'sampler_options': str(info.sampler_options),
      'remover_options': str(info.remover_options),
      'max_size': info.max_size,
      'max_times_sampled': info.max_times_sampled,
      'rate_limiter_info': {
          'samples_per_insert': limiter.samples_per_insert,
          'min_diff': limiter.min_diff,
          'max_diff': limiter.max_diff,
          'min_size_to_sample': limiter.min_size_to_sample,
          'insert_stats': _stats(limiter.insert_stats),
          'sample_stats': _stats(limiter.sample_stats),
          'fields': sorted(f.name for f in limiter.DESCRIPTOR.fields),
      },
      'signature': info.signature,
      'current_size': info.current_size,
      'num_episodes': info.num_episodes,
      'num_deleted_episodes': info.num_deleted_episodes,
      'num_unique_samples': info.num_unique_samples,
      'table_worker_time_fields': sorted(
          f.name for f in info.table_worker_time.DESCRIPTOR.fields),
      'fields': sorted(vars(info)),
  }


def _size(client, table='t', expected=None, within=10.0):
  """The size of `table`; with `expected`, read again (for up to `within`
  seconds) until it is reached: dm-reverb confirms an insert before its
  table worker has applied it."""
  deadline = time.monotonic() + within
  size = client.server_info()[table].current_size
  while (expected is not None and size != expected and
         time.monotonic() < deadline):
    time.sleep(0.01)
    size = client.server_info()[table].current_size
  return size


# Client.insert.


def scenario_insert_then_sample(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(3), np.float32(1.5)], priorities={'t': 2.0})
  [sample] = list(client.sample('t', num_samples=1))
  return {'data': [s.data for s in sample],
          'priority': sample[0].info.priority,
          'probability': sample[0].info.probability,
          'table_size': sample[0].info.table_size}


def scenario_insert_into_unknown_table(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(3)], priorities={'missing': 1.0})


def scenario_insert_into_known_and_unknown_table(reverb, env):
  client = _client(reverb, env)
  error = util.outcome(lambda: client.insert(
      [np.int32(3)], priorities={'t': 1.0, 'missing': 1.0}))
  return {'error': error, 'size': _size(client, expected=1, within=3)}


def scenario_insert_with_empty_priorities(reverb, env):
  _client(reverb, env).insert([np.int32(3)], priorities={})


def scenario_insert_with_priorities_none(reverb, env):
  _client(reverb, env).insert([np.int32(3)], priorities=None)


def scenario_insert_with_string_priority(reverb, env):
  client = _client(reverb, env)
  return util.type_error(
      lambda: client.insert([np.int32(3)], priorities={'t': 'x'}))


def scenario_insert_with_priority_none(reverb, env):
  client = _client(reverb, env)
  return util.type_error(
      lambda: client.insert([np.int32(3)], priorities={'t': None}))


def scenario_insert_with_table_name_not_a_string(reverb, env):
  client = _client(reverb, env)
  return util.type_error(
      lambda: client.insert([np.int32(3)], priorities={1: 1.0}))


def scenario_insert_with_nan_priority(reverb, env):
  client = _client(reverb, env)
  error = util.outcome(lambda: client.insert([np.int32(3)],
                                             priorities={'t': float('nan')}))
  return {'error': error, 'size': _size(client)}


def scenario_insert_with_infinite_priority(reverb, env):
  client = _client(reverb, env,
                   util.table(reverb,
                              sampler=reverb.selectors.Prioritized(1.0)))
  client.insert([np.int32(3)], priorities={'t': float('inf')})
  return _size(client, expected=1)


def scenario_insert_with_negative_priority_into_uniform(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(3)], priorities={'t': -1.0})
  [[sample]] = list(client.sample('t'))
  return _info(sample.info)


def scenario_insert_with_negative_priority_into_prioritized(reverb, env):
  # dm-reverb's insert never returns (the table's worker dies).
  client = _client(reverb, env,
                   util.table(reverb,
                              sampler=reverb.selectors.Prioritized(1.0)))
  return _within(
      10, lambda: client.insert([np.int32(3)], priorities={'t': -1.0}))


def scenario_insert_without_columns(reverb, env):
  client = _client(reverb, env)
  error = util.outcome(lambda: client.insert([], priorities={'t': 1.0}))
  error['message'] = _without_numbers(error.get('message', ''))
  return error


def scenario_insert_none(reverb, env):
  client = _client(reverb, env)
  return util.type_error(lambda: client.insert(None, priorities={'t': 1.0}))


def scenario_insert_object(reverb, env):
  client = _client(reverb, env)
  return util.type_error(
      lambda: client.insert([object()], priorities={'t': 1.0}))


def scenario_insert_nested_then_sample(reverb, env):
  client = _client(reverb, env)
  client.insert({'b': np.float64(2.5), 'a': [np.int8(1), np.arange(3)]},
                priorities={'t': 1.0})
  [[sample]] = list(client.sample('t'))
  return {'data': sample.data,
          'dtypes': [str(np.asarray(d).dtype) for d in sample.data]}


def scenario_insert_python_values_then_sample(reverb, env):
  client = _client(reverb, env)
  client.insert([1, 2.5, True, 'text', b'bytes', [1, 2]], priorities={'t': 1.0})
  [[sample]] = list(client.sample('t'))
  return {'data': sample.data,
          'dtypes': [str(np.asarray(d).dtype) for d in sample.data]}


def scenario_insert_into_two_tables(reverb, env):
  client = _client(reverb, env, util.table(reverb, 'a'),
                   util.table(reverb, 'b'))
  client.insert([np.int32(1)], priorities={'a': 1.0, 'b': 2.0})
  _size(client, 'a', expected=1)
  _size(client, 'b', expected=1)
  info = client.server_info()
  return {name: [info[name].current_size, info[name].num_episodes]
          for name in ('a', 'b')}


# Client.sample.


def scenario_sample_unknown_table(reverb, env):
  list(_client(reverb, env).sample('missing', 1))


def scenario_sample_unknown_table_unpacked(reverb, env):
  list(_client(reverb, env).sample('missing', 1,
                                   unpack_as_table_signature=True))


def scenario_sample_zero(reverb, env):
  list(_client(reverb, env).sample('t', 0))


def scenario_sample_minus_one(reverb, env):
  return list(_client(reverb, env).sample('t', -1))


def scenario_sample_minus_two(reverb, env):
  return list(_client(reverb, env).sample('t', -2))


def scenario_sample_float_count(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(1)], priorities={'t': 1.0})
  return util.type_error(lambda: list(client.sample('t', 1.5)))


def scenario_sample_string_count(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(1)], priorities={'t': 1.0})
  return util.type_error(lambda: list(client.sample('t', 'x')))


def scenario_sample_info_of_prioritized_table(reverb, env):
  client = _client(reverb, env, util.table(
      reverb, sampler=reverb.selectors.MaxHeap(), max_times_sampled=2))
  client.insert([np.int32(1)], priorities={'t': 1.0})
  client.insert([np.int32(2)], priorities={'t': 3.0})
  _size(client, expected=2)
  samples = [(s[0].data, _info(s[0].info))
             for s in client.sample('t', num_samples=3)]
  return {'samples': samples, 'size': _size(client, expected=1)}


def scenario_sample_without_timesteps(reverb, env):
  client = _client(reverb, env)
  with client.writer(3) as writer:
    for i in range(3):
      writer.append([np.int32(i), np.full(2, i, np.float32)])
    writer.create_item('t', 3, 1.0)
  [sample] = list(client.sample('t', emit_timesteps=False))
  return {'data': sample.data, 'info': _info(sample.info)}


def scenario_sample_timesteps(reverb, env):
  client = _client(reverb, env)
  with client.writer(3) as writer:
    for i in range(3):
      writer.append({'x': np.int32(i), 'y': np.full(2, i, np.float32)})
    writer.create_item('t', 2, 1.0)
  [steps] = list(client.sample('t'))
  return [s.data for s in steps]


def scenario_sample_unpacked_without_signature(reverb, env):
  client = _client(reverb, env)
  client.insert({'x': np.int32(1)}, priorities={'t': 1.0})
  [[sample]] = list(client.sample('t', unpack_as_table_signature=True))
  return sample.data


def scenario_sample_of_queue_removes_items(reverb, env):
  client = _client(reverb, env, reverb.Table.queue('t', 5))
  for i in range(3):
    client.insert([np.int32(i)], priorities={'t': 1.0})
  data = [s[0].data for s in client.sample('t', 2)]
  return {'data': data, 'size': _size(client, expected=1)}


def scenario_sample_of_stack(reverb, env):
  client = _client(reverb, env, reverb.Table.stack('t', 5))
  for i in range(3):
    client.insert([np.int32(i)], priorities={'t': 1.0})
  _size(client, expected=3)
  return [s[0].data for s in client.sample('t', 3)]


# Client.mutate_priorities.


def scenario_mutate_priorities_of_unknown_table(reverb, env):
  _client(reverb, env).mutate_priorities('missing', updates={1: 1.0})


def scenario_mutate_priorities_of_unknown_keys(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(1)], priorities={'t': 1.0})
  client.mutate_priorities('t', updates={12345: 2.0}, deletes=[999])
  return _size(client, expected=1)


def scenario_mutate_priorities_with_nothing(reverb, env):
  return _client(reverb, env).mutate_priorities('t')


def _prioritized_key(reverb, env):
  client = _client(reverb, env,
                   util.table(reverb,
                              sampler=reverb.selectors.Prioritized(1.0)))
  client.insert([np.int32(1)], priorities={'t': 1.0})
  [[sample]] = list(client.sample('t'))
  return client, sample.info.key


def scenario_mutate_priorities_negative(reverb, env):
  client, key = _prioritized_key(reverb, env)
  client.mutate_priorities('t', updates={key: -2.0})


def scenario_mutate_priorities_nan(reverb, env):
  client, key = _prioritized_key(reverb, env)
  client.mutate_priorities('t', updates={key: float('nan')})


def scenario_mutate_priorities_negative_of_uniform(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(1)], priorities={'t': 1.0})
  [[sample]] = list(client.sample('t'))
  client.mutate_priorities('t', updates={sample.info.key: -2.0})
  [[sample]] = list(client.sample('t'))
  return _info(sample.info)


def scenario_mutate_priorities_then_sample(reverb, env):
  client = _client(reverb, env,
                   util.table(reverb, sampler=reverb.selectors.MaxHeap()))
  for i in range(3):
    client.insert([np.int32(i)], priorities={'t': float(i)})
  _size(client, expected=3)
  keys = {}
  for _ in range(3):
    [[sample]] = list(client.sample('t'))
    keys[int(sample.data[0])] = sample.info.key
    client.mutate_priorities('t', updates={sample.info.key: -1.0 - len(keys)})
  client.mutate_priorities('t', updates={keys[0]: 10.0}, deletes=[keys[2]])
  [[sample]] = list(client.sample('t'))
  return {'data': sample.data, 'info': _info(sample.info),
          'size': _size(client, expected=2)}


def scenario_mutate_priorities_with_string_key(reverb, env):
  client = _client(reverb, env)
  return util.type_error(
      lambda: client.mutate_priorities('t', updates={'x': 1.0}))


def scenario_mutate_priorities_with_string_delete(reverb, env):
  client = _client(reverb, env)
  return util.type_error(lambda: client.mutate_priorities('t', deletes=['x']))


# Client.reset.


def scenario_reset_unknown_table(reverb, env):
  _client(reverb, env).reset('missing')


def scenario_reset_then_server_info(reverb, env):
  client = _client(reverb, env)
  for i in range(3):
    client.insert([np.int32(i)], priorities={'t': 1.0})
  list(client.sample('t', 2))
  client.reset('t')
  return _table_info(client.server_info()['t'])


# Client.server_info.


def scenario_server_info_of_tables(reverb, env):
  client = _client(
      reverb, env,
      util.table(reverb, 'p', sampler=reverb.selectors.Prioritized(0.8),
                 remover=reverb.selectors.MinHeap(), max_times_sampled=3,
                 max_size=10,
                 rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
                     2.0, 2, 10.0)),
      reverb.Table.queue('q', 4), reverb.Table.stack('s', 3),
      util.table(reverb, 'u', remover=reverb.selectors.Lifo(),
                 max_times_sampled=-3))
  client.insert([np.int32(1)], priorities={'p': 1.0, 'q': 2.0, 's': 1.0})
  with client.writer(3) as writer:
    for i in range(3):
      writer.append([np.int32(i)])
    writer.create_item('p', 3, 0.5)
    writer.create_item('u', 2, 0.5)
  list(client.sample('q', 1))
  list(client.sample('p', 1))
  for table, size in (('p', 2), ('q', 0), ('s', 1), ('u', 1)):
    _size(client, table, expected=size)
  info = client.server_info()
  return {name: _table_info(table) for name, table in sorted(info.items())}


def scenario_server_info_timeouts(reverb, env):
  client = _client(reverb, env)
  return [sorted(client.server_info(timeout)) for timeout in (None, 0, -1, 5)]


def scenario_server_info_of_unreachable_server(reverb, env):
  del env
  reverb.Client('localhost:1').server_info(timeout=2)


def scenario_server_info_with_episodes(reverb, env):
  client = _client(reverb, env, util.table(reverb, max_size=2))
  for _ in range(2):
    with client.writer(2) as writer:
      for i in range(2):
        writer.append([np.int32(i)])
        writer.create_item('t', 1, 1.0)
  _size(client, expected=2)
  info = client.server_info()['t']
  return {'size': info.current_size, 'episodes': info.num_episodes,
          'deleted_episodes': info.num_deleted_episodes}


# Client.checkpoint.


def scenario_checkpoint(reverb, env):
  client = _client(reverb, env)
  client.insert([np.int32(1)], priorities={'t': 1.0})
  path = client.checkpoint()
  # The directory is named by the time: '2026-12-01T10:20:50.454041601+00:00'
  # (dm-reverb drops the fraction's trailing zeros, so its length varies).
  name = re.sub(r'\.\d+\+', '.F+', os.path.basename(path))
  return {'type': type(path).__name__, 'absolute': os.path.isabs(path),
          'exists': os.path.isdir(path),
          'in_temp_dir': path.startswith(tempfile.gettempdir()),
          'name': re.sub(r'\d', '0', name)}


# The Client object.


def scenario_client_repr_and_pickle(reverb, env):
  del env
  client = reverb.Client('localhost:1')
  return {'repr': repr(client), 'address': client.server_address,
          'unpickled': repr(pickle.loads(pickle.dumps(client)))}


def scenario_client_address_not_a_string(reverb, env):
  del env
  return util.type_error(lambda: reverb.Client(123))


# Client.writer: the legacy Writer.


def scenario_writer_zero_length(reverb, env):
  _client(reverb, env).writer(0)


def scenario_writer_negative_length(reverb, env):
  _client(reverb, env).writer(-2)


def scenario_writer_float_length(reverb, env):
  client = _client(reverb, env)
  return util.type_error(lambda: client.writer(2.5))


def scenario_writer_chunk_longer_than_sequence(reverb, env):
  _client(reverb, env).writer(2, chunk_length=3)


def scenario_writer_zero_chunk_length(reverb, env):
  _client(reverb, env).writer(2, chunk_length=0)


def scenario_writer_zero_in_flight_items(reverb, env):
  _client(reverb, env).writer(2, max_in_flight_items=0)


def scenario_writer_unlimited_in_flight_items(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(2, max_in_flight_items=None)
  writer.append([np.int32(1)])
  writer.create_item('t', 1, 1.0)
  writer.close()
  return _size(client, expected=1)


def scenario_writer_and_insert_store_steps_as_appended(reverb, env):
  # The caller overwrites its array after each append: what was appended is
  # stored, whether the step makes a chunk at once (chunk_length 1,
  # Client.insert) or waits for the rest of its chunk (chunk_length 3).
  client = _client(reverb, env, reverb.Table.queue('t', 20))
  step = np.zeros(1024, np.int32)
  stored = {}
  for chunk_length in (1, 3):
    with client.writer(chunk_length, chunk_length=chunk_length) as writer:
      for t in range(6):
        step[:] = t
        writer.append(step)
        writer.create_item('t', 1, 1.0)
        step[:] = -1
    for t in range(6, 9):
      step[:] = t
      client.insert(step, priorities={'t': 1.0})
      step[:] = -1
    stored[chunk_length] = [
        sorted(set(sample[0].data[0].ravel().tolist()))
        for sample in client.sample('t', num_samples=9)]
  return stored


def scenario_writer_create_item_before_append(reverb, env):
  _client(reverb, env).writer(3).create_item('t', 1, 1.0)


def _writer_with_one_step(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(3)
  writer.append([np.int32(1)])
  return client, writer


def scenario_writer_create_item_of_zero_steps(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('t', 0, 1.0)


def scenario_writer_create_item_of_negative_steps(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('t', -1, 1.0)


def scenario_writer_create_item_longer_than_appended(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('t', 2, 1.0)


def scenario_writer_create_item_longer_than_max_sequence_length(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('t', 4, 1.0)


def scenario_writer_create_item_in_unknown_table(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('missing', 1, 1.0)


def scenario_writer_create_item_with_string_priority(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  return util.type_error(lambda: writer.create_item('t', 1, 'x'))


def scenario_writer_create_item_with_nan_priority(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.create_item('t', 1, float('nan'))


def scenario_writer_append_more_columns(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.append([np.int32(1), np.int32(2)])


def scenario_writer_append_none(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  return util.type_error(lambda: writer.append([None]))


def scenario_writer_items_flushed_and_closed(reverb, env):
  client, writer = _writer_with_one_step(reverb, env)
  sizes = [_size(client)]
  writer.create_item('t', 1, 1.0)
  writer.flush()
  sizes.append(_size(client, expected=1))
  writer.append([np.int32(2)])
  writer.create_item('t', 2, 1.0)
  writer.close()
  sizes.append(_size(client, expected=2))
  return sizes


def scenario_writer_flush_without_items(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.flush()
  writer.flush()
  return writer.close(retry_on_unavailable=False)


def scenario_writer_close_twice(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.close()
  writer.close()


def scenario_writer_append_after_close(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.close()
  writer.append([np.int32(1)])


def scenario_writer_create_item_after_close(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.close()
  writer.create_item('t', 1, 1.0)


def scenario_writer_flush_after_close(reverb, env):
  _, writer = _writer_with_one_step(reverb, env)
  writer.close()
  writer.flush()


def scenario_writer_reentered_after_close(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(2)
  with writer:
    pass
  with writer:
    pass


def scenario_writer_append_sequence(reverb, env):
  client = _client(reverb, env)
  with client.writer(4) as writer:
    writer.append_sequence([np.arange(3, dtype=np.int32),
                            np.ones((3, 2), np.float32)])
    writer.create_item('t', 2, 1.0)
  [steps] = list(client.sample('t'))
  return [s.data for s in steps]


def scenario_writer_steps_beyond_max_sequence_length(reverb, env):
  client = _client(reverb, env)
  with client.writer(2) as writer:
    for i in range(5):
      writer.append([np.int32(i)])
    writer.create_item('t', 2, 1.0)
  [steps] = list(client.sample('t'))
  return [s.data for s in steps]


def scenario_writer_repr(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(4, delta_encoded=True, max_in_flight_items=None)
  reprs = [repr(writer)]
  writer.append([np.int32(1)])
  writer.append([np.int32(2)])
  reprs.append(repr(writer))
  writer.create_item('t', 1, 1.0)
  writer.flush()
  reprs.append(repr(writer))
  writer.append_sequence([np.arange(5, dtype=np.int32)])
  reprs.append(repr(writer))
  writer.close()
  reprs.append(repr(writer))
  return [_without_numbers(r) for r in reprs]


def _writer_steps(client, steps, items, expected_size, chunk_length=None):
  """Outcomes of appending `steps`, creating items of `items` steps, then
  flushing and closing a Writer of 4 steps; and the table's size (once it
  is `expected_size`, or after 10 s)."""
  writer = client.writer(4, chunk_length=chunk_length)
  outcomes = [util.outcome(lambda s=s: writer.append(s)) for s in steps]
  outcomes += [util.outcome(lambda n=n: writer.create_item('t', n, 1.0))
               for n in items]
  outcomes += [util.outcome(writer.flush), util.outcome(writer.close)]
  return {'outcomes': outcomes, 'size': _size(client, expected=expected_size)}


def scenario_writer_dtype_change_in_a_chunk(reverb, env):
  client = _client(reverb, env)
  return _writer_steps(client, [[np.int32(1)], [np.float32(1)]], [1, 2], 0)


def scenario_writer_dtype_change_across_chunks(reverb, env):
  client = _client(reverb, env)
  return _writer_steps(client, [[np.int32(1)], [np.float32(1)]], [1, 2], 2,
                       chunk_length=1)


def scenario_writer_shape_change_completing_a_chunk(reverb, env):
  client = _client(reverb, env)
  result = _writer_steps(
      client, [[np.zeros(2), np.int8(1)], [np.zeros(3), np.int8(2)]], [2, 1],
      1, chunk_length=2)
  [[sample]] = list(client.sample('t'))
  result['kept'] = sample.data
  return result


def scenario_writer_shape_change_in_a_buffered_chunk(reverb, env):
  client = _client(reverb, env)
  return _writer_steps(
      client, [[np.zeros((2, 3), np.float32)], [np.zeros((2, 3))],
               [np.zeros((2, 4))]], [1], 0)


def scenario_writer_bad_steps_without_items(reverb, env):
  client = _client(reverb, env)
  return _writer_steps(client, [[np.zeros(2)], [np.zeros(3)]], [], 0)


def scenario_writer_dtype_change_in_a_later_column(reverb, env):
  client = _client(reverb, env)
  return _writer_steps(
      client, [[np.int8(1), np.zeros(2)], [np.int16(1), np.zeros(3)],
               [np.bool_(True), np.zeros(2)], [np.array('s'), np.zeros(2)]],
      [], 0, chunk_length=2)


def scenario_writer_dtype_names(reverb, env):
  client = _client(reverb, env)
  pairs = [(np.uint8, np.complex64), (np.float16, np.uint64),
           (np.int64, np.uint32), (np.uint16, np.complex128),
           (np.float64, np.int16)]
  errors = []
  for first, second in pairs:
    writer = client.writer(2)
    writer.append([first(1)])
    errors.append(util.outcome(lambda s=second: writer.append([s(1)])))
    writer.close()
  return errors


def scenario_writer_append_sequence_errors(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(4)
  sequences = [[np.arange(3), np.arange(2), np.int32(1)],
               [np.arange(3), np.zeros((3, 2), np.float32),
                np.array([b'a', b'b'])],
               [np.int32(1)], [np.arange(3), np.int32(1)], [],
               {'a': np.zeros((0, 2))}]
  outcomes = [util.outcome(lambda s=s: writer.append_sequence(s))
              for s in sequences]
  outcomes.append(util.outcome(lambda: writer.create_item('t', 1, 1.0)))
  writer.close()
  return outcomes


def scenario_sample_timesteps_of_an_item_with_unequal_columns(reverb, env):
  client = _client(reverb, env)
  with client.trajectory_writer(2) as writer:
    writer.append({'x': np.int32(1), 'y': np.float32(1)})
    writer.append({'x': np.int32(2)})
    writer.create_item('t', 1.0, {'x': writer.history['x'][:],
                                  'y': writer.history['y'][-2]})
  [sample] = list(client.sample('t', emit_timesteps=False))
  return {'data': sample.data,
          'timesteps': util.outcome(lambda: list(client.sample('t')))}


def scenario_sample_probabilities_of_prioritized_table(reverb, env):
  client = _client(reverb, env,
                   util.table(reverb,
                              sampler=reverb.selectors.Prioritized(1.0)))
  client.insert([np.int32(1)], priorities={'t': 1.0})
  client.insert([np.int32(3)], priorities={'t': 3.0})
  _size(client, expected=2)
  seen = {}
  for [sample] in client.sample('t', 60):
    seen[str(sample.info.priority)] = round(float(sample.info.probability), 6)
  return seen


def scenario_mutate_priorities_with_a_list(reverb, env):
  _client(reverb, env).mutate_priorities('t', updates=[(1, 1.0)])


def scenario_checkpoint_into_a_given_directory(reverb, env):
  directory = tempfile.mkdtemp()
  checkpointer = reverb.checkpointers.DefaultCheckpointer(directory)
  client = reverb.Client(env.server([util.table(reverb)],
                                    checkpointer=checkpointer))
  client.insert([np.int32(1)], priorities={'t': 1.0})
  path = client.checkpoint()
  return {'parent': os.path.dirname(path) == directory,
          'names': sorted(os.listdir(path))}


def scenario_insert_dtypes_then_sample(reverb, env):
  client = _client(reverb, env)
  data = [np.float16(1.5), np.complex64(1 + 2j), np.complex128(3 - 1j),
          np.uint64(2**63 + 1), np.int16(-7), np.uint16(9), np.bool_(False),
          np.array([['a', 'bc'], ['', 'd']]), np.array([b'\x00\xff']),
          np.zeros((2, 0, 3), np.float32), np.arange(6).reshape(2, 3).T]
  client.insert(data, priorities={'t': 1.0})
  [[sample]] = list(client.sample('t'))
  return [{'dtype': str(np.asarray(d).dtype), 'shape': np.shape(d),
           'value': repr(np.asarray(d).tolist())} for d in sample.data]


def scenario_delta_encoded_writer(reverb, env):
  client = _client(reverb, env)
  with client.writer(4, delta_encoded=True, chunk_length=4) as writer:
    for i in range(4):
      writer.append([np.full(3, i * i, np.int32), np.float32(i),
                     np.array(str(i))])
    writer.create_item('t', 3, 1.0)
  [steps] = list(client.sample('t'))
  return [s.data for s in steps]


# Calls that wait (neither package has a timeout on them by default).


def scenario_sample_of_an_empty_table_waits(reverb, env):
  client = _client(reverb, env)
  return _within(2, lambda: list(client.sample('t')))


def scenario_insert_into_a_full_queue_waits(reverb, env):
  client = _client(reverb, env, reverb.Table.queue('t', 1))
  client.insert([np.int32(1)], priorities={'t': 1.0})
  return _within(2, lambda: client.insert([np.int32(2)], priorities={'t': 1.0}))


def scenario_insert_after_the_server_stopped(reverb, env):
  del env
  server = reverb.Server([util.table(reverb)])
  client = server.localhost_client()
  client.insert([np.int32(1)], priorities={'t': 1.0})
  server.stop()
  outcome = _within(30, lambda: client.insert([np.int32(1)],
                                              priorities={'t': 1.0}))
  return _without_numbers(re.sub(r'localhost:\d+', 'ADDRESS', str(outcome)))


def scenario_sample_after_the_server_stopped(reverb, env):
  # dm-reverb's sampler waits for the server forever.
  del env
  server = reverb.Server([util.table(reverb)])
  client = server.localhost_client()
  client.insert([np.int32(1)], priorities={'t': 1.0})
  server.stop()
  outcome = _within(15, lambda: list(client.sample('t')))
  return re.sub(r'localhost:\d+', 'ADDRESS', str(outcome))


def scenario_insert_with_priorities_as_pairs(reverb, env):
  _client(reverb, env).insert([np.int32(1)], priorities=[('t', 1.0)])


def scenario_table_names_not_strings(reverb, env):
  client = _client(reverb, env)
  writer = client.writer(2)
  writer.append([np.int32(1)])
  outcomes = [util.type_error(lambda: list(client.sample(1))),
              util.type_error(lambda: client.mutate_priorities(1, {})),
              util.type_error(lambda: client.reset(1)),
              util.type_error(lambda: writer.create_item(1, 1, 1.0))]
  writer.close()
  return outcomes


def scenario_server_info_with_a_float_timeout(reverb, env):
  client = _client(reverb, env)
  return util.outcome(lambda: sorted(client.server_info(timeout=0.5)))


def scenario_sample_probabilities_by_priority_exponent(reverb, env):
  results = []
  for exponent, priorities in ((-1, [1, 4]), (0, [1, 4]), (1, [0, 2]),
                               (1, [0, 0]), (2, [1, 3]), (0.5, [0, 0, 4]),
                               (-1, [0, 2])):
    client = _client(reverb, env, util.table(
        reverb, sampler=reverb.selectors.Prioritized(exponent)))
    for priority in priorities:
      client.insert([np.float32(priority)], priorities={'t': priority})
    _size(client, expected=len(priorities))
    seen = {}
    for [sample] in client.sample('t', 200):  # Every item, surely.
      seen[str(sample.info.priority)] = round(float(sample.info.probability),
                                              6)
    results.append(sorted(seen.items()))
  return results
