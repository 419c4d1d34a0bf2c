"""Tables (and, with the gRPC service, the server that hosts them)."""

import abc
from typing import Optional, Sequence

from reverb import item_selectors
from reverb import pybind
from reverb import rate_limiters
from reverb import reverb_types
from reverb import structured_value


class TableExtensionBase(metaclass=abc.ABCMeta):
  """Base of table extensions (hooks on insert, sample, update, delete)."""

  @abc.abstractmethod
  def build_internal_extensions(
      self, table_name: str) -> Sequence[pybind.TableExtension]:
    """Creates the C++ extensions to attach to the table `table_name`."""


class Table:
  """A table of items: what is stored, how it is sampled and evicted.

  Args:
    name: Name of the table, unique within a server.
    sampler: Selector (`reverb.selectors`) that picks the items to sample.
    remover: Selector that picks the item to evict when the table is full.
    max_size: Most items the table holds; inserting into a full table evicts
      the remover's pick (possibly the new item itself).
    rate_limiter: `reverb.rate_limiters` object controlling when inserts and
      samples may proceed.
    max_times_sampled: An item is deleted after this many samples; values
      < 1 mean unlimited.
    extensions: Table extensions (none are available in this build; any
      extension that builds C++ extensions raises NotImplementedError).
    signature: Optional nest of `tf.TensorSpec` or `reverb.specs.TensorSpec`
      describing the items' data.

  Raises:
    ValueError: If `name` is empty, `max_size` < 1 or the signature holds
      something other than tensor specs.
  """

  def __init__(self,
               name: str,
               sampler: reverb_types.SelectorType,
               remover: reverb_types.SelectorType,
               max_size: int,
               rate_limiter: rate_limiters.RateLimiter,
               max_times_sampled: int = 0,
               extensions: Sequence[TableExtensionBase] = (),
               signature: Optional[reverb_types.SpecNest] = None):
    serialized_signature = None
    if signature is not None:
      serialized_signature = structured_value.encode(
          signature).SerializeToString()
    internal_extensions = []
    for extension in extensions:
      internal_extensions.extend(extension.build_internal_extensions(name))
    self.internal_table = pybind.Table(
        name=name,
        sampler=sampler,
        remover=remover,
        max_size=max_size,
        max_times_sampled=max_times_sampled,
        rate_limiter=rate_limiter.internal_limiter,
        extensions=internal_extensions,
        signature=serialized_signature)
    self._extensions = tuple(extensions)
    self._signature = signature

  @classmethod
  def queue(cls,
            name: str,
            max_size: int,
            extensions: Sequence[TableExtensionBase] = (),
            signature: Optional[reverb_types.SpecNest] = None) -> 'Table':
    """A FIFO queue: each item is sampled once, oldest first; inserts block
    while `max_size` items wait to be sampled."""
    return cls._single_use(name, item_selectors.Fifo,
                           rate_limiters.Queue(max_size), max_size,
                           extensions, signature)

  @classmethod
  def stack(cls,
            name: str,
            max_size: int,
            extensions: Sequence[TableExtensionBase] = (),
            signature: Optional[reverb_types.SpecNest] = None) -> 'Table':
    """A LIFO stack: each item is sampled once, newest first."""
    return cls._single_use(name, item_selectors.Lifo,
                           rate_limiters.Stack(max_size), max_size,
                           extensions, signature)

  @classmethod
  def _single_use(cls, name, selector, rate_limiter, max_size, extensions,
                  signature) -> 'Table':
    """A table whose items are sampled once, in `selector`'s order."""
    return cls(
        name=name,
        sampler=selector(),
        remover=selector(),
        max_size=max_size,
        max_times_sampled=1,
        rate_limiter=rate_limiter,
        extensions=extensions,
        signature=signature)

  @property
  def name(self) -> str:
    return self.internal_table.name()

  @property
  def info(self) -> reverb_types.TableInfo:
    return reverb_types.TableInfo.from_serialized_proto(
        self.internal_table.info())

  def can_sample(self, num_samples: int) -> bool:
    """Whether the rate limiter would allow `num_samples` samples now."""
    return self.internal_table.can_sample(num_samples)

  def can_insert(self, num_inserts: int) -> bool:
    """Whether the rate limiter would allow `num_inserts` inserts now."""
    return self.internal_table.can_insert(num_inserts)

  def replace(self,
              name: Optional[str] = None,
              sampler: Optional[reverb_types.SelectorType] = None,
              remover: Optional[reverb_types.SelectorType] = None,
              max_size: Optional[int] = None,
              rate_limiter: Optional[rate_limiters.RateLimiter] = None,
              max_times_sampled: Optional[int] = None,
              extensions: Optional[Sequence[TableExtensionBase]] = None,
              signature: Optional[reverb_types.SpecNest] = None) -> 'Table':
    """A new, empty table with this one's settings except those given."""
    info = self.info
    if rate_limiter is None:
      limiter_info = info.rate_limiter_info
      rate_limiter = rate_limiters.RateLimiter(
          samples_per_insert=limiter_info.samples_per_insert,
          min_size_to_sample=limiter_info.min_size_to_sample,
          min_diff=limiter_info.min_diff,
          max_diff=limiter_info.max_diff)
    return Table(
        name=name or info.name,
        sampler=sampler or pybind.selector_from_proto(
            info.sampler_options.SerializeToString()),
        remover=remover or pybind.selector_from_proto(
            info.remover_options.SerializeToString()),
        max_size=max_size or info.max_size,
        rate_limiter=rate_limiter,
        max_times_sampled=(info.max_times_sampled
                           if max_times_sampled is None else max_times_sampled),
        extensions=self._extensions if extensions is None else extensions,
        signature=signature or self._signature)

  def __repr__(self):
    return repr(self.internal_table)
