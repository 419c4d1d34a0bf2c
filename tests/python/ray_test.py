"""reverb.ray.ReplayCluster on a Ray cluster of several nodes on this machine.

One cluster (three nodes of 4 CPUs, and a head without CPUs for the driver)
and one ReplayCluster of three shards serve the module: Ray takes seconds to
start.
"""

import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip('ray')
from ray import cluster_utils  # pylint: disable=g-import-not-at-top

import reverb  # pylint: disable=g-import-not-at-top
import reverb.ray  # pylint: disable=g-import-not-at-top

TIMEOUT = 60
NUM_SHARDS = 3
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Small, to fit in /dev/shm.
EXAMPLE = (pathlib.Path(__file__).resolve().parents[2] / 'examples' /
           'ray_actor_learner.py')


def table_maker(fail: bool = False):
  """A `make_tables` for ReplayCluster (a closure, so that Ray pickles it
  by value: this module cannot be imported on the workers)."""
  def make_tables():
    if fail:
      raise ValueError('make_tables failed')
    return [reverb.Table('replay', reverb.selectors.Uniform(),
                         reverb.selectors.Fifo(), max_size=1000,
                         rate_limiter=reverb.rate_limiters.MinSize(1))]
  return make_tables


@pytest.fixture(name='ray_cluster', scope='module')
def ray_cluster_fixture():
  previous = os.environ.get('RAY_USAGE_STATS_ENABLED')
  os.environ['RAY_USAGE_STATS_ENABLED'] = '0'
  cluster = cluster_utils.Cluster(
      initialize_head=True,
      head_node_args={'num_cpus': 0, 'include_dashboard': False,
                      'object_store_memory': OBJECT_STORE_BYTES})
  try:
    for _ in range(3):
      cluster.add_node(num_cpus=4, object_store_memory=OBJECT_STORE_BYTES)
    ray.init(address=cluster.address)
    yield cluster
  finally:
    ray.shutdown()
    cluster.shutdown()
    if previous is None:
      del os.environ['RAY_USAGE_STATS_ENABLED']
    else:
      os.environ['RAY_USAGE_STATS_ENABLED'] = previous


@pytest.fixture(name='replay', scope='module')
def replay_fixture(ray_cluster, tmp_path_factory):
  del ray_cluster
  with reverb.ray.ReplayCluster(
      table_maker(), NUM_SHARDS,
      checkpoint_dir=str(tmp_path_factory.mktemp('replay')),
      start_timeout=TIMEOUT) as replay:
    yield replay


@pytest.fixture(name='shard_clients')
def shard_clients_fixture(replay):
  """One client per shard, whose tables start empty."""
  clients = [reverb.Client(address) for address in replay.addresses]
  for client in clients:
    client.reset('replay', timeout=TIMEOUT)
  return clients


def size(client: reverb.Client) -> int:
  return client.server_info(timeout=TIMEOUT)['replay'].current_size


def values(client: reverb.Client, num_samples: int):
  """The values of `num_samples` samples of one-step int items."""
  return {int(sample[0].data[0])
          for sample in client.sample('replay', num_samples, timeout=TIMEOUT)}


def values_until(iterator: reverb.ReplayIterator, wanted,
                 patience_seconds: float = 60):
  """The values of one-step int items that `iterator` (of batches of 1)
  yields, until every value of `wanted` is among them or `patience_seconds`
  pass (a restarted shard rejoins once the client's refresher reaches it,
  within about a refresh interval: thousands of samples of the others may
  come first)."""
  seen = set()
  deadline = time.monotonic() + patience_seconds
  while not set(wanted) <= seen and time.monotonic() < deadline:
    seen.add(next(iterator).data[0].item())
  return seen


def kill_and_wait_for_restart(replay, shard: int, client: reverb.Client,
                              size_before: int) -> int:
  """Kills the shard's actor; returns the size of its table once the
  restarted server answers `client`."""
  ray.kill(replay.shards[shard], no_restart=False)
  deadline = time.monotonic() + TIMEOUT
  while time.monotonic() < deadline:
    # Until the kill lands, the old server answers; then nothing listens
    # until the restarted one does.
    try:
      current = size(client)
    except (RuntimeError, reverb.DeadlineExceededError):
      continue
    if current != size_before:
      return current
    time.sleep(0.05)
  raise AssertionError(f'shard {shard} still has {size_before} items')


def states_of_placement_groups_since(before):
  """The states of the placement groups not in `before` (a set of ids)."""
  table = ray.util.placement_group_table()
  return [table[group]['state'] for group in set(table) - before]


def test_shards_run_on_different_nodes_at_their_node_address(replay,
                                                             ray_cluster):
  node_ids = ray.get([shard.node_id.remote() for shard in replay.shards])
  worker_nodes = {node.node_id for node in ray_cluster.worker_nodes}
  assert len(set(node_ids)) == NUM_SHARDS
  assert set(node_ids) <= worker_nodes
  node_ip = ray.util.get_node_ip_address()
  ports = set()
  for address in replay.addresses:
    host, port = address.rsplit(':', 1)
    assert host == node_ip
    ports.add(port)
  assert len(ports) == NUM_SHARDS


def test_every_shard_serves_the_tables(shard_clients):
  for i, client in enumerate(shard_clients):
    client.insert([i], {'replay': 1.0})
  for i, client in enumerate(shard_clients):
    assert size(client) == 1
    assert values(client, 1) == {i}


def test_checkpoint_saves_every_shard_in_its_directory(replay):
  paths = replay.checkpoint()
  assert len(paths) == NUM_SHARDS
  root = pathlib.Path(paths[0]).parents[1]
  for i, path in enumerate(paths):
    assert pathlib.Path(path).parent == root / f'shard-{i}'
    assert (pathlib.Path(path) / 'DONE').exists()


def test_killed_shard_restarts_from_its_checkpoint_at_the_same_address(
    replay, shard_clients):
  # A client, a writer and an iterator made, and used, before the kill.
  client = shard_clients[0]
  writer = client.trajectory_writer(num_keep_alive_refs=1)

  def write(value):
    writer.append({'value': np.int64(value)})
    writer.create_item('replay', 1.0, {'value': writer.history['value'][-1:]})
    writer.flush(timeout_ms=TIMEOUT * 1000)

  for value in range(4):
    client.insert([value], {'replay': 1.0})
  write(4)
  iterator = reverb.ReplayIterator(replay.addresses[0], 'replay', batch_size=1)
  assert next(iterator).data[0].item() in range(5)
  replay.checkpoint()
  for value in range(100, 103):  # Lost with the process.
    client.insert([value], {'replay': 1.0})

  assert kill_and_wait_for_restart(replay, 0, client, size_before=8) == 5
  assert ray.get(replay.shards[0].address.remote(),
                 timeout=TIMEOUT) == replay.addresses[0]
  assert values(client, 100) == set(range(5))

  write(7)
  writer.close()
  assert size(client) == 6
  seen = values_until(iterator, [7])
  iterator.close()
  assert seen <= set(range(5)) | {7, 100, 101, 102}
  assert 7 in seen


def test_pack_places_named_shards_on_one_node_and_shutdown_cleans_up(
    ray_cluster):
  del ray_cluster
  replay = reverb.ray.ReplayCluster(table_maker(), 2, placement='pack',
                                    name='packed', start_timeout=TIMEOUT)
  shards = replay.shards
  placement_group = replay.placement_group
  try:
    node_ids = ray.get([shard.node_id.remote() for shard in shards])
    assert node_ids[0] == node_ids[1]
    assert ray.get(ray.get_actor('packed-shard-1').address.remote(),
                   timeout=TIMEOUT) == replay.addresses[1]
    assert ray.util.placement_group_table(placement_group)['name'] == 'packed'
    checkpoints = replay.checkpoint()  # Under the nodes' temporary directory.
    assert all(os.path.isdir(path) for path in checkpoints)
  finally:
    replay.shutdown()
  replay.shutdown()  # Idempotent.
  for shard in shards:
    with pytest.raises(ray.exceptions.RayActorError):
      ray.get(shard.address.remote(), timeout=TIMEOUT)
  assert ray.util.placement_group_table(placement_group)['state'] == 'REMOVED'
  # The shards' temporary directories, which held the checkpoints.
  assert not any(os.path.exists(os.path.dirname(path)) for path in checkpoints)


def test_failing_make_tables_raises_and_leaves_nothing_running(ray_cluster):
  del ray_cluster
  before = set(ray.util.placement_group_table())
  with pytest.raises(ray.exceptions.RayActorError, match='make_tables failed'):
    reverb.ray.ReplayCluster(table_maker(fail=True), 2, start_timeout=TIMEOUT)
  assert states_of_placement_groups_since(before) == ['REMOVED']


def test_start_timeout_raises_and_removes_the_placement_group(ray_cluster):
  del ray_cluster
  before = set(ray.util.placement_group_table())
  with pytest.raises(ray.exceptions.GetTimeoutError):
    reverb.ray.ReplayCluster(table_maker(), 1, num_cpus_per_shard=100,
                             start_timeout=0.5)  # More than any node has.
  assert states_of_placement_groups_since(before) == ['REMOVED']


@pytest.mark.parametrize('arguments, message', [
    ({'num_shards': 0}, 'num_shards'),
    ({'placement': 'strict'}, 'placement'),
    ({'num_cpus_per_shard': 0}, 'num_cpus_per_shard'),
])
def test_bad_arguments_raise_value_error(arguments, message):
  arguments = {'num_shards': 1, **arguments}
  with pytest.raises(ValueError, match=message):
    reverb.ray.ReplayCluster(table_maker(), **arguments)


# Below: the client over every shard (`reverb.Client(addresses)`).


def test_client_and_iterator_span_every_shard(replay, shard_clients,
                                              needs_sharded_client):
  del needs_sharded_client
  for i, client in enumerate(shard_clients):
    client.insert([i], {'replay': 1.0})
  client = replay.client()
  assert client.server_info(timeout=TIMEOUT)['replay'].current_size == 3
  assert len(client.checkpoint(timeout=TIMEOUT)) == NUM_SHARDS
  with reverb.ReplayIterator(replay.addresses, 'replay', 1) as iterator:
    assert values_until(iterator, range(NUM_SHARDS)) == set(range(NUM_SHARDS))


def test_client_made_before_a_kill_works_after_the_restart(
    replay, shard_clients, needs_sharded_client):
  del needs_sharded_client
  client = replay.client()
  iterator = reverb.ReplayIterator(replay.addresses, 'replay', 1)
  for i, shard_client in enumerate(shard_clients):
    shard_client.insert([i], {'replay': 1.0})
  replay.checkpoint()
  shard_clients[1].insert([100], {'replay': 1.0})  # Lost with the process.

  assert kill_and_wait_for_restart(replay, 1, shard_clients[1],
                                   size_before=2) == 1
  for value in range(10, 40):
    client.insert([value], {'replay': 1.0})
  assert sum(size(shard_client) for shard_client in shard_clients) == 33
  wanted = set(range(NUM_SHARDS)) | {39}  # Shard 1's restored item too.
  assert wanted <= values_until(iterator, wanted)
  iterator.close()


def test_example_runs_on_the_cluster_unchanged(ray_cluster,
                                               needs_sharded_client):
  del needs_sharded_client
  result = subprocess.run(
      [sys.executable, str(EXAMPLE), '--address', ray_cluster.address,
       '--seconds', '2'],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]
  assert ' 0 bad samples' in result.stdout, result.stdout
  assert 'Traceback' not in result.stderr, result.stderr[-3000:]
  # 4 writers over 3 shards: every shard got items.
  by_shard = result.stdout.split('(by shard: ')[1].split(')')[0].split()
  assert len(by_shard) == NUM_SHARDS and all(int(n) > 0 for n in by_shard), (
      result.stdout)


def test_shard_of_a_lost_node_restarts_on_another_with_its_checkpoint(
    replay, shard_clients, ray_cluster):
  # A node to move to, so that the cluster keeps its capacity.
  ray_cluster.add_node(num_cpus=4, object_store_memory=OBJECT_STORE_BYTES)
  client = shard_clients[2]
  client.insert([1], {'replay': 1.0})
  replay.checkpoint()
  client.insert([2], {'replay': 1.0})
  node_id = ray.get(replay.shards[2].node_id.remote(), timeout=TIMEOUT)
  node = next(node for node in ray_cluster.worker_nodes
              if node.node_id == node_id)

  ray_cluster.remove_node(node)
  new_node_id = ray.get(replay.shards[2].node_id.remote(), timeout=TIMEOUT)
  assert new_node_id != node_id
  # On one machine every node has the same address, and the port is free:
  # the shard is back at its address, and the directory is shared.
  assert size(client) == 1
  assert values(client, 10) == {1}


def test_secured_cluster(ray_cluster, tmp_path):
  """TLS + token on every shard (certificates as PEM bytes, the node's IP
  covered by server_name_override), one client over all of them."""
  del ray_cluster
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
  import tls_certs  # pylint: disable=g-import-not-at-top
  if not tls_certs.available():
    pytest.skip('needs the openssl command')
  certs = tls_certs.make(tmp_path)
  tls = reverb.TlsOptions(certificate_chain=certs.server_chain.read_bytes(),
                          private_key=certs.server_key.read_bytes())
  client_tls = reverb.TlsOptions(root_certificates=certs.ca.read_bytes(),
                                 server_name_override='localhost')
  with reverb.ray.ReplayCluster(table_maker(), 2, start_timeout=TIMEOUT,
                                tls=tls, client_tls=client_tls,
                                auth_token='ray-token') as replay:
    client = replay.client()
    for i in range(10):
      client.insert(np.int64(i), {'replay': 1.0})
    assert sum(info['replay'].current_size for info in
               client.shard_info(timeout=TIMEOUT).values()) == 10
    assert replay.checkpoint()
    with pytest.raises(RuntimeError, match='no auth token'):
      reverb.Client(replay.addresses[0], tls=client_tls).server_info(
          timeout=TIMEOUT)
