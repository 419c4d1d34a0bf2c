"""Differential scenarios: reverb.TrajectoryWriter, its history and errors."""

import collections
import re

import numpy as np

import scenario_util as util


def _writer(reverb, env, num_keep_alive_refs=3, tables=None, **kwargs):
  client = reverb.Client(env.server(tables or [util.fifo_table(reverb)]))
  return client, client.trajectory_writer(num_keep_alive_refs, **kwargs)


def _cells(column):
  """A column history's steps: the value of each, or None where unset."""
  values = []
  for i in range(len(column)):
    try:
      values.append(column[i].numpy())
    except ValueError:
      values.append(None)
  return values


def _describe(history):
  """The history's structure (container types kept) and cells."""
  if isinstance(history, dict):
    return {'dict': {str(k): _describe(v) for k, v in history.items()}}
  if isinstance(history, tuple) and hasattr(history, '_fields'):
    return {type(history).__name__: [_describe(v) for v in history]}
  if isinstance(history, (list, tuple)):
    return {type(history).__name__: [_describe(v) for v in history]}
  return _cells(history)


def _error(callable_, *args, **kwargs):
  """[exception class name, message] of the call, or None if it returns;
  object reprs in the message read <WeakCellRef> and the like."""
  try:
    callable_(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    return [type(e).__name__,
            re.sub(r'<[\w.]*?(\w+) object at 0x[0-9a-f]+>', r'<\1>', str(e))]
  return None


# --- The history's structure grows with the data ------------------------------


def scenario_new_dict_key_and_omitted_field(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  writer.append({'a': np.int32(2), 'b': np.float32(3)})
  writer.append({'b': np.float32(4)})
  return _describe(writer.history)


def scenario_longer_list(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append([np.int32(1)])
  writer.append([np.int32(2), np.int32(3)])
  writer.append([np.int32(4), np.int32(5), np.int32(6)])
  return _describe(writer.history)


def scenario_longer_tuple(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append((np.int32(1),))
  writer.append((np.int32(2), np.float64(3)))
  return _describe(writer.history)


def scenario_shorter_list_later(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append([np.int32(1), np.int32(2), np.int32(3)])
  writer.append([np.int32(4)])
  return _describe(writer.history)


def scenario_list_then_longer_tuple(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append([np.int32(1)])
  writer.append((np.int32(2), np.int32(3)))
  return _describe(writer.history)


def scenario_nested_growth(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'x': {'a': np.int32(1)}})
  writer.append({'x': {'a': np.int32(2), 'b': np.int32(3)},
                 'y': [np.int32(4)]})
  writer.append({'x': {'b': np.int32(5)},
                 'y': [np.int32(6), np.int32(7)]})
  return _describe(writer.history)


def scenario_new_dict_in_a_list(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'y': [np.int32(1)]})
  writer.append({'y': [np.int32(2), {'z': np.int32(3)}]})
  return _describe(writer.history)


def scenario_new_nested_dict_key(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  writer.append({'a': np.int32(2), 'n': {'p': np.int32(3), 'q': [np.int32(4)]}})
  return _describe(writer.history)


def scenario_growth_within_a_partial_step(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1), 'b': np.int32(10)})
  writer.append({'a': np.int32(2)}, partial_step=True)
  steps_while_open = writer.episode_steps
  writer.append({'c': np.int32(30)}, partial_step=True)
  writer.append({'b': np.int32(20), 'd': [np.int32(40)]})
  writer.append({'a': np.int32(3)})
  return [steps_while_open, writer.episode_steps, _describe(writer.history)]


def scenario_partial_step_sets_a_field_twice(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)}, partial_step=True)
  return _error(writer.append, {'a': np.int32(2)})


def scenario_none_leaves_make_columns(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1), 'b': None})
  writer.append({'a': np.int32(2), 'b': np.int32(3)})
  return _describe(writer.history)


def scenario_int_dict_keys_grow(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({1: np.int32(1)})
  writer.append({1: np.int32(2), 2: np.int32(3)})
  return _describe(writer.history)


def scenario_dict_then_list(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  return _error(writer.append, [np.int32(2)])


def scenario_leaf_then_dict(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append(np.int32(1))
  return _error(writer.append, {'a': np.int32(2)})


def scenario_dict_then_leaf(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  return _error(writer.append, np.int32(2))


def scenario_python_values_and_their_dtypes(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'i': 1, 'f': 1.5, 'b': True, 's': 'text', 'y': b'bytes'})
  history = writer.history
  cells = {key: [str(history[key][-1].dtype), history[key][-1].numpy()]
           for key in history}
  return [cells, _error(writer.append, {'i': 2.5}),
          _error(writer.append, {'f': 1}), _error(writer.append, {'s': 1})]


_Pair = collections.namedtuple('Pair', ['zz', 'aa'])
_Triple = collections.namedtuple('Triple', ['zz', 'aa', 'bb'])


def scenario_namedtuple_steps(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append(_Pair(np.int32(1), {'x': np.int32(2)}))
  writer.append(_Pair(np.int32(3), {'x': np.int32(4), 'y': np.int32(5)}))
  return _describe(writer.history)


def scenario_namedtuple_of_more_fields(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append(_Pair(np.int32(1), np.int32(2)))
  return _error(writer.append, _Triple(np.int32(1), np.int32(2), np.int32(3)))


def scenario_history_keeps_num_keep_alive_refs(reverb, env):
  _, writer = _writer(reverb, env, num_keep_alive_refs=2)
  for t in range(4):
    writer.append({'a': np.int32(t)})
  writer.append({'a': np.int32(4), 'b': np.int32(40)})
  return _describe(writer.history)


def scenario_history_iterates_references(reverb, env):
  _, writer = _writer(reverb, env, num_keep_alive_refs=2)
  for t in range(3):
    writer.append({'a': np.int32(t)})
  return [None if ref is None else ref.numpy() for ref in writer.history['a']]


def scenario_history_before_append(reverb, env):
  _, writer = _writer(reverb, env)
  return writer.history


def scenario_history_after_end_episode(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  writer.end_episode()
  kept = _describe(writer.history)
  writer.append({'a': np.int32(2)})
  writer.end_episode(clear_buffers=False)
  writer.append({'a': np.int32(3)})
  return [kept, _describe(writer.history), writer.episode_steps]


# --- Indexing the history -----------------------------------------------------


def _three_steps(reverb, env, num_keep_alive_refs=2):
  _, writer = _writer(reverb, env, num_keep_alive_refs=num_keep_alive_refs)
  for t in range(3):
    writer.append({'a': np.int32(t)})
  return writer


def _index_outcomes(column, indices):
  outcomes = {}
  for index in indices:
    def read(index=index):
      trajectory_column = column[index]
      return [trajectory_column.numpy(), list(trajectory_column.shape),
              trajectory_column.is_squeezed]
    try:
      outcomes[repr(index)] = read()
    except Exception:  # pylint: disable=broad-except
      outcomes[repr(index)] = _error(read)
  return outcomes


def scenario_history_indices(reverb, env):
  writer = _three_steps(reverb, env)  # Step 0 has expired.
  return _index_outcomes(writer.history['a'], [
      0, 1, 2, 4, -1, -2, -3, -4, slice(None), slice(1, None), slice(-2, None),
      slice(0, 2), slice(1, -1), slice(-9, None), slice(None, None, -1),
      slice(None, None, 2), [1, 2], [2, 0], [2, 1], [4]])


def scenario_history_indices_of_a_short_episode(reverb, env):
  writer = _three_steps(reverb, env, num_keep_alive_refs=5)
  return _index_outcomes(writer.history['a'], [
      0, 2, -3, -4, slice(None), slice(-2, None), slice(0, 2), slice(None, 2),
      slice(None, -1), slice(-3, -1), [0, 2]])


def scenario_history_index_past_the_end(reverb, env):
  # dm-reverb reads index len(history) as the oldest kept step.
  writer = _three_steps(reverb, env)
  return _index_outcomes(writer.history['a'], [3, [3]])


def scenario_history_slices_that_end_at_or_past_the_end(reverb, env):
  # dm-reverb shifts starts and stops past the end into the kept steps: [1:3]
  # of three steps is empty there, [4:9] is not.
  writer = _three_steps(reverb, env, num_keep_alive_refs=3)
  return _index_outcomes(writer.history['a'], [slice(1, 3), slice(4, 9),
                                               slice(1, 5)])


def scenario_history_slices_up_to_an_expired_step(reverb, env):
  # dm-reverb leaves expired steps out of slices without a start.
  writer = _three_steps(reverb, env)
  return _index_outcomes(writer.history['a'], [slice(None, -1),
                                               slice(None, 2)])


def scenario_history_numpy_integer_index(reverb, env):
  # dm-reverb takes only Python ints.
  writer = _three_steps(reverb, env)
  return _index_outcomes(writer.history['a'], [np.int64(-1)])


def scenario_history_index_of_wrong_type(reverb, env):
  writer = _three_steps(reverb, env)
  return [_error(lambda: writer.history['a']['x']),
          _error(lambda: writer.history['a'][1.0]),
          _error(lambda: writer.history['a'][-1]['x']),
          _error(lambda: writer.history['a'][-2:][1.0])]


def scenario_trajectory_column_indexing(reverb, env):
  writer = _three_steps(reverb, env, num_keep_alive_refs=3)
  column = writer.history['a'][:]
  return [column[0].numpy(), column[-1].is_squeezed, column[1:].numpy(),
          column[[2, 0]].numpy(), len(column), list(column.shape),
          str(column.dtype), _error(lambda: column[3])]


def scenario_trajectory_column_of_none(reverb, env):
  return _error(reverb.TrajectoryColumn, [None])


def scenario_trajectory_column_squeezed_with_two(reverb, env):
  writer = _three_steps(reverb, env)
  refs = list(writer.history['a'][-2:])
  return _error(reverb.TrajectoryColumn, refs, squeeze=True)


def scenario_trajectory_column_of_expired_references(reverb, env):
  writer = _three_steps(reverb, env)
  column = writer.history['a'][-2:]
  for t in range(3):
    writer.append({'a': np.int32(t)})
  return [[ref.expired for ref in column], _error(column.numpy)]


def scenario_cell_reference(reverb, env):
  _, writer = _writer(reverb, env, num_keep_alive_refs=1)
  writer.append({'a': np.zeros([2, 3], np.float32)})
  [ref] = list(writer.history['a'][-1])
  alive = [ref.expired, list(ref.shape), str(ref.dtype), ref.numpy()]
  writer.append({'a': np.zeros([2, 3], np.float32)})
  return [alive, ref.expired, _error(ref.numpy), _error(lambda: ref.shape),
          _error(lambda: ref.dtype)]


# --- Append errors ------------------------------------------------------------


def scenario_append_of_another_dtype(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'scalar': np.int64(1)})
  return _error(writer.append, {'scalar': np.float64(1)})


def scenario_append_of_other_dtypes(reverb, env):
  _, writer = _writer(reverb, env)
  dtypes = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16,
            np.uint32, np.uint64, np.float16, np.float32, np.complex64,
            np.complex128]
  writer.append([np.zeros([], d) for d in dtypes] + [np.array('s')])
  return [_error(writer.append, [None] * i + [np.int64(0)])
          for i in range(len(dtypes) + 1)]


def scenario_append_of_another_shape(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'x': [np.zeros([2, 3], np.float32)]})
  return [_error(writer.append, {'x': [np.zeros([3], np.float32)]}),
          _error(writer.append, {'x': [np.zeros([2, 4], np.float32)]}),
          _error(writer.append, {'x': [np.float32(1)]})]


def scenario_append_of_an_unsupported_dtype(reverb, env):
  _, writer = _writer(reverb, env)
  # dm-reverb's message is pybind11's, naming its argument types.
  return _error(writer.append, {'x': np.array([object()])})[0]


def scenario_bad_append_appends_nothing(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1), 'b': np.int32(1)})
  error = _error(writer.append, {'a': np.int32(2), 'b': np.float32(2)})
  return [error, writer.episode_steps, _describe(writer.history)]


# --- create_item --------------------------------------------------------------


def _sample_all(client, table='t'):
  size = client.server_info()[table].current_size
  if not size:
    return []
  return [[column.tolist() for column in sample.data]
          for sample in client.sample(table, num_samples=size,
                                      emit_timesteps=False)]


def scenario_items_of_grown_history(reverb, env):
  client, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  writer.append({'a': np.int32(2), 'b': [np.float32(3)]})
  writer.append({'a': np.int32(3), 'b': [np.float32(4), np.int64(5)]})
  writer.create_item('t', 1.0, {'a': writer.history['a'][-3:],
                                'b': writer.history['b'][0][-2:],
                                'c': writer.history['b'][1][-1]})
  writer.flush()
  return _sample_all(client)


def scenario_create_item_of_a_leaf_that_is_no_column(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(1)})
  return _error(writer.create_item, 't', 1.0, {'a': 1})


def scenario_create_item_with_expired_references(reverb, env):
  _, writer = _writer(reverb, env, num_keep_alive_refs=2)
  writer.append({'a': np.int32(0)})
  old = writer.history['a'][-1]
  for t in range(1, 4):
    writer.append({'a': np.int32(t)})
  return _error(writer.create_item, 't', 1.0, {'x': writer.history['a'][-1],
                                               'y': old})


def scenario_create_item_of_no_cells(reverb, env):
  # An empty column next to others: dm-reverb crashes (not run here).
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)})
  return [_error(writer.create_item, 't', 1.0, reverb.TrajectoryColumn([])),
          _error(writer.create_item, 't', 1.0, []),
          _error(writer.create_item, 't', 1.0, {})]


def scenario_create_item_of_mixed_cells(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.zeros([2], np.float32), 'b': np.zeros([3], np.float32),
                 'c': np.zeros([2], np.float64)})
  history = writer.history
  return [_error(writer.create_item, 't', 1.0, reverb.TrajectoryColumn(
      list(history['a'][-1]) + list(history['b'][-1]))),
          _error(writer.create_item, 't', 1.0, [history['a'][-1],
                                                reverb.TrajectoryColumn(
              list(history['a'][-1]) + list(history['c'][-1]))])]


def scenario_create_item_with_nan_priority(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)})
  return _error(writer.create_item, 't', float('nan'), writer.history['a'][-1])


def scenario_create_item_in_an_unknown_table(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)})
  return _error(writer.create_item, 'missing', 1.0, writer.history['a'][-1])


def scenario_create_item_in_an_unknown_table_unvalidated(reverb, env):
  _, writer = _writer(reverb, env, validate_items=False)
  writer.append({'a': np.int32(0)})
  writer.create_item('missing', 1.0, writer.history['a'][-1])
  return _error(writer.flush, timeout_ms=5000)


# --- flush, end_episode, configure, close -------------------------------------


def _blocked(reverb, env):
  """A writer of two items to a table that takes one."""
  table = reverb.Table(name='t', sampler=reverb.selectors.Fifo(),
                       remover=reverb.selectors.Fifo(), max_size=1,
                       rate_limiter=reverb.rate_limiters.Queue(1))
  client, writer = _writer(reverb, env, num_keep_alive_refs=1, tables=[table])
  for t in range(2):
    writer.append(np.int32(t))
    writer.create_item('t', 1.0, writer.history[-1])
  return client, writer


def scenario_flush_with_negative_block_until(reverb, env):
  _, writer = _writer(reverb, env)
  return _error(writer.flush, block_until_num_items=-1)


def scenario_flush_timeout(reverb, env):
  client, writer = _blocked(reverb, env)
  error = _error(writer.flush, timeout_ms=100)
  ok = _error(writer.flush, block_until_num_items=1, timeout_ms=10000)
  return [error, ok, _sample_all(client)]


def scenario_flush_with_timeouts_that_mean_forever(reverb, env):
  client, writer = _writer(reverb, env, num_keep_alive_refs=1)
  for t in range(3):
    writer.append(np.int32(t))
    writer.create_item('t', 1.0, writer.history[-1])
  return [_error(writer.flush, timeout_ms=0),
          _error(writer.flush, 0, -5), _sample_all(client)]


def scenario_end_episode_timeout(reverb, env):
  client, writer = _blocked(reverb, env)
  error = _error(writer.end_episode, timeout_ms=100)
  return [error, writer.episode_steps, len(writer.history)]


def scenario_end_episode_zero_timeout(reverb, env):
  _, writer = _blocked(reverb, env)
  return [_error(writer.end_episode, timeout_ms=0), writer.episode_steps]


def scenario_end_episode_negative_timeout(reverb, env):
  _, writer = _blocked(reverb, env)
  return [_error(writer.end_episode, timeout_ms=-5), writer.episode_steps]


def scenario_end_episode_with_an_open_partial_step(reverb, env):
  # dm-reverb keeps the step open in its history but not in C++: the next
  # append of a field set in it fails.
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)}, partial_step=True)
  writer.end_episode(clear_buffers=False)
  error = _error(writer.append, {'a': np.int32(1)})
  return [error, writer.episode_steps, _describe(writer.history)]


def scenario_end_episode_arguments(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append(np.int32(0))
  return [_error(writer.end_episode, False, 1000), writer.episode_steps,
          _error(writer.end_episode, clear_buffers=True, timeout_ms=None)]


def scenario_configure_errors(reverb, env):
  _, writer = _writer(reverb, env)
  return [_error(writer.configure, ('a',), num_keep_alive_refs=0,
                 max_chunk_length=None),
          _error(writer.configure, ('a',), num_keep_alive_refs=2,
                 max_chunk_length=3),
          _error(writer.configure, ('a',), num_keep_alive_refs=2,
                 max_chunk_length=0)]


def scenario_configure_a_column_before_its_first_step(reverb, env):
  # dm-reverb's history of the column keeps the writer's 2 steps only.
  _, writer = _writer(reverb, env, num_keep_alive_refs=2)
  writer.configure(('a',), num_keep_alive_refs=4, max_chunk_length=2)
  for t in range(4):
    writer.append({'a': np.int32(t)})
  return _index_outcomes(writer.history['a'], [slice(None)])


def scenario_configure_a_column_with_buffered_steps(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)})
  return _error(writer.configure, ('a',), num_keep_alive_refs=2,
                max_chunk_length=1)


def scenario_trajectory_writer_of_no_keep_alive_refs(reverb, env):
  client = reverb.Client(env.server([util.fifo_table(reverb)]))
  return _error(client.trajectory_writer, 0)


def scenario_use_after_close(reverb, env):
  _, writer = _writer(reverb, env)
  writer.append({'a': np.int32(0)})
  column = writer.history['a'][-1]
  writer.close()
  return [_error(writer.append, {'a': np.int32(1)}),
          _error(writer.append, {'a': np.int32(1)}, partial_step=True),
          _error(writer.create_item, 't', 1.0, column),
          _error(writer.flush),
          _error(writer.end_episode),
          _error(writer.close)]


def scenario_context_manager_flushes(reverb, env):
  client = reverb.Client(env.server([util.fifo_table(reverb)]))
  with client.trajectory_writer(1) as writer:
    writer.append(np.int32(7))
    writer.create_item('t', 1.0, writer.history[-1])
  return _sample_all(client)


# --- The internal writer's interface ------------------------------------------


class _FakeCellRef:

  def __init__(self, value):
    self.value = value
    self.expired = False
    self.shape = list(np.shape(value))
    self.dtype = np.asarray(value).dtype

  def numpy(self):
    return np.asarray(self.value)

  def __repr__(self):
    return f'ref({self.value!r})'


class _FakeInternalWriter:
  """Records how reverb.TrajectoryWriter calls its internal writer."""

  max_num_keep_alive_refs = 2

  def __init__(self):
    self.calls = []
    self.episode_steps = 0

  def _record(self, name, *args, **kwargs):
    self.calls.append([name, repr(args), repr(sorted(kwargs.items()))])

  def Append(self, *args, **kwargs):  # pylint: disable=invalid-name
    self._record('Append', *args, **kwargs)
    self.episode_steps += 1
    return [None if x is None else _FakeCellRef(x) for x in args[0]]

  def AppendPartial(self, *args, **kwargs):  # pylint: disable=invalid-name
    self._record('AppendPartial', *args, **kwargs)
    return [None if x is None else _FakeCellRef(x) for x in args[0]]

  def __getattr__(self, name):
    if name.startswith('_'):
      raise AttributeError(name)
    return lambda *args, **kwargs: self._record(name, *args, **kwargs)


def scenario_calls_of_the_internal_writer(reverb, env):
  del env
  internal = _FakeInternalWriter()
  writer = reverb.TrajectoryWriter(internal)
  writer.configure(('b',), num_keep_alive_refs=2, max_chunk_length=1)
  writer.append({'a': 1})
  writer.append({'a': 2, 'b': [3]}, partial_step=True)
  writer.append({'b': [None, 4]})
  writer.create_item('t', 0.5, {'x': writer.history['a'][-2:],
                                'y': writer.history['b'][1][-1]})
  writer.flush()
  writer.flush(1, 100)
  writer.flush(block_until_num_items=2, timeout_ms=0)
  writer.end_episode()
  writer.end_episode(False, 50)
  writer.end_episode(clear_buffers=True, timeout_ms=None)
  steps = writer.episode_steps
  writer.close()
  # The chunker options are pybind objects: name their type only.
  calls = [[name, re.sub(r'<reverb\.\w+\.(\w+) object at 0x[0-9a-f]+>',
                         r'<\1>', args), kwargs]
           for name, args, kwargs in internal.calls]
  return [calls, steps,
          [[None if ref is None else ref.value for ref in column]
           for column in (writer.history['a'], writer.history['b'][0],
                          writer.history['b'][1])]]


def scenario_timeouts_of_the_internal_writer(reverb, env):
  del env

  class Blocked(_FakeInternalWriter):

    def Flush(self, *args):  # pylint: disable=invalid-name
      raise RuntimeError('Timeout exceeded with 1 items waiting.')

    def EndEpisode(self, *args):  # pylint: disable=invalid-name
      raise RuntimeError('Timeout exceeded with 1 items waiting.')

  writer = reverb.TrajectoryWriter(Blocked())
  return [_error(writer.flush), _error(writer.flush, timeout_ms=20),
          _error(writer.end_episode), _error(writer.end_episode, True, 30)]
