"""reverb._tree flattens nests as dm-tree does (dicts in sorted key order),
on its fast path for a dict of leaves as on its general one."""

import collections

import numpy as np

from reverb import _tree


class NewLeaf:
  """A leaf type _tree has not seen before the test."""


def test_a_dict_of_leaves_flattens_with_paths_in_key_order():
  arrays = {'b': np.zeros(2), 'a': np.int32(1), 'c': None}
  expected = [(('a',), arrays['a']), (('b',), arrays['b']),
              (('c',), None)]
  # Twice: the second call takes the fast path for known leaf types.
  assert _tree.flatten_with_path(arrays) == expected
  assert _tree.flatten_with_path(arrays) == expected
  # A leaf of a type not seen yet, then known.
  leaf = NewLeaf()
  for _ in range(2):
    assert _tree.flatten_with_path({'z': leaf, 'y': 1.5}) == [
        (('y',), 1.5), (('z',), leaf)]


def test_nests_in_a_dict_flatten_with_their_full_paths():
  point = collections.namedtuple('Point', ['x', 'y'])
  nest = {'obs': {'pixels': 'p', 'state': ['s0', 's1']}, 'act': point(1, 2)}
  expected = [(('act', 'x'), 1), (('act', 'y'), 2),
              (('obs', 'pixels'), 'p'), (('obs', 'state', 0), 's0'),
              (('obs', 'state', 1), 's1')]
  for _ in range(2):
    assert _tree.flatten_with_path(nest) == expected
  assert _tree.flatten(nest) == [1, 2, 'p', 's0', 's1']
  assert _tree.flatten_with_path('leaf') == [((), 'leaf')]
  assert _tree.flatten_with_path({}) == []
