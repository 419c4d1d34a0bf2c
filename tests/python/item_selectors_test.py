"""reverb.selectors: the selector classes and their options."""

import pytest

from reverb import item_selectors
from reverb import pybind
from reverb.cc import schema_pb2


def options(selector):
  return schema_pb2.KeyDistributionOptions.FromString(selector.options())


@pytest.mark.parametrize('make, kind, deterministic', [
    (item_selectors.Fifo, 'fifo', True),
    (item_selectors.Lifo, 'lifo', True),
    (item_selectors.Uniform, 'uniform', False),
    (lambda: item_selectors.Prioritized(0.6), 'prioritized', False),
    (item_selectors.MinHeap, 'heap', True),
    (item_selectors.MaxHeap, 'heap', True),
])
def test_selector_options(make, kind, deterministic):
  selector = make()
  assert isinstance(selector, pybind.ItemSelector)
  assert options(selector).WhichOneof('distribution') == kind
  assert options(selector).is_deterministic == deterministic


def test_heaps_are_heap_selectors():
  assert isinstance(item_selectors.MinHeap(), pybind.HeapSelector)
  assert options(item_selectors.MinHeap()).heap.min_heap
  assert not options(item_selectors.MaxHeap()).heap.min_heap


def test_prioritized_keeps_its_exponent_and_repr():
  selector = item_selectors.Prioritized(priority_exponent=0.25)
  assert options(selector).prioritized.priority_exponent == 0.25
  assert repr(selector) == 'PrioritizedSelector(priority_exponent=0.25)'


def test_selector_from_proto_round_trips():
  for selector in (item_selectors.Lifo(), item_selectors.Prioritized(2.0),
                   item_selectors.MaxHeap()):
    rebuilt = pybind.selector_from_proto(selector.options())
    assert rebuilt.options() == selector.options()
    assert type(rebuilt) is type(selector)


def test_selector_from_proto_rejects_empty_options():
  with pytest.raises(ValueError):
    pybind.selector_from_proto(b'')
