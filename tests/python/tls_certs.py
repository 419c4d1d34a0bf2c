"""Certificates for the TLS tests and benchmark, made with Debian's `openssl`.

`make(directory)` writes a certificate authority, a server certificate
(for `localhost` and 127.0.0.1) and a client certificate signed by it, and
a second authority that signed neither (whose trust fails verification).
"""

import dataclasses
import pathlib
import shutil
import subprocess

_DAYS = '2'
_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']


@dataclasses.dataclass(frozen=True)
class Certs:
  """Paths of PEM files."""
  ca: pathlib.Path
  server_chain: pathlib.Path
  server_key: pathlib.Path
  client_chain: pathlib.Path
  client_key: pathlib.Path
  other_ca: pathlib.Path


def available() -> bool:
  return shutil.which('openssl') is not None


def _run(*args, cwd):
  subprocess.run(['openssl', *args], cwd=cwd, check=True,
                 capture_output=True, timeout=60)


def _authority(name: str, directory: pathlib.Path) -> None:
  _run('req', '-x509', *_KEY, '-keyout', f'{name}.key', '-out',
       f'{name}.pem', '-days', _DAYS, '-subj', f'/CN={name}', cwd=directory)


def _signed(name: str, extensions: str, directory: pathlib.Path) -> None:
  (directory / f'{name}.ext').write_text(extensions)
  _run('req', *_KEY, '-keyout', f'{name}.key', '-out', f'{name}.csr',
       '-subj', f'/CN={name}', cwd=directory)
  _run('x509', '-req', '-in', f'{name}.csr', '-CA', 'ca.pem', '-CAkey',
       'ca.key', '-CAcreateserial', '-out', f'{name}.pem', '-days', _DAYS,
       '-extfile', f'{name}.ext', cwd=directory)


def make(directory) -> Certs:
  directory = pathlib.Path(directory)
  _authority('ca', directory)
  _authority('other-ca', directory)
  _signed('server', 'subjectAltName=DNS:localhost,IP:127.0.0.1\n'
          'extendedKeyUsage=serverAuth\n', directory)
  _signed('client', 'extendedKeyUsage=clientAuth\n', directory)
  return Certs(ca=directory / 'ca.pem',
               server_chain=directory / 'server.pem',
               server_key=directory / 'server.key',
               client_chain=directory / 'client.pem',
               client_key=directory / 'client.key',
               other_ca=directory / 'other-ca.pem')
