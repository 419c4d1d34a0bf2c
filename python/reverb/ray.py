"""ReplayCluster: a sharded replay buffer whose servers are Ray actors.

  import reverb.ray

  def make_tables():  # Called by each shard: tables are not picklable.
    return [reverb.Table.queue('replay', max_size=10_000)]

  cluster = reverb.ray.ReplayCluster(make_tables, num_shards=4,
                                     checkpoint_dir='/shared/replay')
  client = cluster.client()   # reverb.Client(cluster.addresses)
  ...
  cluster.shutdown()

Each shard is an actor that runs one `reverb.Server` over the tables
`make_tables()` returns, listening on its node's address
(`ray.util.get_node_ip_address()`); the actors sit in a placement group,
one bundle each, spread over the nodes ('spread') or packed onto few
('pack'). Ray only starts and restarts the servers: clients talk gRPC to
them directly, and no replay data goes through Ray's object store.

Restarts. A shard that dies (its process crashes, or `ray.kill(shard,
no_restart=False)`) is restarted by Ray, `max_restarts` times (-1: always).
The restarted shard listens on the same port as before (picked once, at
start, and passed to the actor's constructor, which Ray re-runs with the
same arguments) and restores the newest checkpoint in its directory,
`<checkpoint_dir>/shard-<i>`, so `addresses` do not change and clients
made before reach it again by themselves. Items written after its last
checkpoint are lost; `checkpoint_every_seconds` bounds how many.

A bundle stays on its node while the node lives, so a shard restarts on
the node it ran on. If the node itself is lost, Ray moves the bundle to
another node with room, and the shard restarts there: on the same port of
a new host, so `addresses` (fixed at start) no longer name it (ask the
shards, `ray.get([s.address.remote() for s in cluster.shards])`), and with
its checkpoints only if `checkpoint_dir` is on storage every node shares.

Needs Ray (`pip install reverb[ray]`); `import reverb` never imports it.
"""

import os
import shutil
import socket
import tempfile
import time
import uuid
from typing import Callable, List, Optional, Sequence, Tuple

try:
  import ray
  from ray.util import scheduling_strategies
  from ray.util.placement_group import PlacementGroup
  from ray.util.placement_group import placement_group
  from ray.util.placement_group import remove_placement_group
except ImportError as e:
  raise ImportError(
      'reverb.ray needs Ray: pip install reverb[ray]') from e

from reverb import client as client_lib
from reverb import security as security_lib
from reverb import server as server_lib
from reverb.platform import checkpointers_lib

_STRATEGIES = {'spread': 'SPREAD', 'pack': 'PACK'}

# How long shutdown() waits for the shards to stop their servers before it
# kills them anyway.
_CLOSE_TIMEOUT_SECONDS = 10


def _grpc_host(ip: str) -> str:
  """An IP address as gRPC addresses spell it ('[...]' for IPv6)."""
  return f'[{ip}]' if ':' in ip else ip


@ray.remote(num_cpus=0)
def _free_port() -> int:
  """A port free on this node's address (run in the shard's bundle)."""
  host = ray.util.get_node_ip_address()
  family = socket.AF_INET6 if ':' in host else socket.AF_INET
  with socket.socket(family, socket.SOCK_STREAM) as probe:
    probe.bind((host, 0))
    return probe.getsockname()[1]


class Shard:
  """The actor of one shard: a `reverb.Server` on its node's address.

  Ray re-runs the constructor, with the same arguments, when it restarts
  the actor: the server listens on `port` again and restores the newest
  checkpoint under `directory`.

  Args:
    make_tables: Returns the shard's tables.
    port: Port to listen on.
    directory: Checkpoint directory; None: a new one under the node's
      temporary directory, named `temporary_name` (so that a restart finds
      it), which `close()` removes.
    temporary_name: See `directory`.
    checkpoint_every_seconds: Also checkpoint this often (None: only when
      asked).
    security: (server `TlsOptions`, client `TlsOptions`, auth token): the
      server's, and those of the shard's own client (`ReplayCluster`).
  """

  def __init__(self, make_tables: Callable[[], Sequence[server_lib.Table]],
               port: int, directory: Optional[str], temporary_name: str,
               checkpoint_every_seconds: Optional[float],
               security: Tuple[Optional[security_lib.TlsOptions],
                               Optional[security_lib.TlsOptions],
                               Optional[str]] = (None, None, None)):
    tls, client_tls, auth_token = security
    self._temporary = directory is None
    self._directory = directory or os.path.join(tempfile.gettempdir(),
                                                temporary_name)
    host = _grpc_host(ray.util.get_node_ip_address())
    self._server = server_lib.Server(
        make_tables(), port,
        checkpointers_lib.DefaultCheckpointer(path=self._directory),
        bind_address=host, checkpoint_every_seconds=checkpoint_every_seconds,
        tls=tls, auth_token=auth_token)
    self._address = f'{host}:{port}'
    self._client = client_lib.Client(self._address, tls=client_tls,
                                     auth_token=auth_token)

  def address(self) -> str:
    """'host:port' where the server listens."""
    return self._address

  def node_id(self) -> str:
    """The Ray id of the node the shard runs on."""
    return ray.get_runtime_context().get_node_id()

  def checkpoint(self) -> str:
    """Saves the shard's tables; returns the checkpoint's directory."""
    return self._client.checkpoint()

  def close(self):
    """Stops the server; removes the checkpoint directory if temporary."""
    self._server.stop()
    if self._temporary:
      shutil.rmtree(self._directory, ignore_errors=True)


class ReplayCluster:
  """`num_shards` Reverb servers as Ray actors (see the module docstring).

  Starts them at once, and returns when every shard serves. Call from a
  Ray driver (after `ray.init()`); `shutdown()` (or leaving a `with` block)
  stops them.

  Args:
    make_tables: A picklable callable returning the list of `reverb.Table`s
      each shard serves (every shard has the same tables). Each shard calls
      it, on its node, at every (re)start.
    num_shards: Number of servers.
    checkpoint_dir: Shard i checkpoints into `<checkpoint_dir>/shard-<i>`
      and restores from there when it (re)starts, so a cluster started again
      over the same directory resumes. A path every node sees (a shared file
      system) keeps the checkpoints of a node that is lost. None: each shard
      uses a temporary directory on its node, which `shutdown()` removes.
    placement: 'spread' puts the shards on as many nodes as possible (a
      placement group of strategy SPREAD, one bundle per shard); 'pack' on
      as few as possible (PACK).
    num_cpus_per_shard: CPUs each shard's bundle reserves (> 0).
    name: Names the placement group `name` and the actors
      `<name>-shard-<i>` (so that `ray.get_actor` finds them); None: they
      are anonymous.
    max_restarts: How often Ray restarts a shard that dies (-1: always; 0:
      never). Calls on the shard's actor are retried across its restarts.
    checkpoint_every_seconds: Each shard also checkpoints this often (None:
      only on `checkpoint()` or `Client.checkpoint`).
    start_timeout: Seconds to wait, in all, for the resources and for the
      servers to start (None: forever).
    tls: The shards' server `reverb.TlsOptions` (not in dm-reverb); PEM
      bytes rather than paths unless every node has the files. Each
      shard's certificate must name its node's IP address (or every
      client uses `server_name_override`).
    client_tls: The `reverb.TlsOptions` of `client()` and of the shards'
      own clients.
    auth_token: The token of the shards and of the clients.

  Raises:
    ValueError: For a bad `placement`, `num_shards` < 1 or
      `num_cpus_per_shard` <= 0.
    ray.exceptions.GetTimeoutError: If the cluster does not start within
      `start_timeout` (nothing is left running).
    ray.exceptions.RayActorError: If a shard fails to start (for instance
      `make_tables` raises; nothing is left running).
  """

  def __init__(self,
               make_tables: Callable[[], Sequence[server_lib.Table]],
               num_shards: int,
               *,
               checkpoint_dir: Optional[str] = None,
               placement: str = 'spread',
               num_cpus_per_shard: float = 1,
               name: Optional[str] = None,
               max_restarts: int = -1,
               checkpoint_every_seconds: Optional[float] = None,
               start_timeout: Optional[float] = None,
               tls: Optional[security_lib.TlsOptions] = None,
               client_tls: Optional[security_lib.TlsOptions] = None,
               auth_token: Optional[str] = None):
    if placement not in _STRATEGIES:
      raise ValueError(f'placement ({placement!r}) must be one of '
                       f'{", ".join(map(repr, _STRATEGIES))}')
    if num_shards < 1:
      raise ValueError(f'num_shards ({num_shards}) must be >= 1')
    if num_cpus_per_shard <= 0:
      raise ValueError(
          f'num_cpus_per_shard ({num_cpus_per_shard}) must be > 0')
    deadline = (None if start_timeout is None else
                time.monotonic() + start_timeout)

    def remaining() -> Optional[float]:
      return None if deadline is None else max(0.0,
                                               deadline - time.monotonic())

    self._client_tls = client_tls
    self._auth_token = auth_token
    self._shards: List[ray.actor.ActorHandle] = []
    self._addresses: List[str] = []
    self._placement_group = placement_group(
        [{'CPU': num_cpus_per_shard}] * num_shards,
        strategy=_STRATEGIES[placement], name=name or '')
    try:
      ray.get(self._placement_group.ready(), timeout=remaining())
      in_bundle = [
          scheduling_strategies.PlacementGroupSchedulingStrategy(
              self._placement_group, placement_group_bundle_index=i)
          for i in range(num_shards)]
      ports = ray.get([_free_port.options(scheduling_strategy=bundle).remote()
                       for bundle in in_bundle], timeout=remaining())
      temporary_prefix = f'reverb-ray-{uuid.uuid4().hex}'
      shard_class = ray.remote(Shard)
      for i, (bundle, port) in enumerate(zip(in_bundle, ports)):
        self._shards.append(shard_class.options(
            num_cpus=num_cpus_per_shard,
            max_restarts=max_restarts,
            max_task_retries=-1 if max_restarts else 0,
            scheduling_strategy=bundle,
            name=f'{name}-shard-{i}' if name else None,
        ).remote(
            make_tables, port,
            (os.path.join(os.path.abspath(checkpoint_dir), f'shard-{i}')
             if checkpoint_dir is not None else None),
            f'{temporary_prefix}-shard-{i}',
            checkpoint_every_seconds, (tls, client_tls, auth_token)))
      self._addresses = ray.get([shard.address.remote()
                                 for shard in self._shards],
                                timeout=remaining())
    except BaseException:
      self.shutdown()
      raise

  @property
  def addresses(self) -> List[str]:
    """The shards' 'host:port', in shard order; a restarted shard keeps its
    address (unless its node was lost: see the module docstring)."""
    return list(self._addresses)

  @property
  def shards(self) -> List[ray.actor.ActorHandle]:
    """The shards' actors (`Shard`), in shard order."""
    return list(self._shards)

  @property
  def placement_group(self) -> Optional[PlacementGroup]:
    """The placement group of the shards' bundles (None once shut down)."""
    return self._placement_group

  def client(self) -> client_lib.Client:
    """A `reverb.Client` over every shard (with `client_tls` and
    `auth_token`)."""
    return client_lib.Client(self.addresses, tls=self._client_tls,
                             auth_token=self._auth_token)

  def checkpoint(self) -> List[str]:
    """Every shard saves a checkpoint; returns their directories (paths on
    the shards' nodes), in shard order."""
    return ray.get([shard.checkpoint.remote() for shard in self._shards])

  def shutdown(self):
    """Stops the servers, kills the actors (and waits until they are gone),
    and removes the placement group.

    Temporary checkpoint directories are removed; those under
    `checkpoint_dir` are kept. Idempotent.
    """
    shards, self._shards = self._shards, []
    if shards:
      ray.wait([shard.close.remote() for shard in shards],
               num_returns=len(shards), timeout=_CLOSE_TIMEOUT_SECONDS)
    for shard in shards:
      ray.kill(shard, no_restart=True)
    # ray.kill only asks: a call made right after it may still be served.
    # Wait (as long as for the closes) until every actor's calls fail, so
    # that nothing of the cluster runs once this returns.
    deadline = time.monotonic() + _CLOSE_TIMEOUT_SECONDS
    for shard in shards:
      while time.monotonic() < deadline:
        try:
          ray.get(shard.address.remote(),
                  timeout=max(0.1, deadline - time.monotonic()))
        except ray.exceptions.RayActorError:
          break
        except ray.exceptions.GetTimeoutError:
          continue
        time.sleep(0.05)
    if self._placement_group is not None:
      remove_placement_group(self._placement_group)
      self._placement_group = None

  def __enter__(self) -> 'ReplayCluster':
    return self

  def __exit__(self, *_):
    self.shutdown()

  def __repr__(self) -> str:
    return f'ReplayCluster(addresses={self._addresses})'
