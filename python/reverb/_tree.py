"""Flattening and rebuilding of nests, as dm-tree does it.

A nest is made of dicts (values in sorted key order), lists, tuples and
namedtuples; anything else (arrays, numbers, strings, None) is a leaf.
"""

import collections.abc
from typing import Any, Callable, Iterator, List, Sequence, Tuple

# Whether values of a type are nests, decided once per type (isinstance on
# the Mapping ABC is slow, and this runs for every leaf of every step).
_NESTED_BY_TYPE = {dict: True, list: True, tuple: True}


def _is_namedtuple(value: Any) -> bool:
  return isinstance(value, tuple) and hasattr(value, '_fields')


def _children(value: Any) -> List[Any]:
  if type(value) is dict or isinstance(value, collections.abc.Mapping):
    return [value[key] for key in sorted(value)]
  return list(value)


def _is_nested(value: Any) -> bool:
  value_type = type(value)
  nested = _NESTED_BY_TYPE.get(value_type)
  if nested is None:
    nested = issubclass(value_type, (collections.abc.Mapping, list, tuple))
    _NESTED_BY_TYPE[value_type] = nested
  return nested


def _leaf_dict_keys(structure: Any):
  """The keys of `structure`, sorted, if it is a dict of leaves of types
  seen before (the common case: a step, or an item of named columns); else
  None."""
  if type(structure) is not dict:
    return None
  keys = sorted(structure)
  for key in keys:
    if _NESTED_BY_TYPE.get(type(structure[key]), True):  # Nested, or new.
      return None
  return keys


def flatten(structure: Any) -> List[Any]:
  """The leaves of `structure`, depth first."""
  keys = _leaf_dict_keys(structure)
  if keys is not None:
    return [structure[key] for key in keys]
  if not _is_nested(structure):
    return [structure]
  leaves = []
  _flatten_into(structure, leaves)
  return leaves


def _flatten_into(structure: Any, leaves: List[Any]):
  # Runs per step and per item: the type test of _is_nested is inlined.
  for child in _children(structure):
    nested = _NESTED_BY_TYPE.get(type(child))
    if nested is None:
      nested = _is_nested(child)
    if nested:
      _flatten_into(child, leaves)
    else:
      leaves.append(child)


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


def _items(value: Any):
  """(path element, child) pairs of a nested value, in flattening order."""
  if type(value) is dict or isinstance(value, collections.abc.Mapping):
    return [(key, value[key]) for key in sorted(value)]
  if _is_namedtuple(value):
    return list(zip(value._fields, value))
  return list(enumerate(value))


def flatten_with_path(structure: Any) -> List[Tuple[Tuple[Any, ...], Any]]:
  """(path, leaf) pairs; a path holds dict keys, namedtuple field names and
  sequence indices, as dm-tree's flatten_with_path."""
  keys = _leaf_dict_keys(structure)
  if keys is not None:
    return [((key,), structure[key]) for key in keys]
  result = []
  _flatten_with_path_into(structure, (), result)
  return result


def _flatten_with_path_into(structure: Any, prefix: Tuple[Any, ...],
                            result: list):
  if not _is_nested(structure):
    result.append((prefix, structure))
    return
  for key, child in _items(structure):
    _flatten_with_path_into(child, prefix + (key,), result)


def map_structure_with_path(fn: Callable[[Tuple[Any, ...], Any], Any],
                            structure: Any) -> Any:
  """`structure` with each leaf replaced by fn(path, leaf)."""
  return unflatten_as(structure, [fn(path, leaf)
                                  for path, leaf in flatten_with_path(structure)])


def map_structure(fn: Callable[[Any], Any], structure: Any) -> Any:
  return unflatten_as(structure, [fn(leaf) for leaf in flatten(structure)])


def union(a: Any, b: Any) -> Any:
  """A structure holding the fields of both `a` and `b` (leaves of `a` win).

  Mappings merge their keys. Lists and tuples merge element-wise, keep the
  extra elements of the longer one and the type of `a` (a list and a tuple
  merge); namedtuples merge only with their own type. Raises ValueError for
  structures that cannot be merged (a leaf and a nest, a mapping and a
  sequence).
  """
  a_nested, b_nested = _is_nested(a), _is_nested(b)
  if not a_nested and not b_nested:
    return a
  a_mapping = isinstance(a, collections.abc.Mapping)
  b_mapping = isinstance(b, collections.abc.Mapping)
  if a_nested != b_nested or a_mapping != b_mapping or (
      (_is_namedtuple(a) or _is_namedtuple(b)) and type(a) is not type(b)):
    raise ValueError(f'Cannot merge structures {a!r} and {b!r}.')
  if a_mapping:
    merged = {key: union(a[key], b[key]) if key in b else a[key] for key in a}
    merged.update({key: b[key] for key in b if key not in a})
    return type(a)(merged) if not isinstance(a, dict) else merged
  children = ([union(x, y) for x, y in zip(a, b)] + list(a[len(b):]) +
              list(b[len(a):]))
  return type(a)(*children) if _is_namedtuple(a) else type(a)(children)
