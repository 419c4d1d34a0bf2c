"""Shared memory between a server and clients in other processes of its
host: large chunks travel as /dev/shm segments (docs/wire-protocol.md,
"Shared memory"), with the same results as over TCP and nothing left
behind by killed processes."""

import collections
import gc
import os
import pathlib
import re
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import numpy as np
import pytest

import reverb

TIMEOUT = 60
SHM = pathlib.Path('/dev/shm')
STEP_SHAPE = (256, 1024)  # 256 KiB per step, one chunk each.

SERVER = """
  import os, sys, time, reverb
  checkpoints = os.environ.get('TEST_CHECKPOINTS')
  checkpointer = (reverb.checkpointers.DefaultCheckpointer(checkpoints)
                  if checkpoints else None)
  server = reverb.Server(checkpointer=checkpointer, port=None, metrics_port=0,
                         tables=[
      reverb.Table('uniform', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 1000,
                   reverb.rate_limiters.MinSize(1)),
      reverb.Table('small', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), 3,
                   reverb.rate_limiters.MinSize(1)),
  ])
  print(server.port, server.metrics_port, flush=True)
  sys.stdin.read()  # Until the test closes stdin (or kills us).
"""

WRITER = """
  import sys, numpy as np, reverb
  client = reverb.Client(f'localhost:{sys.argv[1]}')
  steps, shape = int(sys.argv[2]), (256, 1024)
  table = sys.argv[3] if len(sys.argv) > 3 else 'uniform'
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for i in range(steps if steps > 0 else 10**9):
      step = np.random.default_rng(i).integers(0, 256, shape, np.uint8)
      step[0, 0] = i % 251
      writer.append({'x': step})
      if i:
        writer.create_item(table, 1.0, {'x': writer.history['x'][-2:]})
      if i % 4 == 3:
        writer.flush()
        print(i, flush=True)
"""


def _step(i):
  """Step i: random bytes (snappy cannot shrink them below the segment
  threshold), i % 251 first."""
  step = np.random.default_rng(i).integers(0, 256, STEP_SHAPE, np.uint8)
  step[0, 0] = i % 251
  return step


class ServerProcess:
  """A server in a process of its own; `env` adds to its environment."""

  def __init__(self, **env):
    self.process = subprocess.Popen(
        [sys.executable, '-c', textwrap.dedent(SERVER)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, **env))
    self.port, self.metrics_port = map(
        int, self.process.stdout.readline().split())
    self.address = f'localhost:{self.port}'

  def names(self):
    """This server's names under /dev/shm."""
    return sorted(p.name for p in SHM.glob(f'reverb-{self.process.pid}-*'))

  def stored_segments(self, kind='chunks'):
    """The segments the server keeps (`chunks`) or keeps for reuse (`free`)."""
    return [p.name for d in SHM.glob(f'reverb-{self.process.pid}-*.{kind}')
            for p in d.iterdir()]

  def table_batches(self):
    """The sample batches its tables have served (the count of
    reverb_sample_latency_seconds: one per batch)."""
    url = f'http://127.0.0.1:{self.metrics_port}/metrics'
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
      text = response.read().decode()
    return int(re.search(r'^reverb_sample_latency_seconds_count (\d+)$', text,
                         re.MULTILINE).group(1))

  def stop(self):
    if self.process.poll() is None:
      self.process.stdin.close()
      try:
        self.process.wait(TIMEOUT)
      except subprocess.TimeoutExpired:
        self.process.kill()
    self.process.wait(TIMEOUT)

  def kill(self):
    self.process.kill()
    self.process.wait(TIMEOUT)


def _write(client, steps):
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for i in range(steps):
      writer.append({'x': _step(i)})
      if i:
        writer.create_item('uniform', 1.0, {'x': writer.history['x'][-2:]})
    writer.flush()


def _inodes(pattern):
  """The inodes of the files in the directories under /dev/shm that match
  `pattern`."""
  return {p.stat().st_ino for d in SHM.glob(pattern) for p in d.iterdir()}


def _sampled_items(client, n):
  """{first step's value: (step 0, step 1)} of n samples."""
  items = {}
  for sample in client.sample('uniform', num_samples=n):
    first, second = sample[0].data[0], sample[1].data[0]
    items[int(first[0, 0])] = (first, second)
  return items


def _assert_whole(items):
  """Each item of `_sampled_items` holds the two steps it should."""
  for first, (step0, step1) in items.items():
    np.testing.assert_array_equal(step0, _step(first))
    np.testing.assert_array_equal(step1, _step(first + 1))


def _iterated_items(address, batches):
  """`_sampled_items` of a ReplayIterator's batches of 4 (which unpacks
  samples straight into their batch rows)."""
  items = {}
  with reverb.ReplayIterator(address, 'uniform', batch_size=4) as iterator:
    for _ in range(batches):
      for trajectory in next(iterator).data[0]:
        items[int(trajectory[0, 0, 0])] = tuple(trajectory)
  return items


def _wait_for(predicate, what):
  deadline = time.monotonic() + TIMEOUT
  while not predicate():
    assert time.monotonic() < deadline, f'timed out waiting for {what}'
    time.sleep(0.05)


@pytest.fixture(name='shm_env')
def shm_env_fixture(monkeypatch):
  """The test process with shared memory on (whatever the caller's
  environment says)."""
  monkeypatch.delenv('REVERB_SHARED_MEMORY', raising=False)
  monkeypatch.delenv('REVERB_SHARED_MEMORY_MIN_BYTES', raising=False)
  if not SHM.is_dir() or not os.access(SHM, os.W_OK):
    pytest.skip('/dev/shm is not a writable directory here')


@pytest.mark.parametrize('mode', ['shared_memory', 'server_off', 'client_off'])
def test_large_steps_cross_processes_as_segments_or_bytes_alike(
    shm_env, monkeypatch, mode):
  server = ServerProcess(
      **({'REVERB_SHARED_MEMORY': '0'} if mode == 'server_off' else {}))
  try:
    if mode == 'client_off':
      monkeypatch.setenv('REVERB_SHARED_MEMORY', '0')
    client = reverb.Client(server.address)
    _write(client, 9)
    info = client.server_info()['uniform']
    assert info.current_size == 8
    # Each step is a chunk of its own (chunk_length 1 per column: 1 MiB).
    stored = server.stored_segments()
    assert len(stored) == (9 if mode == 'shared_memory' else 0), stored
    items = _sampled_items(client, 200)
    assert sorted(items) == list(range(8))  # 200 uniform draws of 8 items.
    _assert_whole(items)
    items = _iterated_items(server.address, 50)
    assert sorted(items) == list(range(8))
    _assert_whole(items)
    lent = [n for n in server.names() if '.s' in n.split('-')[-1]]
    assert bool(lent) == (mode == 'shared_memory'), server.names()
    if mode == 'shared_memory':
      # The server keeps what it stores in the segments it received: once
      # the table lets go of an item's chunks, their segments go too (into
      # the pool writers reuse, which holds a few). A segment still linked
      # elsewhere (by a sample stream's lender, or by a client that holds
      # its chunk: this one keeps its sample stream) is removed instead.
      del client
      gc.collect()
      _wait_for(lambda: not list(
          SHM.glob(f'reverb-{server.process.pid}-*.[rs]*/*')), 'links lent')
      client = reverb.Client(server.address)
      client.reset('uniform')
      _wait_for(lambda: not server.stored_segments(), 'freed segments')
      free = server.stored_segments('free')
      assert 3 < len(free) <= 9, free
      # The server keeps its mappings of them, for when writers reuse them.
      maps = pathlib.Path(f'/proc/{server.process.pid}/maps').read_text()
      assert '.free/' in maps
      # A writer takes free segments (for its chunks, and for the next ones
      # it makes ready) before it makes new ones.
      pooled = _inodes(f'reverb-{server.process.pid}-*.free')
      _write(client, 3)
      stored = _inodes(f'reverb-{server.process.pid}-*.chunks')
      assert len(stored) == 3
      assert stored <= pooled, (stored, pooled)
      items = _sampled_items(client, 50)
      _assert_whole(items)
      # Free segments no writer takes go (5 to 10 s untaken); the chunks'
      # stay.
      assert server.stored_segments('free')
      _wait_for(lambda: not server.stored_segments('free'),
                'idle free segments removed')
      assert len(server.stored_segments()) == 3
      _assert_whole(_sampled_items(client, 50))
  finally:
    server.stop()
  # A stopped server removes every name of its own.
  assert not server.names()


FRAME_SHAPE = (84, 84, 4)  # 28 KB a step: a chunk the server keeps in memory.


def _frame(i):
  frame = np.random.default_rng(1000 + i).integers(0, 256, FRAME_SHAPE,
                                                   np.uint8)
  frame[0, 0, 0] = i
  return frame


def _write_frames(client, n):
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for i in range(n):
      writer.append({'x': _frame(i)})
      writer.create_item('uniform', 1.0, {'x': writer.history['x'][-1:]})


def _iterate_frames(server):
  """{item: times} of 50 ReplayIterator batches of 16 frames, each checked;
  and the response segments its stream's directory held meanwhile."""
  seen = collections.Counter()
  with reverb.ReplayIterator(server.address, 'uniform',
                             batch_size=16) as iterator:
    for _ in range(50):
      for trajectory in next(iterator).data[0]:
        i = int(trajectory[0, 0, 0, 0])
        np.testing.assert_array_equal(trajectory[0], _frame(i))
        seen[i] += 1
    used = list(SHM.glob(f'reverb-{server.process.pid}-*.s*/o*'))
  return seen, used


def _sample_frames(client, n):
  for sample in client.sample('uniform', num_samples=n):
    step = sample[0].data[0]
    np.testing.assert_array_equal(step, _frame(int(step[0, 0, 0])))


@pytest.mark.parametrize('mode', ['shared_memory', 'client_off'])
def test_large_responses_of_small_chunks_come_as_segments_or_bytes_alike(
    shm_env, monkeypatch, mode):
  """Chunks below the segment threshold (kept in the server's memory) come
  in responses the server writes into segments of the stream's own, which
  it reuses once the client has read them."""
  server = ServerProcess()
  try:
    if mode == 'client_off':
      monkeypatch.setenv('REVERB_SHARED_MEMORY', '0')
    client = reverb.Client(server.address)
    _write_frames(client, 40)
    assert not server.stored_segments()  # Frames are kept in memory.
    seen, used = _iterate_frames(server)
    assert sorted(seen) == list(range(40))  # 800 uniform draws of 40 items.
    # A stream writes its responses into a few segments it reuses.
    if mode == 'shared_memory':
      assert 1 <= len(used) <= 8, used
    else:
      assert not used
    _sample_frames(client, 200)
    # Their directories go with their streams, and what the client took
    # with the samples that held it.
    del client
    gc.collect()
    _wait_for(lambda: not list(
        SHM.glob(f'reverb-{server.process.pid}-*.[rs]*/*')), 'links lent')
  finally:
    server.stop()
  assert not server.names()


def test_the_pool_holds_as_many_segments_as_a_writer_runs_ahead(shm_env):
  """The segments of the chunks a table lets go of all go into the pool
  (within its bytes), not only a few: a writer takes one per chunk before
  the server frees the chunks its items evict, so a pool of a few files runs
  dry under a writer some dozens of chunks ahead, and each chunk then costs
  a new file. The writer reuses them all."""
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    # 80 chunks of 256 KiB (some go as bytes: here 48-53 of 60 were
    # segments).
    _write(client, 80)
    gc.collect()
    stored = [d / n for d in SHM.glob(f'reverb-{server.process.pid}-*.chunks')
              for n in os.listdir(d)]
    assert len(stored) > 32, stored  # More than the 32 files pooled before.
    # The writer's links go with it; a segment linked elsewhere when its
    # chunk goes is removed instead of pooled.
    _wait_for(lambda: all(p.stat().st_nlink == 1 for p in stored),
              "the writer's links removed")
    client.reset('uniform')
    _wait_for(lambda: not server.stored_segments(), 'freed segments')
    assert len(server.stored_segments('free')) == len(stored)
    pooled = _inodes(f'reverb-{server.process.pid}-*.free')
    _write(client, 40)
    reused = _inodes(f'reverb-{server.process.pid}-*.chunks')
    assert reused and reused <= pooled, (reused, pooled)
    _assert_whole(_sampled_items(client, 50))
  finally:
    server.stop()


def test_steps_are_built_in_the_segments_the_server_keeps(shm_env):
  """A step that is a chunk of its own is written once, into a segment the
  server then keeps as it is (the same file, not a copy); the writer keeps
  a link to it while it holds the chunk, so the server does not hand the
  file to another writer meanwhile."""
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    writer = client.trajectory_writer(num_keep_alive_refs=2)
    for i in range(6):
      writer.append({'x': _step(i)})
      if i:
        writer.create_item('uniform', 1.0, {'x': writer.history['x'][-2:]})
      writer.flush()
    stored = {p.stat().st_ino: p for d in
              SHM.glob(f'reverb-{server.process.pid}-*.chunks')
              for p in d.iterdir()}
    assert len(stored) == 6, stored
    # The writer's links to the chunks it keeps alive; the other files of
    # its directory are segments made ready for the next steps.
    built = [p for d in
             SHM.glob(f'reverb-{server.process.pid}-*.w{os.getpid()}-*')
             for p in d.iterdir()]
    held = [p for p in built if p.stat().st_ino in stored]
    assert len(held) == 2, (built, stored)
    assert all(p.stat().st_nlink == 2 for p in held)
    assert all(p.stat().st_nlink == 1 for p in built if p not in held)
    # A history read of a built chunk.
    np.testing.assert_array_equal(writer.history['x'][-1].numpy(), _step(5))
    # Once the writer lets go, its links go too; the server frees the
    # segments with the items and pools them for writers.
    writer.close()
    del writer
    gc.collect()
    _wait_for(lambda: not [p for p in held if p.exists()],
              "the writer's links removed")
    client.reset('uniform')
    _wait_for(lambda: not server.stored_segments(), 'freed segments')
    assert server.stored_segments('free')
    _write(client, 5)
    _assert_whole(_sampled_items(client, 50))
  finally:
    server.stop()


def test_legacy_steps_of_one_array_are_built_in_segments_too(shm_env):
  """A legacy writer's step of one array (Client.insert's too) is built in
  its segment as a TrajectoryWriter's is; `Client.insert`, which waits for
  its confirmation, makes the next segment ready after its write (the
  server works meanwhile), in time for the next insert."""
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    steps = [np.random.default_rng(i).integers(0, 2**31, (1 << 18,), np.int32)
             for i in range(6)]

    chunks = f'reverb-{server.process.pid}-*.chunks'

    def ready_inodes():  # Segments of this client's, linked nowhere else.
      return {p.stat().st_ino for d in
              SHM.glob(f'reverb-{server.process.pid}-*.w{os.getpid()}-*')
              for p in d.iterdir()
              if not p.name.endswith('k') and p.stat().st_nlink == 1}

    with client.writer(max_sequence_length=1) as writer:
      for step in steps[:2]:
        writer.append(step)
        writer.create_item('uniform', 1, 1.0)
        writer.flush()
      stored = _inodes(chunks)
      assert len(stored) == 2, stored
      # The writer keeps its last step's chunk: linked, the same file.
      kept = [p for d in
              SHM.glob(f'reverb-{server.process.pid}-*.w{os.getpid()}-*')
              for p in d.iterdir() if p.stat().st_ino in stored]
      assert len(kept) == 1, kept
    client.insert(steps[2], priorities={'uniform': 1.0})
    for step in steps[3:]:
      ready_before, stored_before = ready_inodes(), _inodes(chunks)
      client.insert(step, priorities={'uniform': 1.0})
      new = _inodes(chunks) - stored_before
      assert len(new) == 1 and new <= ready_before, (new, ready_before)
    samples = [s[0].data[0] for s in client.sample('uniform', num_samples=60)]
    assert {bytes(s) for s in samples} == {bytes(s) for s in steps}
  finally:
    server.stop()


def test_legacy_steps_with_scalar_columns_sample_whole_from_segments(shm_env):
  # A legacy writer's chunk holds every column of its steps: a large one
  # and scalars, whose contents are a few bytes of the segment (a sampler
  # once read those from a wrong place: "Compressed tensor content does not
  # hold a DT_FLOAT[1] tensor").
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    with client.writer(1) as writer:
      for i in range(6):
        writer.append([_step(i), np.float32(i + 0.5), np.int64(-i)])
        writer.create_item('uniform', 1, 1.0)
    assert len(server.stored_segments()) == 6
    seen = set()
    for sample in client.sample('uniform', num_samples=60):
      step, reward, index = sample[0].data
      i = int(step[0, 0])
      np.testing.assert_array_equal(step, _step(i))
      assert (reward, index) == (np.float32(i + 0.5), np.int64(-i))
      seen.add(i)
    assert seen == set(range(6))
    assert any('.s' in n.split('-')[-1] for n in server.names())
  finally:
    server.stop()


def test_a_stream_that_borrows_segments_samples_in_larger_table_batches(
    shm_env, monkeypatch):
  # Items of two 256 KiB steps: a table batch of a stream that gets bytes
  # closes at 4 MiB of chunks (8 items), one of a stream that borrows
  # segments at 16 MiB (32): each batch costs the server a hand-over
  # between its threads.
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    _write(client, 9)
    batches = server.table_batches()
    _assert_whole(_sampled_items(client, 64))
    lent_batches = server.table_batches() - batches
    monkeypatch.setenv('REVERB_SHARED_MEMORY', '0')
    client = reverb.Client(server.address)
    batches = server.table_batches()
    _assert_whole(_sampled_items(client, 64))
    byte_batches = server.table_batches() - batches
    assert byte_batches >= 8, byte_batches
    assert lent_batches <= 4, lent_batches
  finally:
    server.stop()


def test_a_checkpoint_of_segments_loads_as_bytes_alike(shm_env, tmp_path):
  server = ServerProcess(TEST_CHECKPOINTS=str(tmp_path))
  try:
    client = reverb.Client(server.address)
    _write(client, 5)
    assert len(server.stored_segments()) == 5
    client.checkpoint()
  finally:
    server.stop()
  # A server in this process loads it (its chunks in memory, not segments).
  checkpointer = reverb.checkpointers.DefaultCheckpointer(str(tmp_path))
  tables = [reverb.Table(name, reverb.selectors.Uniform(),
                         reverb.selectors.Fifo(), size,
                         reverb.rate_limiters.MinSize(1))
            for name, size in (('uniform', 1000), ('small', 3))]
  with reverb.Server(tables, checkpointer=checkpointer) as loaded:
    items = _sampled_items(loaded.localhost_client(), 100)
  assert sorted(items) == list(range(4))
  _assert_whole(items)


def test_writer_killed_while_writing_leaves_no_segment(shm_env):
  server = ServerProcess()
  try:
    writer = subprocess.Popen(
        [sys.executable, '-c', textwrap.dedent(WRITER), str(server.port), '0'],
        stdout=subprocess.PIPE, text=True)
    try:
      for _ in range(3):  # Three flushes: 12 steps stored and confirmed.
        assert writer.stdout.readline(), 'the writer died'
      time.sleep(0.2)  # Kill it mid-stream, most likely mid-segment.
      os.kill(writer.pid, signal.SIGKILL)
    finally:
      writer.kill()
      writer.wait(TIMEOUT)
    # The writer's directory goes once the server notices the stream end.
    _wait_for(lambda: not [n for n in server.names() if '.w' in n],
              'the writer directory to be removed')
    # What it had stored is still there, and served.
    client = reverb.Client(server.address)
    assert client.server_info()['uniform'].current_size >= 11
    for sample in client.sample('uniform', num_samples=20):
      # Step i is marked i % 251: the writer may have got past 251.
      first, second = sample[0].data[0], sample[1].data[0]
      step = next(i for i in range(int(first[0, 0]), 10**5, 251)
                  if np.array_equal(first, _step(i)))
      np.testing.assert_array_equal(second, _step(step + 1))
  finally:
    server.stop()


def test_samples_stay_whole_while_their_segments_are_freed_and_reused(
    shm_env):
  """A table of 3 items, a writer replacing them as fast as it can (its
  chunks' segments freed and reused all along) and samplers checking every
  byte of what they get."""
  server = ServerProcess()
  try:
    writer = subprocess.Popen(
        [sys.executable, '-c', textwrap.dedent(WRITER), str(server.port), '0',
         'small'], stdout=subprocess.PIPE, text=True)
    try:
      assert writer.stdout.readline(), 'the writer died'
      client = reverb.Client(server.address)
      checked = 0
      names_of_inode = collections.defaultdict(set)  # Of the kept segments.
      deadline = time.monotonic() + 5
      while time.monotonic() < deadline:
        for kept in SHM.glob(f'reverb-{server.process.pid}-*.chunks/*'):
          try:
            names_of_inode[kept.stat().st_ino].add(kept.name)
          except FileNotFoundError:
            pass  # Freed meanwhile.
        for sample in client.sample('small', num_samples=10):
          first, second = sample[0].data[0], sample[1].data[0]
          step = next(i for i in range(int(first[0, 0]), 10**6, 251)
                      if np.array_equal(first, _step(i)))
          np.testing.assert_array_equal(second, _step(step + 1))
          checked += 1
      assert writer.poll() is None, 'the writer died'
      assert checked >= 10
      # This process keeps mappings of segments it met, to copy from them
      # when they are lent again (the copies checked above went through
      # them): mappings of links it has removed since, which the kernel
      # marks deleted (the buffered response of an idle sample stream holds
      # its links).
      maps = pathlib.Path('/proc/self/maps').read_text().splitlines()
      assert any(f'/dev/shm/reverb-{server.process.pid}-' in line and
                 line.endswith(' (deleted)') for line in maps)
      # A segment kept for a chunk, freed and kept again for another.
      assert max(len(n) for n in names_of_inode.values()) > 1, (
          'no segment was reused')
    finally:
      writer.kill()
      writer.wait(TIMEOUT)
  finally:
    server.stop()


SAMPLER = """
  import sys, reverb
  client = reverb.Client(f'localhost:{sys.argv[1]}')
  held = list(client.sample('uniform', num_samples=10))  # Segments mapped.
  print('HOLDING', flush=True)
  sys.stdin.read()
"""


def test_sampler_killed_while_holding_segments_leaves_none(shm_env):
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    _write(client, 5)
    sampler = subprocess.Popen(
        [sys.executable, '-c', textwrap.dedent(SAMPLER), str(server.port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
      assert sampler.stdout.readline().strip() == 'HOLDING'
      taken = [n for n in server.names() if f'.r{sampler.pid}-' in n]
      assert taken and any((SHM / n).iterdir() for n in taken), taken
      sampler.kill()
    finally:
      sampler.kill()
      sampler.wait(TIMEOUT)
    # The next stream to end on the server sweeps what the dead one held.
    _write(client, 2)
    _wait_for(lambda: not [n for n in server.names()
                           if f'.r{sampler.pid}-' in n],
              'the dead sampler\'s segments to be swept')
    # And the chunks are still whole.
    items = _sampled_items(client, 50)
    _assert_whole(items)
  finally:
    server.stop()


def test_directories_of_writers_that_are_gone_are_swept(shm_env):
  server = ServerProcess()
  try:
    client = reverb.Client(server.address)
    _write(client, 2)
    prefix = next(n for n in server.names() if n.endswith('.probe'))[:-6]
    # A writer that died before sending anything: the server never heard
    # its directory's name, but its pid is gone.
    dead_pid = _dead_pid()
    stale = SHM / f'{prefix}.w{dead_pid}-{secrets.token_hex(8)}'
    stale.mkdir(mode=0o700)
    (stale / '0').write_bytes(b'x' * 1000)
    # One of a live process stays.
    live = SHM / f'{prefix}.w{os.getpid()}-{secrets.token_hex(8)}'
    live.mkdir(mode=0o700)
    try:
      _write(client, 2)  # An insert stream that ends: the server sweeps.
      _wait_for(lambda: not stale.exists(), 'the dead writer to be swept')
      assert live.exists()
    finally:
      shutil.rmtree(live, ignore_errors=True)
  finally:
    server.stop()


def _dead_pid():
  process = subprocess.Popen(['true'])
  process.wait(TIMEOUT)
  return process.pid


def test_killed_server_leaves_nothing_after_the_next_start(shm_env):
  server = ServerProcess()
  client = reverb.Client(server.address)
  _write(client, 5)
  _sampled_items(client, 10)
  names = server.names()
  assert any(n.endswith('.chunks') for n in names), names
  server.kill()
  assert server.names() == names  # SIGKILL: nothing could remove them.
  with reverb.Server([reverb.Table.queue('q', 10)]):
    assert not server.names()


def _netns_unavailable():
  if shutil.which('ip') is None:
    return 'the `ip` command (iproute2) is missing'
  if os.geteuid() != 0:
    return 'network namespaces need root'
  return None


NETNS_CLIENT = """
  import sys, numpy as np, reverb
  client = reverb.Client(sys.argv[1])
  shape = (256, 1024)
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    for i in range(4):
      step = np.random.default_rng(i).integers(0, 256, shape, np.uint8)
      step[0, 0] = 100 + i
      writer.append({'x': step})
      if i:
        writer.create_item('uniform', 1.0, {'x': writer.history['x'][-2:]})
    writer.flush()
  for sample in client.sample('uniform', num_samples=20):
    first = int(sample[0].data[0][0, 0])
    assert sample[1].data[0][0, 0] == first + 1
  print('OK', flush=True)
"""


def test_a_client_in_another_network_namespace_works(shm_env):
  reason = _netns_unavailable()
  if reason:
    pytest.skip(reason)
  netns = f'rvbshm{os.getpid()}{secrets.token_hex(2)}'
  host_end = f'vs{secrets.token_hex(3)}'
  run = lambda *a: subprocess.run(['ip', *a], check=True, capture_output=True,
                                  timeout=30)
  made = subprocess.run(['ip', 'netns', 'add', netns], capture_output=True,
                        timeout=30)
  if made.returncode != 0:
    pytest.skip(f'`ip netns add` failed: {made.stderr!r}')
  server = None
  try:
    run('link', 'add', host_end, 'type', 'veth', 'peer', 'name', 'eth0',
        'netns', netns)
    run('addr', 'add', '10.79.0.1/24', 'dev', host_end)
    run('link', 'set', host_end, 'up')
    run('-n', netns, 'addr', 'add', '10.79.0.2/24', 'dev', 'eth0')
    run('-n', netns, 'link', 'set', 'eth0', 'up')
    run('-n', netns, 'link', 'set', 'lo', 'up')
    server = ServerProcess(REVERB_BIND_ADDRESS='0.0.0.0')
    client = subprocess.run(
        ['ip', 'netns', 'exec', netns, sys.executable, '-c',
         textwrap.dedent(NETNS_CLIENT), f'10.79.0.1:{server.port}'],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert client.stdout.strip() == 'OK', client.stderr
    # Same host, same pid namespace: it used shared memory.
    assert server.stored_segments()
  finally:
    if server is not None:
      server.stop()
    subprocess.run(['ip', 'link', 'del', host_end], capture_output=True,
                   timeout=30)
    subprocess.run(['ip', 'netns', 'del', netns], capture_output=True,
                   timeout=30)
