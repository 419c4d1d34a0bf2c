"""Prometheus metrics (`reverb.Server(metrics_port=...)`, cc/service/metrics.h):
the exposition parsed with prometheus_client's parser, exact counts after
known traffic checked against server_info(), the HTTP responder's answers to
other paths and garbage, and a real Prometheus scraping a server."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import reverb

parser = pytest.importorskip(
    'prometheus_client.parser',
    reason='prometheus_client is not installed (pip install prometheus_client)')

TIMEOUT = 60  # Only to avoid hangs.


def _scrape(port, path='/metrics'):
  with urllib.request.urlopen(f'http://127.0.0.1:{port}{path}',
                              timeout=TIMEOUT) as response:
    assert response.status == 200
    assert response.headers['Content-Type'].startswith(
        'text/plain; version=0.0.4')
    return response.read().decode()


def _families(port):
  return {family.name: family
          for family in parser.text_string_to_metric_families(_scrape(port))}


def _value(families, family, sample_name=None, **labels):
  """The value of the sample of `family` with `labels` (all of them)."""
  sample_name = sample_name or family
  values = [s.value for s in families[family].samples
            if s.name == sample_name and s.labels == labels]
  assert len(values) == 1, (family, sample_name, labels,
                            families[family].samples)
  return values[0]


def _counter(families, family, **labels):
  """A counter's value (its family is named without the _total)."""
  return _value(families, family, f'{family}_total', **labels)


def _histogram(families, name):
  """(cumulative bucket counts by upper bound, count, sum)."""
  samples = families[name].samples
  buckets = {s.labels['le']: s.value for s in samples
             if s.name == f'{name}_bucket'}
  count = next(s.value for s in samples if s.name == f'{name}_count')
  total = next(s.value for s in samples if s.name == f'{name}_sum')
  return buckets, count, total


def _listening_ports():
  """TCP ports this process listens on (from /proc)."""
  inodes = set()
  for fd in os.listdir('/proc/self/fd'):
    try:
      target = os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
      continue
    if target.startswith('socket:['):
      inodes.add(target[8:-1])
  ports = set()
  for table in ('/proc/net/tcp', '/proc/net/tcp6'):
    with open(table) as f:
      for line in f.readlines()[1:]:
        fields = line.split()
        if fields[3] == '0A' and fields[9] in inodes:  # LISTEN.
          ports.add(int(fields[1].rsplit(':', 1)[1], 16))
  return ports


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def test_metrics_are_off_by_default():
  before = _listening_ports()
  server = reverb.Server([reverb.Table.queue('q', 10)])
  try:
    assert server.metrics_port is None
    assert _listening_ports() - before == {server.port}
  finally:
    server.stop()
  server = reverb.Server([reverb.Table.queue('q', 10)], metrics_port=0)
  try:
    assert server.metrics_port > 0
    assert _listening_ports() - before == {server.port, server.metrics_port}
  finally:
    server.stop()
  assert not _listening_ports() - before


def test_exact_counts_after_known_traffic(monkeypatch, tmp_path):
  monkeypatch.setenv('REVERB_IN_PROCESS', '0')  # Through the service.
  server = reverb.Server(
      [reverb.Table(name='uniform', sampler=reverb.selectors.Uniform(),
                    remover=reverb.selectors.Fifo(), max_size=5,
                    rate_limiter=reverb.rate_limiters.MinSize(1)),
       reverb.Table.queue('queue', 10)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(tmp_path)),
      metrics_port=0)
  try:
    client = server.localhost_client()
    for i in range(8):  # 3 evicted.
      client.insert(np.full([16], i, np.int32), {'uniform': 1.0})
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(3):
        writer.append({'x': np.int32(i)})
        writer.create_item('queue', 1.0, writer.history['x'][-1:])
      writer.flush()
      families = _families(server.metrics_port)
      assert _value(families, 'reverb_server_open_streams', kind='insert') >= 1
    samples = list(client.sample('uniform', num_samples=4))
    assert len(samples) == 4
    assert len(list(client.sample('queue', num_samples=2))) == 2
    key = samples[0][0].info.key
    client.mutate_priorities('uniform', updates={key: 2.0})

    families = _families(server.metrics_port)
    # The client keeps its streams open: the kinds add up to the server's.
    open_streams = [_value(families, 'reverb_server_open_streams', kind=kind)
                    for kind in ('insert', 'sample')]
    # pylint: disable-next=protected-access
    assert sum(open_streams) == server._server.num_open_streams
    assert min(open_streams) >= 1
    info = client.server_info()
    for name, deletes in (('uniform', 3), ('queue', 2)):
      table = info[name]
      assert _value(families, 'reverb_table_size', table=name) == (
          table.current_size)
      assert _value(families, 'reverb_table_max_size', table=name) == (
          table.max_size)
      assert _counter(families, 'reverb_table_inserts', table=name) == (
          table.rate_limiter_info.insert_stats.completed)
      assert _counter(families, 'reverb_table_samples', table=name) == (
          table.rate_limiter_info.sample_stats.completed)
      assert _counter(families, 'reverb_table_deletes', table=name) == deletes
      # One chunk per item, none shared.
      assert _value(families, 'reverb_table_chunks', table=name) == (
          table.current_size)
      assert _value(families, 'reverb_table_items_per_chunk', table=name) == 1
    assert _counter(families, 'reverb_table_inserts', table='uniform') == 8
    assert _counter(families, 'reverb_table_samples', table='uniform') == 4
    assert _value(families, 'reverb_table_chunk_bytes', table='uniform') > (
        5 * 16 * 4 / 2)  # Five chunks of 64 bytes (compressed a little).

    for name, count in (('reverb_insert_latency_seconds', 11),
                        ('reverb_mutate_latency_seconds', 1),
                        ('reverb_sample_latency_seconds', None)):
      buckets, total, seconds = _histogram(families, name)
      assert list(buckets)[-1] == '+Inf'
      cumulative = list(buckets.values())
      assert cumulative == sorted(cumulative), buckets
      assert buckets['+Inf'] == total
      assert seconds >= 0
      if count is None:
        assert total >= 2  # At least a table batch per request.
      else:
        assert total == count, name

    path = pathlib.Path(client.checkpoint())
    families = _families(server.metrics_port)
    assert _counter(families, 'reverb_checkpoints') == 1
    assert _value(families, 'reverb_checkpoint_in_progress') == 0
    assert _value(families, 'reverb_checkpoint_last_size_bytes') == sum(
        f.stat().st_size for f in path.iterdir())
    assert _value(families, 'reverb_checkpoint_last_duration_seconds') > 0
    chunk_bytes = sum(_value(families, 'reverb_table_chunk_bytes', table=t)
                      for t in ('uniform', 'queue'))
    assert _value(families, 'reverb_checkpoint_progress_bytes') == chunk_bytes
    assert _value(families, 'reverb_process_resident_memory_bytes') > 1 << 20
  finally:
    server.stop()


def test_rate_limiter_blocking_is_counted(monkeypatch):
  monkeypatch.setenv('REVERB_IN_PROCESS', '0')
  server = reverb.Server(
      [reverb.Table(name='t', sampler=reverb.selectors.Fifo(),
                    remover=reverb.selectors.Fifo(), max_size=100,
                    rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
                        samples_per_insert=1.0, min_size_to_sample=1,
                        error_buffer=1.0))],
      metrics_port=0)
  try:
    client = server.localhost_client()
    with pytest.raises(reverb.errors.DeadlineExceededError):
      list(client.sample('t', num_samples=1, timeout=0.1))
    families = _families(server.metrics_port)
    assert _counter(families, 'reverb_table_samples_blocked', table='t') == 1
    assert _counter(families, 'reverb_table_sample_blocked_seconds',
                    table='t') >= 0.05
    window = [_value(families, f'reverb_table_rate_limiter_{n}', table='t')
              for n in ('min_diff', 'cursor', 'max_diff')]
    info = client.server_info()['t'].rate_limiter_info
    assert window == [info.min_diff, 0, info.max_diff]
  finally:
    server.stop()


def _raw(port, request: bytes) -> bytes:
  with socket.create_connection(('127.0.0.1', port), timeout=TIMEOUT) as s:
    s.sendall(request)
    answer = b''
    while chunk := s.recv(65536):
      answer += chunk
  return answer


def test_other_paths_and_garbage_get_404_and_400():
  server = reverb.Server([reverb.Table.queue('q', 10)], metrics_port=0)
  try:
    client = server.localhost_client()
    client.insert(np.int32(1), {'q': 1.0})
    port = server.metrics_port
    with pytest.raises(urllib.error.HTTPError) as error:
      _scrape(port, '/')
    assert error.value.code == 404
    assert _raw(port, b'POST /metrics HTTP/1.1\r\n\r\n').startswith(
        b'HTTP/1.1 404 ')
    rng = np.random.default_rng(0)
    for size in (1, 100, 5000, 100_000):
      garbage = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
      answer = _raw(port, garbage + b'\r\n\r\n')
      assert answer.startswith(b'HTTP/1.1 400 ') or answer == b'', answer[:80]
    # The server and its tables are unaffected.
    assert 'reverb_table_size{table="q"} 1' in _scrape(port)
    assert client.server_info()['q'].current_size == 1
  finally:
    server.stop()


def test_metrics_port_in_use_is_a_value_error():
  with socket.socket() as taken:
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    with pytest.raises(ValueError, match='Could not listen for metrics'):
      reverb.Server([reverb.Table.queue('q', 10)],
                    metrics_port=taken.getsockname()[1])


def test_reverb_server_metrics_port_flag():
  config = ('port: 0 tables: { table_name: "t" sampler { uniform: true } '
            'remover { fifo: true } max_size: 10 rate_limiter { '
            'samples_per_insert: 1 min_size_to_sample: 1 min_diff: -1e9 '
            'max_diff: 1e9 } }')
  process = subprocess.Popen(
      [sys.executable, '-m', 'reverb.server_executable.server_main',
       f'--config={config}', '--metrics_port=0'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    assert 'listening on port' in process.stdout.readline()
    line = process.stdout.readline()
    assert line.startswith('Reverb metrics at http://localhost:'), line
    port = int(line.rsplit(':', 1)[1].split('/')[0])
    assert 'reverb_table_max_size{table="t"} 10' in _scrape(port)
  finally:
    process.terminate()
    process.wait(timeout=TIMEOUT)


def test_a_real_prometheus_scrapes_the_server(tmp_path):
  binary = shutil.which('prometheus') or '/usr/bin/prometheus'
  if not os.access(binary, os.X_OK):
    pytest.skip('no prometheus binary (apt-get install prometheus)')
  server = reverb.Server([reverb.Table.queue('scraped', 10)], metrics_port=0)
  client = server.localhost_client()
  for i in range(3):
    client.insert(np.int32(i), {'scraped': 1.0})
  web_port = _free_port()
  config = tmp_path / 'prometheus.yml'
  config.write_text(
      'global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n'
      'scrape_configs:\n  - job_name: reverb\n    static_configs:\n'
      f'      - targets: ["127.0.0.1:{server.metrics_port}"]\n')
  log = open(tmp_path / 'prometheus.log', 'w')
  process = subprocess.Popen(
      [binary, f'--config.file={config}',
       f'--storage.tsdb.path={tmp_path / "data"}',
       f'--web.listen-address=127.0.0.1:{web_port}'],
      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
  try:
    query = (f'http://127.0.0.1:{web_port}/api/v1/query?'
             'query=reverb_table_size')
    deadline = time.monotonic() + TIMEOUT
    result = None
    while time.monotonic() < deadline and process.poll() is None:
      try:
        with urllib.request.urlopen(query, timeout=5) as response:
          result = json.loads(response.read())['data']['result']
      except (urllib.error.URLError, ConnectionError, KeyError):
        result = None
      if result:
        break
      time.sleep(0.5)
    assert result, (tmp_path / 'prometheus.log').read_text()[-3000:]
    assert [(r['metric']['table'], r['value'][1]) for r in result] == [
        ('scraped', '3')]
  finally:
    process.kill()
    process.wait(timeout=TIMEOUT)
    log.close()
    server.stop()
