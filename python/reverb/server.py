"""Tables, and the server that hosts them."""

import abc
import collections
import os
from typing import Optional, Sequence
import weakref

from reverb import client as client_lib
from reverb import item_selectors
from reverb import pybind
from reverb import rate_limiters
from reverb import reverb_types
from reverb import server_limits
from reverb import security as security_lib
from reverb import structured_value
from reverb.platform import checkpointers_lib


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
    if signature:  # As dm-reverb: an empty nest is no signature.
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
    """A new, empty table with this one's settings except those given (not
    None; a given empty name or max_size 0 raises, as in the constructor)."""
    info = self.info
    if rate_limiter is None:
      limiter_info = info.rate_limiter_info
      rate_limiter = rate_limiters.RateLimiter(
          samples_per_insert=limiter_info.samples_per_insert,
          min_size_to_sample=limiter_info.min_size_to_sample,
          min_diff=limiter_info.min_diff,
          max_diff=limiter_info.max_diff)
    pick = lambda given, current: current if given is None else given
    return Table(
        name=pick(name, info.name),
        sampler=sampler or pybind.selector_from_proto(
            info.sampler_options.SerializeToString()),
        remover=remover or pybind.selector_from_proto(
            info.remover_options.SerializeToString()),
        max_size=pick(max_size, info.max_size),
        rate_limiter=rate_limiter,
        max_times_sampled=pick(max_times_sampled, info.max_times_sampled),
        extensions=pick(extensions, self._extensions),
        signature=pick(signature, self._signature))

  def __repr__(self):
    return repr(self.internal_table)


# Where a Server listens unless told otherwise: loopback only. dm-reverb
# always listens on all interfaces; set the environment variable (or pass
# `bind_address`) to "[::]" or "0.0.0.0" to serve other hosts.
BIND_ADDRESS_ENV = 'REVERB_BIND_ADDRESS'
DEFAULT_BIND_ADDRESS = 'localhost'


class Server:
  """A gRPC server hosting `tables`.

  Starts at once. Use `localhost_client()`, `reverb.Client(f'host:{port}')`
  or `reverb.Client(f'unix:{unix_socket_path}')` to talk to it; `stop()` (or
  leaving a `with` block, or the server's collection, or the interpreter's
  exit) shuts it down.

  Args:
    tables: The tables to serve (at least one, names unique).
    port: TCP port to listen on; 0 picks a free one (see `port`). None picks
      a free one too, unless `unix_socket_path` is given: then the server
      listens on the unix socket only.
    checkpointer: Where `Client.checkpoint()` saves; the tables are restored
      from its newest checkpoint at start. None: a new temporary directory
      (`checkpointers.default_checkpointer()`), as dm-reverb.
    bind_address: Interface to listen on. Defaults to the environment
      variable REVERB_BIND_ADDRESS, else "localhost" (loopback only, unlike
      dm-reverb, which listens on all interfaces). "[::]" or "0.0.0.0" serve
      other hosts.
    checkpoint_every_seconds: Also save a checkpoint this often (beyond
      dm-reverb, which saves only when asked).
    unix_socket_path: Also listen on a unix domain socket at this filesystem
      path (beyond dm-reverb), which clients on this host reach as
      `unix:PATH`; with `port=None`, listen there only. The socket file is
      removed when the server stops; a stale one at the path (left by a
      killed server) is replaced.
    limits: `reverb.ServerLimits`: what one client may cost the server (the
      chunks a writer keeps, message sizes, ...; beyond dm-reverb, which has
      no such limits). None: the defaults, far above ordinary workloads.
    tls: `reverb.TlsOptions` (beyond dm-reverb; `reverb.security`): the
      server's certificate chain and private key, which turn TLS on for the
      TCP port, and the root certificates that verify client certificates
      (mutual TLS with `require_client_auth`). None: the REVERB_TLS_*
      variables, else plaintext.
    auth_token: The token every call must carry (`authorization: Bearer
      <token>`, compared in constant time; calls without it end with
      UNAUTHENTICATED), on the TCP port and the unix socket. None:
      REVERB_AUTH_TOKEN or REVERB_AUTH_TOKEN_FILE, else none. A server that
      listens beyond loopback with neither TLS nor a token prints a warning.
    metrics_port: Serve Prometheus metrics over HTTP at `/metrics` on this
      port (beyond dm-reverb; 0 picks a free one, see `metrics_port`), on
      `bind_address` (loopback for a server on its unix socket only); plain
      HTTP without the auth token, whatever `tls` says (metrics hold counts
      and table names, no data). None: no metrics port. The metric names
      are listed in docs/concepts.md, "Metrics".

  Raises:
    ValueError: If there are no tables or two share a name, or the unix
      socket path is too long, its directory does not exist, or a file that
      is not a socket is there, or `tls` is incomplete (a chain without its
      key, client roots without a chain) or names a file that cannot be
      read, or the metrics port is out of range or cannot be bound.
    RuntimeError: If a server already listens on the unix socket path.
  """

  def __init__(self,
               tables: Optional[Sequence[Table]] = None,
               port: Optional[int] = None,
               checkpointer: Optional[
                   checkpointers_lib.CheckpointerBase] = None,
               *,
               bind_address: Optional[str] = None,
               checkpoint_every_seconds: Optional[float] = None,
               unix_socket_path: Optional[str] = None,
               limits: Optional[server_limits.ServerLimits] = None,
               tls: Optional[security_lib.TlsOptions] = None,
               auth_token: Optional[str] = None,
               metrics_port: Optional[int] = None):
    if not tables:
      raise ValueError('At least one table must be provided')
    names = collections.Counter(table.name for table in tables)
    duplicates = [name for name, count in names.items() if count > 1]
    if duplicates:
      raise ValueError('Multiple items in tables have the same name: '
                       f'{", ".join(duplicates)}')
    if checkpointer is None:
      checkpointer = checkpointers_lib.default_checkpointer()
    if checkpoint_every_seconds is not None and checkpoint_every_seconds <= 0:
      raise ValueError('checkpoint_every_seconds must be > 0')
    if bind_address is None:
      bind_address = os.environ.get(BIND_ADDRESS_ENV, DEFAULT_BIND_ADDRESS)
    if port is None and not unix_socket_path:
      port = 0
    limits = limits or server_limits.ServerLimits()
    security = security_lib.server_security(tls, auth_token)
    self._server = pybind.Server(
        [table.internal_table for table in tables], port,
        checkpointer.internal_checkpointer(), bind_address,
        checkpoint_every_seconds, os.fspath(unix_socket_path or ''),
        limits.to_internal(), security, metrics_port)
    # What localhost_client() needs.
    self._client_tls = (security_lib.TlsOptions(
        root_certificates=security.certificate_chain)
                        if security.certificate_chain else None)
    self._auth_token = security.auth_token or None
    self._port = None if port is None else self._server.port
    self._metrics_port = (None if metrics_port is None else
                          self._server.metrics_port)
    self._bind_address = bind_address
    self._unix_socket_path = (os.fspath(unix_socket_path)
                              if unix_socket_path else None)
    # Stops the server at the interpreter's exit too, even if something
    # still holds it then (a daemon thread, say), so that its unix socket
    # file goes.
    self._stop_at_exit = weakref.finalize(self, self._server.Stop)

  def __enter__(self) -> 'Server':
    return self

  def __exit__(self, *_):
    self.stop()

  def __repr__(self) -> str:
    unix = (f', unix_socket_path={self._unix_socket_path!r}'
            if self._unix_socket_path else '')
    return (f'Server(bind_address={self._bind_address!r}, port={self._port}'
            f'{unix})')

  @property
  def port(self) -> Optional[int]:
    """The TCP port; None if the server listens on its unix socket only."""
    return self._port

  @property
  def metrics_port(self) -> Optional[int]:
    """The port serving `/metrics`; None without one."""
    return self._metrics_port

  @property
  def unix_socket_path(self) -> Optional[str]:
    """The unix socket's path, None without one."""
    return self._unix_socket_path

  def stop(self):
    """Stops the server: waiting calls end with CANCELLED. Idempotent."""
    self._server.Stop()

  def wait(self):
    """Blocks until the server stops; Ctrl-C stops it and re-raises."""
    try:
      while not self._server.Wait(250):
        pass
    except KeyboardInterrupt:
      self.stop()
      raise

  def localhost_client(self) -> client_lib.Client:
    """A client over TCP loopback, or over the unix socket if the server
    listens there only. With the server's `auth_token`, and over TLS
    trusting the server's own certificate chain (which must then hold its
    root and name "localhost"); under mutual TLS make a client with a
    certificate instead."""
    if self._port is None:
      return client_lib.Client(f'unix:{self._unix_socket_path}',
                               auth_token=self._auth_token)
    return client_lib.Client(f'localhost:{self._port}', tls=self._client_tls,
                             auth_token=self._auth_token)
