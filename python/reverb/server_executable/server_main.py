"""`reverb_server`: serves tables described by a ReverbServerConfig.

  reverb_server --config='port: 8000 tables: { table_name: "t" ... }'
  reverb_server --config_file=server.textproto [--bind_address=0.0.0.0]
      [--unix_socket_path=/run/reverb.sock] [--max_held_chunk_bytes=N ...]
      [--tls_certificate_chain=server.pem --tls_private_key=server.key
       [--tls_client_ca=clients-ca.pem]] [--auth_token_file=token]
      [--metrics_port=9100]

The configuration is a text-format `ReverbServerConfig` (tables as
`PriorityTableCheckpoint` messages, and the port). With
`--unix_socket_path` the server also listens on that unix domain socket
(`unix:PATH` for clients), and only there if the configuration has no port.
The `--max_...` and `--stalled_sample_stream_timeout_seconds` flags set the
fields of `reverb.ServerLimits` of the same names.
`--tls_certificate_chain` and `--tls_private_key` turn TLS on for the port,
`--tls_client_ca` requires client certificates that it verifies (mutual
TLS), and `--auth_token_file` requires the token the file holds on every
call (docs/concepts.md, "Security"); without them the REVERB_TLS_* and
REVERB_AUTH_TOKEN(_FILE) variables apply. `--metrics_port` serves
Prometheus metrics over HTTP at `/metrics` on that port of the bind address
(0: a free one). Once listening it prints `Reverb server listening on port
N` and/or `Reverb server listening on unix:PATH`, a line each, and with
metrics `Reverb metrics at http://HOST:PORT/metrics`.
"""

import argparse
import dataclasses
import logging
import os
import sys
from typing import Optional, Sequence

from google.protobuf import text_format

from reverb import security as security_lib
from reverb import server as server_lib
from reverb import server_limits
from reverb.server_executable import reverb_config_pb2
from reverb.server_executable import server_from_proto


def parse_config(text: str):
  """A ReverbServerConfig from its text format; ValueError if malformed."""
  try:
    return text_format.Parse(text, reverb_config_pb2.ReverbServerConfig())
  except text_format.ParseError as e:
    raise ValueError(f'Invalid server config: {e}') from e


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument('--config', help='ReverbServerConfig in text format.')
  source.add_argument('--config_file',
                      help='File holding a text-format ReverbServerConfig.')
  parser.add_argument(
      '--bind_address', default=None,
      help='Interface to listen on (default: $REVERB_BIND_ADDRESS or '
      'localhost).')
  parser.add_argument(
      '--unix_socket_path', default=None,
      help='Also listen on a unix domain socket at this path; only there if '
      'the config has no port.')
  limit_names = [field.name for field in
                 dataclasses.fields(server_limits.ServerLimits)]
  for name in limit_names:
    default = server_limits.ServerLimits.default(name)
    parser.add_argument(
        f'--{name}', type=type(default), default=None,
        help=f'reverb.ServerLimits.{name} (default: {default}).')
  parser.add_argument('--tls_certificate_chain', default=None,
                      help="PEM file of the server's certificate chain.")
  parser.add_argument('--tls_private_key', default=None,
                      help="PEM file of the server's private key.")
  parser.add_argument(
      '--tls_client_ca', default=None,
      help='PEM file of the roots that verify client certificates (then '
      'required: mutual TLS).')
  parser.add_argument(
      '--auth_token_file', default=None,
      help='File holding the token every call must carry.')
  parser.add_argument(
      '--metrics_port', type=int, default=None,
      help='Serve Prometheus metrics at /metrics on this port (0: a free '
      'one; default: none).')
  args = parser.parse_args(argv)
  tls = None
  if args.tls_certificate_chain or args.tls_private_key or args.tls_client_ca:
    tls = security_lib.TlsOptions(
        certificate_chain=args.tls_certificate_chain,
        private_key=args.tls_private_key,
        root_certificates=args.tls_client_ca,
        require_client_auth=bool(args.tls_client_ca))
  auth_token = None
  if args.auth_token_file:
    with open(args.auth_token_file) as f:
      auth_token = f.read().strip()
  text = args.config
  if args.config_file:
    with open(args.config_file) as f:
      text = f.read()
  config = parse_config(text)
  tables = server_from_proto.tables_from_proto(config.tables)
  try:
    limits = server_limits.ServerLimits(
        **{name: getattr(args, name) for name in limit_names})
  except ValueError as e:
    parser.error(str(e))
  server = server_lib.Server(tables, port=config.port or None,
                             bind_address=args.bind_address,
                             unix_socket_path=args.unix_socket_path,
                             limits=limits, tls=tls, auth_token=auth_token,
                             metrics_port=args.metrics_port)
  logging.basicConfig(level=logging.INFO)
  places = [f'port {server.port}'] if server.port is not None else []
  if server.unix_socket_path:
    places.append(f'unix:{server.unix_socket_path}')
  lines = [f'Reverb server listening on {place}' for place in places]
  if server.metrics_port is not None:
    host = args.bind_address or os.environ.get(server_lib.BIND_ADDRESS_ENV,
                                               server_lib.DEFAULT_BIND_ADDRESS)
    if server.port is None:
      host = 'localhost'
    lines.append(f'Reverb metrics at http://{host}:{server.metrics_port}'
                 '/metrics')
  for line in lines:
    logging.info('%s', line)
    print(line, flush=True)
  try:
    server.wait()
  except KeyboardInterrupt:
    pass
  return 0


if __name__ == '__main__':
  sys.exit(main())
