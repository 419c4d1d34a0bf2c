"""TLS, mutual TLS and auth tokens (docs/concepts.md, "Security").

Certificates are made at test time (tls_certs.py, Debian's `openssl`). Every
refused call is checked for its exception, the cause its message names, and
how long it took: well inside its timeout, and without the client's retry
loops (the writers', the samplers', the connection wait) going on.
"""

import contextlib
import logging
import os
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

import reverb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tls_certs  # pylint: disable=g-import-not-at-top,wrong-import-position

pytestmark = pytest.mark.skipif(not tls_certs.available(),
                                reason='needs the openssl command')

_TOKEN = 'tok-3f9a1c77e2'
_HERE = pathlib.Path(__file__).resolve().parent
_DMREVERB_PYTHON = _HERE.parent.parent / '.venv-dmreverb' / 'bin' / 'python'
# A refused call must fail well before this (seconds); the client's own
# connect wait without a timeout is 10 s.
_FAST = 5.0


@pytest.fixture(name='certs', scope='module')
def certs_fixture(tmp_path_factory):
  return tls_certs.make(tmp_path_factory.mktemp('certs'))


def _tables():
  return [reverb.Table.queue('q', 100),
          reverb.Table('u', reverb.selectors.Uniform(), reverb.selectors.Fifo(),
                       100, reverb.rate_limiters.MinSize(1))]


def _server_tls(certs, **kwargs):
  return reverb.TlsOptions(certificate_chain=certs.server_chain,
                           private_key=certs.server_key, **kwargs)


def _client_tls(certs, **kwargs):
  return reverb.TlsOptions(root_certificates=certs.ca, **kwargs)


def _round_trip(client):
  """Every kind of call works: insert, sample, server_info, writers."""
  client.insert(np.arange(3, dtype=np.int32), {'u': 1.0})
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append([np.float32(7)])
    writer.create_item('q', 1.0, [writer.history[0][-1:]])
    writer.flush(timeout_ms=10_000)
  assert client.server_info(timeout=10)['u'].current_size == 1
  [sample] = list(client.sample('u', num_samples=1, timeout=10,
                                emit_timesteps=False))
  np.testing.assert_array_equal(sample.data[0],
                                [np.arange(3, dtype=np.int32)])
  [sample] = list(client.sample('q', num_samples=1, timeout=10,
                                emit_timesteps=False))
  assert float(np.asarray(sample.data[0]).ravel()[0]) == 7.0
  client.mutate_priorities('u', updates={sample.info.key: 2.0}, timeout=10)
  client.reset('q', timeout=10)


@contextlib.contextmanager
def _raises_fast(*fragments, limit=_FAST):
  """The block raises RuntimeError or ValueError naming every fragment,
  within `limit` seconds; returns the exception's text."""
  start = time.monotonic()
  with pytest.raises((RuntimeError, ValueError)) as error:
    yield error
  elapsed = time.monotonic() - start
  text = str(error.value)
  for fragment in fragments:
    assert fragment in text, text
  assert _TOKEN not in text
  assert elapsed < limit, f'took {elapsed:.1f} s: {text}'


def test_tls(certs):
  with reverb.Server(_tables(), tls=_server_tls(certs)) as server:
    _round_trip(reverb.Client(f'localhost:{server.port}',
                              tls=_client_tls(certs)))


def test_tls_from_pem_bytes_and_server_name_override(certs):
  tls = reverb.TlsOptions(certificate_chain=certs.server_chain.read_bytes(),
                          private_key=certs.server_key.read_bytes())
  with reverb.Server(_tables(), tls=tls) as server:
    client = reverb.Client(
        f'127.0.0.1:{server.port}',
        tls=reverb.TlsOptions(root_certificates=certs.ca.read_bytes(),
                              server_name_override='localhost'))
    assert 'u' in client.server_info(timeout=10)


def test_localhost_client_of_secured_server(certs, tmp_path):
  with reverb.Server(_tables(), auth_token=_TOKEN,
                     unix_socket_path=tmp_path / 's.sock') as server:
    _round_trip(server.localhost_client())


def test_mutual_tls(certs):
  tls = _server_tls(certs, root_certificates=certs.ca, require_client_auth=True)
  with reverb.Server(_tables(), tls=tls) as server:
    address = f'localhost:{server.port}'
    _round_trip(reverb.Client(address, tls=_client_tls(
        certs, certificate_chain=certs.client_chain,
        private_key=certs.client_key)))
    without_certificate = reverb.Client(address, tls=_client_tls(certs))
    # Under TLS 1.3 the client's side of the handshake completes before the
    # server refuses it, and a loaded machine can let the call start first:
    # then it is explained at its timeout.
    with _raises_fast('Unauthenticated', 'certificate', limit=8):
      without_certificate.server_info(timeout=3)


def test_token(certs):
  with reverb.Server(_tables(), tls=_server_tls(certs),
                     auth_token=_TOKEN) as server:
    address = f'localhost:{server.port}'
    _round_trip(reverb.Client(address, tls=_client_tls(certs),
                              auth_token=_TOKEN))
    missing = reverb.Client(address, tls=_client_tls(certs))
    wrong = reverb.Client(address, tls=_client_tls(certs),
                          auth_token=_TOKEN + 'x')
    with _raises_fast('Unauthenticated', 'no auth token'):
      missing.server_info(timeout=10)
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      wrong.server_info(timeout=10)
    # Without a timeout too, and the streams: the writer and the sampler do
    # not retry.
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      wrong.server_info()
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      wrong.insert(np.float32(1), {'u': 1.0})
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      list(wrong.sample('u', num_samples=1))
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      with wrong.trajectory_writer(num_keep_alive_refs=1) as writer:
        writer.append([np.float32(1)])
        writer.create_item('u', 1.0, [writer.history[0][-1:]])
        writer.flush()
    with _raises_fast('Unauthenticated', 'wrong auth token'):
      iterator = reverb.ReplayIterator(address, 'u', 1, tls=_client_tls(certs),
                                       auth_token='nope',
                                       unpack_as_table_signature=False)
      next(iterator)
    for call in (lambda: wrong.reset('u', timeout=10),
                 lambda: wrong.mutate_priorities('u', {1: 1.0}, timeout=10),
                 lambda: wrong.checkpoint()):
      with _raises_fast('Unauthenticated'):
        call()


def test_token_over_unix_socket(tmp_path):
  path = tmp_path / 'replay.sock'
  with reverb.Server(_tables(), port=None, unix_socket_path=path,
                     auth_token=_TOKEN):
    _round_trip(reverb.Client(f'unix:{path}', auth_token=_TOKEN))
    with _raises_fast('Unauthenticated', 'no auth token'):
      reverb.Client(f'unix:{path}').server_info(timeout=10)


def test_token_on_plain_tcp_loopback():
  with reverb.Server(_tables(), auth_token=_TOKEN) as server:
    _round_trip(reverb.Client(f'localhost:{server.port}', auth_token=_TOKEN))


@pytest.mark.parametrize('timeout', [10, None])
def test_server_certificate_that_does_not_verify(certs, timeout):
  with reverb.Server(_tables(), tls=_server_tls(certs)) as server:
    client = reverb.Client(f'localhost:{server.port}',
                           tls=reverb.TlsOptions(
                               root_certificates=certs.other_ca))
    with _raises_fast('Unauthenticated', 'certificate'):
      client.server_info(timeout=timeout)
    with _raises_fast('Unauthenticated', 'certificate'):
      client.insert(np.float32(1), {'u': 1.0})
    with _raises_fast('Unauthenticated', 'certificate'):
      list(client.sample('u', num_samples=1, timeout=timeout))


def test_server_name_that_does_not_match(certs):
  with reverb.Server(_tables(), tls=_server_tls(certs)) as server:
    client = reverb.Client(f'localhost:{server.port}', tls=_client_tls(
        certs, server_name_override='elsewhere.example'))
    with _raises_fast('Unauthenticated', 'certificate'):
      client.server_info(timeout=10)


def test_plaintext_client_against_tls_server(certs):
  with reverb.Server(_tables(), tls=_server_tls(certs)) as server:
    client = reverb.Client(f'localhost:{server.port}')
    with _raises_fast('Unauthenticated', 'TLS'):
      client.server_info(timeout=10)
    with _raises_fast('Unauthenticated', 'TLS'):
      client.insert(np.float32(1), {'u': 1.0})


def test_tls_client_against_plaintext_server(certs):
  with reverb.Server(_tables()) as server:
    client = reverb.Client(f'localhost:{server.port}', tls=_client_tls(certs))
    with _raises_fast('Unauthenticated', 'TLS'):
      client.server_info(timeout=10)


def test_bad_configurations(certs, tmp_path):
  with pytest.raises(ValueError, match='go together'):
    reverb.Server(_tables(), tls=reverb.TlsOptions(
        certificate_chain=certs.server_chain))
  with pytest.raises(ValueError, match='need TLS'):
    reverb.Server(_tables(), tls=reverb.TlsOptions(
        root_certificates=certs.ca, require_client_auth=True))
  missing = str(tmp_path / 'missing.pem')
  with pytest.raises(ValueError, match='missing.pem'):
    reverb.Server(_tables(), tls=reverb.TlsOptions(
        certificate_chain=missing, private_key=certs.server_key))
  with pytest.raises(ValueError, match='missing.pem'):
    reverb.Client('localhost:1', tls=reverb.TlsOptions(
        root_certificates=missing))
  with pytest.raises(ValueError, match='printable ASCII'):
    reverb.Server(_tables(), auth_token='two words')
  with pytest.raises(ValueError, match='go together'):
    reverb.Client('localhost:1', tls=reverb.TlsOptions(
        certificate_chain=certs.client_chain))


def test_warns_once_when_exposed_without_security(caplog, certs):
  def warnings():
    found = [r for r in caplog.records if r.name == 'reverb' and
             r.levelno == logging.WARNING and 'neither TLS' in r.getMessage()]
    caplog.clear()
    return found
  with reverb.Server(_tables(), bind_address='0.0.0.0'):
    pass
  assert len(warnings()) == 1
  with reverb.Server(_tables(), bind_address='0.0.0.0', auth_token=_TOKEN):
    pass
  with reverb.Server(_tables(), bind_address='0.0.0.0',
                     tls=_server_tls(certs)):
    pass
  with reverb.Server(_tables()):
    pass
  assert not warnings()


def _run_python(python, code, env, timeout=120):
  return subprocess.run([str(python), '-c', code], env=env, timeout=timeout,
                        capture_output=True, text=True, check=False)


_UNCHANGED_CLIENT_CODE = '''
import sys
import numpy as np
import reverb
client = reverb.Client(sys.argv[1] if len(sys.argv) > 1 else ADDRESS)
client.insert(np.float32(5), {'u': 1.0})
print('SIZE', client.server_info(timeout=10)['u'].current_size)
'''


def _env(**variables):
  env = {k: v for k, v in os.environ.items() if not k.startswith('REVERB_')}
  env.update(variables)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  return env


def test_environment_variables_secure_unchanged_code(certs, tmp_path):
  token_file = tmp_path / 'token'
  token_file.write_text(_TOKEN + '\n')
  with reverb.Server(_tables(), tls=_server_tls(certs),
                     auth_token=_TOKEN) as server:
    code = _UNCHANGED_CLIENT_CODE.replace(
        'ADDRESS', repr(f'localhost:{server.port}'))
    for token_variables in ({'REVERB_AUTH_TOKEN': _TOKEN},
                            {'REVERB_AUTH_TOKEN_FILE': str(token_file)}):
      done = _run_python(sys.executable, code, _env(
          REVERB_TLS_ROOT_CERTIFICATES=str(certs.ca), **token_variables))
      assert done.returncode == 0, done.stderr
      assert 'SIZE' in done.stdout
    # The certificate as PEM text in the variable; no token: refused.
    done = _run_python(sys.executable, code, _env(
        REVERB_TLS_ROOT_CERTIFICATES=certs.ca.read_text()))
    assert done.returncode != 0
    assert 'no auth token' in done.stderr
    # An argument wins over the variable.
    client = reverb.Client(f'localhost:{server.port}', tls=_client_tls(certs),
                           auth_token=_TOKEN)
    assert 'u' in client.server_info(timeout=10)


def test_server_reads_the_environment(certs, monkeypatch):
  monkeypatch.setenv('REVERB_AUTH_TOKEN', _TOKEN)
  monkeypatch.setenv('REVERB_TLS_CERTIFICATE_CHAIN', str(certs.server_chain))
  monkeypatch.setenv('REVERB_TLS_PRIVATE_KEY', str(certs.server_key))
  with reverb.Server(_tables()) as server:
    address = f'localhost:{server.port}'
    for name in ('REVERB_AUTH_TOKEN', 'REVERB_TLS_CERTIFICATE_CHAIN',
                 'REVERB_TLS_PRIVATE_KEY'):
      monkeypatch.delenv(name)
    with _raises_fast('Unauthenticated', 'TLS'):
      reverb.Client(address).server_info(timeout=10)
    client = reverb.Client(address, tls=_client_tls(certs), auth_token=_TOKEN)
    assert 'u' in client.server_info(timeout=10)


def test_reverb_server_flags(certs, tmp_path):
  token_file = tmp_path / 'token'
  token_file.write_text(_TOKEN)
  config = ('port: 0 tables: { table_name: "u" sampler { uniform: true } '
            'remover { fifo: true } max_size: 10 rate_limiter { '
            'samples_per_insert: 1 min_size_to_sample: 1 min_diff: -1e9 '
            'max_diff: 1e9 } }')
  process = subprocess.Popen(
      [sys.executable, '-m', 'reverb.server_executable.server_main',
       f'--config={config}', f'--tls_certificate_chain={certs.server_chain}',
       f'--tls_private_key={certs.server_key}',
       f'--tls_client_ca={certs.ca}', f'--auth_token_file={token_file}'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
  try:
    line = process.stdout.readline()
    assert 'listening on port' in line, process.stderr.read()
    address = f'localhost:{int(line.split()[-1])}'
    client = reverb.Client(address, tls=_client_tls(
        certs, certificate_chain=certs.client_chain,
        private_key=certs.client_key), auth_token=_TOKEN)
    client.insert(np.float32(1), {'u': 1.0})
    assert client.server_info(timeout=10)['u'].current_size == 1
    with _raises_fast('Unauthenticated', 'certificate', limit=8):
      reverb.Client(address, tls=_client_tls(certs),
                    auth_token=_TOKEN).server_info(timeout=3)
    with _raises_fast('Unauthenticated', 'no auth token'):
      reverb.Client(address, tls=_client_tls(
          certs, certificate_chain=certs.client_chain,
          private_key=certs.client_key)).server_info(timeout=10)
  finally:
    process.terminate()
    process.wait(timeout=30)


_DMREVERB_CODE = '''
import sys
import numpy as np
import reverb
client = reverb.Client(sys.argv[1])
try:
  client.server_info(timeout=5)
  client.insert(np.float32(1), {'u': 1.0})
  print('SIZE', client.server_info(timeout=5)['u'].current_size)
except Exception as e:
  print('REFUSED', type(e).__name__, str(e).replace(chr(10), ' '))
'''


@pytest.mark.skipif(not _DMREVERB_PYTHON.exists(),
                    reason='needs .venv-dmreverb (dm-reverb 0.14)')
def test_dmreverb_client_against_our_servers(certs):
  def run(server):
    done = subprocess.run(
        [str(_DMREVERB_PYTHON), '-I', '-c', _DMREVERB_CODE,
         f'localhost:{server.port}'],
        env=_env(), timeout=120, capture_output=True, text=True, check=False)
    return done.stdout
  with reverb.Server(_tables()) as server:
    assert 'SIZE 1' in run(server)
  with reverb.Server(_tables(), auth_token=_TOKEN) as server:
    out = run(server)
    assert 'REFUSED' in out and 'no auth token' in out, out
    assert server.localhost_client().server_info(timeout=10)[
        'u'].current_size == 0
  with reverb.Server(_tables(), tls=_server_tls(certs)) as server:
    out = run(server)
    assert 'REFUSED' in out, out


def test_sharded_client_one_set_for_all_shards(certs, tmp_path):
  with reverb.Server(_tables(), tls=_server_tls(certs),
                     auth_token=_TOKEN) as first, reverb.Server(
                         _tables(), auth_token=_TOKEN,
                         unix_socket_path=tmp_path / 'b.sock',
                         port=None) as second:
    client = reverb.Client(
        [f'localhost:{first.port}', f'unix:{second.unix_socket_path}'],
        tls=_client_tls(certs), auth_token=_TOKEN)
    for i in range(20):
      client.insert(np.float32(i), {'u': 1.0})
    sizes = [info['u'].current_size
             for info in client.shard_info(timeout=10).values()]
    assert sum(sizes) == 20
    assert len(list(client.sample('u', num_samples=10, timeout=10))) == 10
    with _raises_fast('Unauthenticated'):
      reverb.Client([f'localhost:{first.port}'], tls=_client_tls(certs),
                    auth_token='wrong').server_info(timeout=10)
