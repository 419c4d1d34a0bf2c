"""`reverb_server`: serves tables described by a ReverbServerConfig.

  reverb_server --config='port: 8000 tables: { table_name: "t" ... }'
  reverb_server --config_file=server.textproto [--bind_address=0.0.0.0]
      [--unix_socket_path=/run/reverb.sock]

The configuration is a text-format `ReverbServerConfig` (tables as
`PriorityTableCheckpoint` messages, and the port). With
`--unix_socket_path` the server also listens on that unix domain socket
(`unix:PATH` for clients), and only there if the configuration has no port.
Once listening it prints `Reverb server listening on port N` and/or
`Reverb server listening on unix:PATH`, a line each.
"""

import argparse
import logging
import sys
from typing import Optional, Sequence

from google.protobuf import text_format

from reverb import server as server_lib
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
  args = parser.parse_args(argv)
  text = args.config
  if args.config_file:
    with open(args.config_file) as f:
      text = f.read()
  config = parse_config(text)
  tables = server_from_proto.tables_from_proto(config.tables)
  server = server_lib.Server(tables, port=config.port or None,
                             bind_address=args.bind_address,
                             unix_socket_path=args.unix_socket_path)
  logging.basicConfig(level=logging.INFO)
  places = [f'port {server.port}'] if server.port is not None else []
  if server.unix_socket_path:
    places.append(f'unix:{server.unix_socket_path}')
  for place in places:
    logging.info('Reverb server listening on %s', place)
    print(f'Reverb server listening on {place}', flush=True)
  try:
    server.wait()
  except KeyboardInterrupt:
    pass
  return 0


if __name__ == '__main__':
  sys.exit(main())
