"""reverb.Table: construction, validation, info, signatures and the
low-level item access of reverb.pybind.Table."""

import collections
import threading

import numpy as np
import pytest

import reverb
from reverb import rate_limiters
from reverb import specs
from reverb.cc import schema_pb2


def make_table(**overrides):
  kwargs = dict(name='table', sampler=reverb.selectors.Uniform(),
                remover=reverb.selectors.Fifo(), max_size=10,
                rate_limiter=rate_limiters.MinSize(1))
  kwargs.update(overrides)
  return reverb.Table(**kwargs)


def sample_keys(table, batch_size=1, timeout_ms=10_000):
  return [schema_pb2.SampleInfo.FromString(info).item.key
          for info, _ in table.internal_table.sample(batch_size, timeout_ms)]


@pytest.mark.parametrize('overrides', [
    dict(name=''), dict(max_size=0), dict(max_size=-5)])
def test_constructor_rejects_bad_arguments(overrides):
  with pytest.raises(ValueError):
    make_table(**overrides)


def test_signature_must_hold_tensor_specs():
  with pytest.raises(ValueError, match='Unsupported signature spec'):
    make_table(signature={'a': 3})
  with pytest.raises(ValueError, match='Unsupported signature spec'):
    make_table(signature=[specs.TensorSpec([1], np.float32), None])


def test_extensions_that_build_nothing_are_accepted():

  class NoExtension(reverb.TableExtensionBase):

    def build_internal_extensions(self, table_name):
      return []

  assert make_table(extensions=[NoExtension()]).name == 'table'


def test_name_info_and_repr():
  table = make_table(sampler=reverb.selectors.Prioritized(0.7),
                     remover=reverb.selectors.MinHeap(), max_times_sampled=3)
  info = table.info
  assert table.name == info.name == 'table'
  assert info.sampler_options.WhichOneof('distribution') == 'prioritized'
  assert info.sampler_options.prioritized.priority_exponent == 0.7
  assert info.remover_options.heap.min_heap
  assert info.max_size == 10
  assert info.max_times_sampled == 3
  assert info.rate_limiter_info.min_size_to_sample == 1
  assert info.signature is None
  assert info.current_size == 0
  assert info == table.info
  assert 'PrioritizedSelector' in repr(table)


def test_queue_and_stack_tables():
  queue = reverb.Table.queue('queue', 5).info
  assert queue.sampler_options.fifo and queue.remover_options.fifo
  assert queue.max_times_sampled == 1
  assert queue.rate_limiter_info.max_diff == 5
  stack = reverb.Table.stack('stack', 5).info
  assert stack.sampler_options.lifo and stack.remover_options.lifo
  assert stack.max_times_sampled == 1


def test_can_sample_and_can_insert_follow_the_rate_limiter(make_item):
  table = make_table(rate_limiter=rate_limiters.Queue(1))
  assert not table.can_sample(1)
  assert table.can_insert(1)
  table.internal_table.insert_or_assign(*make_item(1))
  assert table.can_sample(1)
  assert not table.can_insert(1)


@pytest.mark.usefixtures('without_tensorflow_specs')
def test_replace_copies_unspecified_settings():
  signature = {'x': specs.TensorSpec([2], np.int32, 'x')}
  table = make_table(sampler=reverb.selectors.Prioritized(0.5),
                     rate_limiter=rate_limiters.SampleToInsertRatio(2.0, 3, 6.0),
                     max_times_sampled=4, signature=signature)
  replaced = table.replace(name='other', max_size=99)
  info, original = replaced.info, table.info
  assert info.name == 'other'
  assert info.max_size == 99
  assert info.sampler_options == original.sampler_options
  assert info.remover_options == original.remover_options
  assert info.rate_limiter_info == original.rate_limiter_info
  assert info.max_times_sampled == 4
  assert info.signature == signature


@pytest.mark.usefixtures('without_tensorflow_specs')
def test_signature_round_trips_without_tensorflow():
  Step = collections.namedtuple('Step', ['observation', 'reward'])
  signature = {
      'step': Step(specs.TensorSpec([84, 84, 4], np.uint8, 'obs'),
                   specs.TensorSpec([], np.float32, 'reward')),
      'actions': [specs.BoundedTensorSpec([None], np.int64, 0, 5, 'a')],
      'text': (specs.TensorSpec(None, str),),
  }
  decoded = make_table(signature=signature).info.signature
  assert decoded['actions'] == signature['actions']
  assert decoded['text'] == signature['text']
  step = decoded['step']
  assert type(step).__name__ == 'Step' and step._fields == Step._fields
  assert tuple(step) == tuple(signature['step'])


def test_insert_sample_and_mutate(make_item):
  table = make_table(sampler=reverb.selectors.MaxHeap(),
                     remover=reverb.selectors.Fifo(), max_size=3)
  internal = table.internal_table
  for key in range(1, 5):
    internal.insert_or_assign(*make_item(key, priority=float(key)))
  assert table.info.current_size == 3  # Key 1 was evicted (FIFO remover).
  info_bytes, chunks = internal.sample(1, 1000)[0]
  info = schema_pb2.SampleInfo.FromString(info_bytes)
  assert info.item.key == 4
  assert info.probability == 1.0
  assert info.table_size == 3
  assert info.item.times_sampled == 1
  chunk = schema_pb2.ChunkData.FromString(chunks[0])
  assert list(chunk.data.tensors[0].float_val) == [4.0]
  internal.mutate_items([(2, 100.0)], [4])
  assert sample_keys(table) == [2]


def test_sample_timeout_raises_deadline_exceeded():
  table = make_table()
  with pytest.raises(reverb.DeadlineExceededError):
    table.internal_table.sample(1, 10)


def test_insert_timeout_raises_deadline_exceeded(make_item):
  table = make_table(rate_limiter=rate_limiters.Queue(1))
  table.internal_table.insert_or_assign(*make_item(1))
  with pytest.raises(reverb.DeadlineExceededError):
    table.internal_table.insert_or_assign(*make_item(2), timeout_ms=10)


def test_bad_priority_raises_and_the_table_keeps_serving(make_item):
  table = make_table(sampler=reverb.selectors.Prioritized(1.0))
  internal = table.internal_table
  with pytest.raises(ValueError):
    internal.insert_or_assign(*make_item(1, priority=-1.0))
  with pytest.raises(ValueError):
    internal.insert_or_assign(*make_item(1, priority=float('nan')))
  internal.insert_or_assign(*make_item(2, priority=1.0))
  with pytest.raises(ValueError):
    internal.mutate_items([(2, -3.0)], [])
  assert sample_keys(table) == [2]


def test_garbage_bytes_raise_value_error():
  table = make_table()
  with pytest.raises(ValueError):
    table.internal_table.insert_or_assign(b'\xff\xff\xff', [])
  with pytest.raises(ValueError):
    reverb.pybind.Table('t', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                        1, 0, rate_limiters.MinSize(1).internal_limiter, [],
                        b'\xff\xff')


def test_blocking_sample_releases_the_gil(make_item):
  table = make_table()
  result = []
  sampler = threading.Thread(
      target=lambda: result.extend(sample_keys(table, timeout_ms=30_000)))
  sampler.start()
  # This thread can only run Python while the sampler waits without the GIL.
  table.internal_table.insert_or_assign(*make_item(7))
  sampler.join(timeout=30)
  assert result == [7]


def test_reset_and_close(make_item):
  table = make_table()
  internal = table.internal_table
  internal.insert_or_assign(*make_item(1))
  internal.reset()
  assert table.info.current_size == 0
  assert table.info.rate_limiter_info.insert_stats.completed == 0
  internal.close()
  with pytest.raises(RuntimeError, match='cancelled'):
    internal.insert_or_assign(*make_item(2))
