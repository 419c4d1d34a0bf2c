"""Flattening and rebuilding of nests, as dm-tree does it.

A nest is made of dicts (values in sorted key order), lists, tuples and
namedtuples; anything else (arrays, numbers, strings, None) is a leaf.
"""

import collections.abc
from typing import Any, Iterator, List, Sequence


def _is_namedtuple(value: Any) -> bool:
  return isinstance(value, tuple) and hasattr(value, '_fields')


def _children(value: Any) -> List[Any]:
  if isinstance(value, collections.abc.Mapping):
    return [value[key] for key in sorted(value)]
  return list(value)


def _is_nested(value: Any) -> bool:
  return isinstance(value, (collections.abc.Mapping, list, tuple))


def flatten(structure: Any) -> List[Any]:
  """The leaves of `structure`, depth first."""
  if not _is_nested(structure):
    return [structure]
  leaves = []
  for child in _children(structure):
    leaves.extend(flatten(child))
  return leaves


def _rebuild(structure: Any, leaves: Iterator[Any]) -> Any:
  if not _is_nested(structure):
    return next(leaves)
  if isinstance(structure, collections.abc.Mapping):
    built = {key: _rebuild(structure[key], leaves) for key in sorted(structure)}
    return type(structure)((key, built[key]) for key in structure)
  children = [_rebuild(child, leaves) for child in structure]
  if _is_namedtuple(structure):
    return type(structure)(*children)
  return type(structure)(children)


def unflatten_as(structure: Any, flat: Sequence[Any]) -> Any:
  """`flat` rebuilt into the shape of `structure`.

  Raises:
    ValueError: If `flat` does not have one value per leaf of `structure`.
  """
  num_leaves = len(flatten(structure))
  if num_leaves != len(flat):
    raise ValueError(
        f'Structure has {num_leaves} leaves but {len(flat)} values were given.')
  return _rebuild(structure, iter(flat))
