"""reverb.ServerLimits: a client that misbehaves cannot hurt the server or
other clients.

Misbehaving clients speak the protocol by hand (the grpcio client of
protocol_test.py), well-behaved ones are our own reverb.Client. Each limit
is set low on a server of the test's own; the defaults are checked against
what ordinary writers keep.
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import reverb

from protocol_test import Protocol, Status, _status, generated_stubs  # pylint: disable=unused-import  # noqa: F401

import grpc  # pylint: disable=g-bad-import-order  # Installed with grpc_tools.

_OK = grpc.StatusCode.OK
_TIMEOUT = 30  # Seconds; only to turn a hang into a failure.
_KIB = 1 << 10
_MIB = 1 << 20


def _table(name='t', max_size=1000):
  return reverb.Table(name, reverb.selectors.Uniform(),
                      reverb.selectors.Fifo(), max_size=max_size,
                      rate_limiter=reverb.rate_limiters.MinSize(1))


@pytest.fixture(autouse=True)
def _over_grpc(monkeypatch):
  # The limits hold for clients over gRPC; those of the server's process
  # hand their chunks over directly (docs/concepts.md, the in-process path).
  monkeypatch.setenv('REVERB_IN_PROCESS', '0')


@pytest.fixture(name='start')
def start_fixture():
  """start(**limits): a server with one table 't' and those limits."""
  servers = []

  def start(**limits):
    server = reverb.Server([_table()], limits=reverb.ServerLimits(**limits))
    servers.append(server)
    return server

  yield start
  for server in servers:
    server.stop()


def _wait_for(condition, what, timeout=_TIMEOUT):
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline, f'timed out waiting for {what}'
    time.sleep(0.02)


def _held(server) -> int:
  return server._server.held_chunk_bytes  # pylint: disable=protected-access


def _open_streams(server) -> int:
  return server._server.num_open_streams  # pylint: disable=protected-access


def _floats(num_bytes: int, seed: int = 0) -> np.ndarray:
  """Incompressible float32 rows: one row of num_bytes / 4 values."""
  return np.random.default_rng(seed).random((1, num_bytes // 4),
                                            dtype=np.float32)


class RawInsertStream:
  """An InsertStream whose requests are sent one at a time, as the test
  decides; `finish()` half-closes and returns (keys, status)."""

  def __init__(self, proto: Protocol):
    self._requests = queue.Queue()
    self._keys = []
    self._status = None
    self._call = proto.stub.InsertStream(iter(self._requests.get, None),
                                         timeout=_TIMEOUT)
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    try:
      for response in self._call:
        self._keys.extend(response.keys)
      self._status = Status(_OK, '')
    except grpc.RpcError as e:
      self._status = _status(e)

  def send(self, request):
    self._requests.put(request)

  def done(self) -> bool:
    return self._status is not None

  def finish(self):
    self._requests.put(None)
    self._reader.join(_TIMEOUT)
    assert self._status is not None, 'the stream did not end'
    return self._keys, self._status


def _chunk_request(proto, key, num_bytes, keep, item_table=None):
  chunk = proto.chunk(key, _floats(num_bytes, seed=key))
  items = ([proto.item(key, item_table, [(key, 0, 1, 0)])]
           if item_table else [])
  return proto.request([chunk], items, keep=keep)


# --- ServerLimits itself ------------------------------------------------------


def test_defaults_are_generous():
  limits = reverb.ServerLimits()
  internal = limits.to_internal()
  assert internal.max_held_chunk_bytes_per_stream == 1 << 30
  assert internal.max_held_chunk_bytes >= 1 << 30
  assert internal.max_message_bytes == 1 << 30
  assert internal.max_concurrent_streams_per_connection == 1024
  assert internal.max_samples_per_request == 1 << 20
  assert internal.stalled_sample_stream_timeout_seconds == 3600


@pytest.mark.parametrize('name', [
    'max_held_chunk_bytes_per_stream', 'max_held_chunk_bytes',
    'max_message_bytes', 'max_concurrent_streams_per_connection',
    'max_samples_per_request', 'stalled_sample_stream_timeout_seconds'])
@pytest.mark.parametrize('value', [0, -1])
def test_non_positive_limit_is_value_error(name, value):
  with pytest.raises(ValueError, match=f'{name.replace("_seconds", "")}.*> 0'):
    reverb.ServerLimits(**{name: value})


def test_limit_out_of_range_is_value_error():
  with pytest.raises(ValueError, match='max_message_bytes'):
    reverb.ServerLimits(max_message_bytes=2**31)
  with pytest.raises(ValueError, match='max_samples_per_request'):
    reverb.ServerLimits(max_samples_per_request=1.5)


# --- Held chunks --------------------------------------------------------------


def test_stream_past_its_cap_is_exhausted_while_another_client_goes_on(
    pb, start):
  server = start(max_held_chunk_bytes_per_stream=256 * _KIB)
  proto = Protocol(pb, server.port)
  client = server.localhost_client()
  stop = threading.Event()
  progress = {'inserted': 0, 'sampled': 0}
  errors = []

  def well_behaved():
    try:
      with client.trajectory_writer(num_keep_alive_refs=2) as writer:
        step = 0
        while not stop.is_set():
          writer.append({'x': np.full(4, step, np.float32)})
          writer.create_item('t', 1.0, {'x': writer.history['x'][-1:]})
          writer.flush(timeout_ms=_TIMEOUT * 1000)
          progress['inserted'] += 1
          sample = next(client.sample('t', 1, emit_timesteps=False))
          assert sample.data[0].shape[0] == 1
          progress['sampled'] += 1
          step += 1
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  other = threading.Thread(target=well_behaved)
  other.start()
  try:
    _wait_for(lambda: progress['sampled'] >= 5, 'the other client')
    # An item of its own first: stored data must survive the failure.
    greedy = RawInsertStream(proto)
    greedy.send(_chunk_request(proto, 1, 64 * _KIB, keep=[1],
                               item_table='t'))
    for key in range(2, 10):  # 64 KiB each, all kept: past 256 KiB.
      greedy.send(_chunk_request(proto, key, 64 * _KIB,
                                 keep=list(range(1, key + 1))))
    keys, status = greedy.finish()
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED, status
    assert 'max_held_chunk_bytes_per_stream (262144 bytes)' in status.details
    assert 'raise the limit' in status.details
    assert keys == [1]
    # Its chunks are freed; the other client's window is all that is left.
    _wait_for(lambda: _held(server) < 64 * _KIB, 'the chunks to be freed')
    before = dict(progress)
    _wait_for(lambda: progress['sampled'] >= before['sampled'] + 5,
              'the other client to go on')
  finally:
    stop.set()
    other.join(_TIMEOUT)
  assert not errors, errors
  # The greedy stream's item is still there and intact.
  info = client.server_info()['t']
  assert info.current_size == progress['inserted'] + 1
  # Uniform over the table: 20 draws per item miss it with p = e^-20.
  seen = set()
  for _ in range(-(-20 * info.current_size // 200)):
    samples, status = proto.sample('t', 200)
    assert status.code == _OK, status
    seen.update(entry[0].info.item.key for entry in samples)
    if 1 in seen:
      break
  assert 1 in seen
  proto.channel.close()


def test_streams_past_the_total_cap_fail_and_the_others_go_on(pb, start):
  server = start(max_held_chunk_bytes_per_stream=256 * _KIB,
                 max_held_chunk_bytes=300 * _KIB)
  proto = Protocol(pb, server.port)
  first = RawInsertStream(proto)
  for key in (1, 2, 3):
    first.send(_chunk_request(proto, key, 64 * _KIB, keep=list(range(1, 4))))
  _wait_for(lambda: _held(server) >= 3 * 64 * _KIB, 'the first stream')
  second = RawInsertStream(proto)
  for key in (11, 12):
    second.send(_chunk_request(proto, key, 64 * _KIB, keep=[11, 12]))
  keys, status = second.finish()
  assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED, status
  assert 'max_held_chunk_bytes (307200 bytes)' in status.details
  assert keys == []
  # The first stream is unaffected: its kept chunks still make items.
  first.send(proto.request(items=[
      proto.item(100 + key, 't', [(key, 0, 1, 0)]) for key in (1, 2, 3)]))
  keys, status = first.finish()
  assert status.code == _OK, status
  assert sorted(keys) == [101, 102, 103]
  _wait_for(lambda: _held(server) == 0, 'the streams to release everything')
  proto.channel.close()


def test_chunks_released_by_keep_chunk_keys_are_no_longer_held(pb, start):
  # A window that slides: the stream never holds more than two chunks.
  server = start(max_held_chunk_bytes_per_stream=200 * _KIB)
  proto = Protocol(pb, server.port)
  stream = RawInsertStream(proto)
  for key in range(1, 21):
    stream.send(_chunk_request(proto, key, 64 * _KIB,
                               keep=[key - 1, key] if key > 1 else [key],
                               item_table='t'))
  keys, status = stream.finish()
  assert status.code == _OK, status
  assert sorted(keys) == list(range(1, 21))
  proto.channel.close()


def _assert_holds_about_its_window(server, write_steps, window, step_bytes):
  """While `write_steps` writes (yielding after each step), the server holds
  between half a window and two windows of `window` steps; afterwards
  nothing."""
  peak = 0
  for _ in write_steps():
    peak = max(peak, _held(server))
  assert window * step_bytes * 0.5 <= peak
  assert peak <= 2 * window * step_bytes * 1.05
  _wait_for(lambda: _held(server) == 0, 'the writer to release everything')


@pytest.mark.parametrize('keep_alive', [4, 32])
def test_trajectory_writer_holds_about_its_keep_alive_window(start,
                                                             keep_alive):
  # The server holds the chunks of the writer's last `keep_alive` steps: at
  # most 2 * keep_alive steps' bytes (chunks are at most keep_alive long),
  # which is how the default of 1 GiB per stream was sized (docs).
  server = start()
  client = server.localhost_client()
  step_bytes = 16 * _KIB

  def steps():
    with client.trajectory_writer(num_keep_alive_refs=keep_alive) as writer:
      for step in range(4 * keep_alive):
        writer.append({'x': _floats(step_bytes, seed=step)[0]})
        writer.create_item('t', 1.0,
                           {'x': writer.history['x'][-min(step + 1, 2):]})
        writer.flush(timeout_ms=_TIMEOUT * 1000)
        yield

  _assert_holds_about_its_window(server, steps, keep_alive, step_bytes)


def test_legacy_writer_holds_about_its_max_sequence_length(start):
  server = start()
  client = server.localhost_client()
  step_bytes = 16 * _KIB
  max_sequence_length = 8

  def steps():
    with client.writer(max_sequence_length) as writer:
      for step in range(40):
        writer.append(_floats(step_bytes, seed=step)[0])
        writer.create_item('t', min(step + 1, max_sequence_length), 1.0)
        writer.flush()
        yield

  _assert_holds_about_its_window(server, steps, max_sequence_length,
                                 step_bytes)


def test_trajectory_writer_past_the_cap_raises_naming_it(start):
  server = start(max_held_chunk_bytes_per_stream=256 * _KIB)
  client = server.localhost_client()
  with pytest.raises(IndexError, match='max_held_chunk_bytes_per_stream'):
    with client.trajectory_writer(num_keep_alive_refs=64) as writer:
      for step in range(64):
        writer.append({'x': _floats(16 * _KIB, seed=step)[0]})
        writer.create_item('t', 1.0, {'x': writer.history['x'][:]})
        writer.flush(timeout_ms=_TIMEOUT * 1000)
  # The server goes on serving a writer within the cap.
  with client.trajectory_writer(num_keep_alive_refs=2) as writer:
    writer.append({'x': np.zeros(4, np.float32)})
    writer.create_item('t', 1.0, {'x': writer.history['x'][-1:]})
  assert client.server_info()['t'].current_size >= 1


# --- Messages, streams, requests ----------------------------------------------


def test_message_past_max_message_bytes_is_exhausted(pb, start):
  server = start(max_message_bytes=1 * _MIB)
  proto = Protocol(pb, server.port)
  keys, status = proto.insert(
      [_chunk_request(proto, 1, 2 * _MIB, keep=[], item_table='t')])
  assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED, status
  assert keys == []
  keys, status = proto.insert(
      [_chunk_request(proto, 2, 512 * _KIB, keep=[], item_table='t')])
  assert status.code == _OK, status
  assert keys == [2]
  proto.channel.close()


def _sample_request(proto, num_samples, table='t'):
  return proto.pb.service.SampleStreamRequest(table=table,
                                              num_samples=num_samples)


def test_streams_past_max_concurrent_streams_wait_for_a_free_one(pb, start):
  server = start(max_concurrent_streams_per_connection=2)
  proto = Protocol(pb, server.port)
  # The table is empty: each sample stream waits at the table.
  calls = [proto.stub.SampleStream(iter([_sample_request(proto, 1)]),
                                   timeout=_TIMEOUT) for _ in range(3)]
  _wait_for(lambda: _open_streams(server) == 2, 'two streams')
  time.sleep(0.5)
  assert _open_streams(server) == 2  # The third waits on the client.
  # Another connection is not limited by this one's streams.
  other = grpc.insecure_channel(f'localhost:{server.port}',
                                options=[('grpc.use_local_subchannel_pool', 1)])
  other_call = pb.Stub(other).SampleStream(
      iter([_sample_request(proto, 1)]), timeout=_TIMEOUT)
  _wait_for(lambda: _open_streams(server) == 3, 'the other connection')
  calls[0].cancel()
  _wait_for(lambda: _open_streams(server) == 3, 'the third stream to start')
  other_call.cancel()
  # Now an item (over another connection: this one has no free slot), and
  # the waiting streams are served.
  server.localhost_client().insert(np.zeros(4, np.float32), {'t': 1.0})
  for call in calls[1:]:
    assert len(list(call)) == 1
  other.close()
  proto.channel.close()


def test_num_samples_past_max_samples_per_request_is_invalid_argument(
    pb, start):
  server = start(max_samples_per_request=100)
  proto = Protocol(pb, server.port)
  keys, status = proto.insert(
      [_chunk_request(proto, 1, 1 * _KIB, keep=[], item_table='t')])
  assert status.code == _OK, status
  samples, status = proto.sample('t', 101)
  assert status.code == grpc.StatusCode.INVALID_ARGUMENT, status
  assert status.details == ('`num_samples` must be <= 100 (the server\'s '
                            'max_samples_per_request), got 101.')
  assert samples == []
  samples, status = proto.sample('t', 100)
  assert status.code == _OK, status
  assert len(samples) == 100
  proto.channel.close()


def test_unknown_table_is_still_not_found_under_limits(pb, start):
  server = start(max_samples_per_request=100)
  proto = Protocol(pb, server.port)
  _, status = proto.sample('nope', 10)
  assert status.code == grpc.StatusCode.NOT_FOUND, status
  _, status = proto.insert([_chunk_request(proto, 1, 1 * _KIB, keep=[],
                                           item_table='nope')])
  assert status.code == grpc.StatusCode.NOT_FOUND, status
  _wait_for(lambda: _held(server) == 0, 'the chunks to be freed')
  proto.channel.close()


# --- Sample streams whose client does not read --------------------------------


def _insert_large_item(proto, key=1, num_bytes=1 * _MIB):
  keys, status = proto.insert(
      [_chunk_request(proto, key, num_bytes, keep=[], item_table='t')])
  assert status.code == _OK, status


def _unreading_channel(port: int) -> grpc.Channel:
  """A channel (of its own) for calls whose responses are not read.

  Without BDP probing its receive windows stay at their initial 64 KiB, so
  the server's unread streams stall; with it, grpcio may keep widening them
  and buffer gigabytes of responses nobody asked for in this process.
  """
  return grpc.insecure_channel(
      f'localhost:{port}',
      options=[('grpc.use_local_subchannel_pool', 1),
               ('grpc.max_send_message_length', -1),
               ('grpc.http2.bdp_probe', 0)])


def test_stalled_sample_stream_is_cancelled(pb, start):
  server = start(stalled_sample_stream_timeout_seconds=1.0)
  proto = Protocol(pb, server.port)
  _insert_large_item(proto)
  # 10 GB asked for and never read: flow control stops the server, and
  # after a second the stream is cancelled.
  channel = _unreading_channel(server.port)
  call = pb.Stub(channel).SampleStream(
      iter([_sample_request(proto, 10_000)]), timeout=120)
  _wait_for(lambda: _open_streams(server) == 1, 'the stream to open')
  _wait_for(lambda: _open_streams(server) == 0, 'the stream to be cancelled')
  received = 0
  with pytest.raises(grpc.RpcError) as error:
    for response in call:
      received += len(response.entries)
  assert error.value.code() == grpc.StatusCode.CANCELLED
  assert received < 10_000
  samples, status = proto.sample('t', 3)  # The server goes on.
  assert status.code == _OK, status
  assert len(samples) == 3
  proto.channel.close()
  channel.close()


def test_sample_stream_that_is_read_is_not_cancelled(pb, start):
  server = start(stalled_sample_stream_timeout_seconds=10.0)
  proto = Protocol(pb, server.port)
  _insert_large_item(proto)
  samples, status = proto.sample('t', 300)  # 300 MB, read as it comes.
  assert status.code == _OK, status
  assert len(samples) == 300
  proto.channel.close()


# --- 200 abandoned streams, the server in a process of its own ----------------

_SERVER_SCRIPT = r'''
import json, sys
import reverb
limits = reverb.ServerLimits(
    max_held_chunk_bytes_per_stream=2 << 20, max_held_chunk_bytes=16 << 20,
    stalled_sample_stream_timeout_seconds=3.0)
table = reverb.Table('t', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                     max_size=1000,
                     rate_limiter=reverb.rate_limiters.MinSize(1))
server = reverb.Server([table], limits=limits)
print(server.port, flush=True)
for _ in sys.stdin:
  print(json.dumps({'open': server._server.num_open_streams,
                    'held': server._server.held_chunk_bytes}), flush=True)
'''


def _rss(pid='self') -> int:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * _KIB
  raise AssertionError('no VmRSS')


class ServerProcess:
  """A server in a subprocess: its port, RSS and stream counts."""

  def __init__(self):
    self.process = subprocess.Popen(
        [sys.executable, '-c', _SERVER_SCRIPT], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    self.port = int(self.process.stdout.readline())

  def rss(self) -> int:
    return _rss(self.process.pid)

  def stats(self) -> dict:
    self.process.stdin.write('\n')
    self.process.stdin.flush()
    return json.loads(self.process.stdout.readline())

  def stop(self):
    self.process.stdin.close()
    self.process.wait(_TIMEOUT)


def test_200_abandoned_streams_leave_rss_bounded_and_the_server_serving(pb):
  server = ServerProcess()
  channels = []
  gone = threading.Event()

  def abandoned(requests):
    """Sends `requests`, then neither sends, half-closes nor reads."""
    yield from requests
    gone.wait()

  try:
    proto = Protocol(pb, server.port)
    for key in range(1, 9):  # 8 MB of stored items.
      _insert_large_item(proto, key)
    samples, status = proto.sample('t', 20)  # Warm up the sample path.
    assert status.code == _OK, status
    baseline = server.rss()

    # 100 sample streams asking for 10 GB each, and 100 insert streams
    # that keep 4 MB of chunks each, on 10 connections; nobody reads, and
    # nobody closes.
    calls = []
    for i in range(10):
      channel = _unreading_channel(server.port)
      channels.append(channel)
      stub = pb.Stub(channel)
      for j in range(10):
        calls.append(stub.SampleStream(
            iter([_sample_request(proto, 10_000)]), timeout=120))
        requests = [_chunk_request(proto, 1000 * (10 * i + j) + k, 256 * _KIB,
                                   keep=list(range(k + 1)))
                    for k in range(16)]
        calls.append(stub.InsertStream(abandoned(requests), timeout=120))
    peak = 0
    own_baseline = _rss()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
      peak = max(peak, server.rss())
      stats = server.stats()
      assert stats['held'] <= 16 << 20
      # This process's unread responses must stay in the transport's
      # windows (a guard: a client stack that reads ahead would fill the
      # machine's memory, not fail this test).
      assert _rss() - own_baseline < 1 << 30
      time.sleep(0.1)
    # While they are open, another client is served.
    keys, status = proto.insert(
        [_chunk_request(proto, 99, 1 * _KIB, keep=[], item_table='t')])
    assert (keys, status.code) == ([99], _OK), status
    samples, status = proto.sample('t', 5)
    assert (len(samples), status.code) == (5, _OK), status
    # The stalled sample streams are cancelled, the insert streams have
    # failed on the caps: nothing is left open, nothing held.
    last = {}

    def ended():
      last.update(server.stats())
      return last == {'open': 0, 'held': 0}

    try:
      _wait_for(ended, 'the streams to end', timeout=60)
    except AssertionError as e:
      raise AssertionError(f'{e}: {last}') from None
    for _ in range(10):
      peak = max(peak, server.rss())
    growth = peak - baseline
    print(f'RSS: baseline {baseline / _MIB:.0f} MiB, peak growth '
          f'{growth / _MIB:.0f} MiB')
    # Without the limits the insert streams alone would hold 400 MB.
    assert growth < 150 * _MIB
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      writer.append({'x': np.zeros(4, np.float32)})
      writer.create_item('t', 1.0, {'x': writer.history['x'][-1:]})
    assert len(list(client.sample('t', 5, emit_timesteps=False))) == 5
  finally:
    gone.set()
    for channel in channels:
      channel.close()
    server.stop()


# --- reverb_server --------------------------------------------------------------

_CONFIG = '''
tables: {
  table_name: "t"
  sampler: { uniform: true }
  remover: { fifo: true }
  max_size: 1000
  rate_limiter: {
    samples_per_insert: 1.0
    min_size_to_sample: 1
    min_diff: -1.7976931348623157e+308
    max_diff: 1.7976931348623157e+308
  }
}
'''
_REVERB_SERVER = os.path.join(os.path.dirname(sys.executable), 'reverb_server')


def test_reverb_server_flags_set_the_limits(pb):
  server = subprocess.Popen(
      [_REVERB_SERVER, '--config', _CONFIG, '--max_samples_per_request=10',
       '--max_held_chunk_bytes_per_stream=65536'],
      stdout=subprocess.PIPE, text=True)
  try:
    line = server.stdout.readline()
    assert line.startswith('Reverb server listening on port '), line
    proto = Protocol(pb, int(line.split()[-1]))
    keys, status = proto.insert(
        [_chunk_request(proto, 1, 1 * _KIB, keep=[], item_table='t')])
    assert (keys, status.code) == ([1], _OK), status
    _, status = proto.sample('t', 11)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT, status
    assert 'max_samples_per_request' in status.details
    _, status = proto.insert(
        [_chunk_request(proto, 2, 128 * _KIB, keep=[2], item_table='t')])
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED, status
    assert 'max_held_chunk_bytes_per_stream (65536 bytes)' in status.details
    proto.channel.close()
  finally:
    server.kill()
    server.wait(_TIMEOUT)


def test_reverb_server_refuses_a_limit_that_is_not_positive():
  result = subprocess.run(
      [_REVERB_SERVER, '--config', _CONFIG, '--max_message_bytes=0'],
      capture_output=True, text=True, timeout=_TIMEOUT, check=False)
  assert result.returncode == 2
  assert 'max_message_bytes must be > 0' in result.stderr
