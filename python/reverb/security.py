"""TLS, mutual TLS and auth tokens (not in dm-reverb; docs/concepts.md,
"Security").

`TlsOptions` is taken by `reverb.Server` (its certificate, and the roots
that verify client certificates) and by the clients (`reverb.Client`, the
datasets, `ReplayIterator`, `TFClient`, `reverb.ray`: the roots that verify
the server, and a certificate of their own for mutual TLS). Certificates
and keys are PEM bytes (or str) or paths of files that hold them.

Without the arguments, clients and servers read the environment:
`REVERB_TLS_ROOT_CERTIFICATES`, `REVERB_TLS_CERTIFICATE_CHAIN`,
`REVERB_TLS_PRIVATE_KEY` (PEM or paths; any of them set turns TLS on) and
`REVERB_AUTH_TOKEN`, else the contents of the file `REVERB_AUTH_TOKEN_FILE`
names. An argument wins over the variables: `tls` over the `REVERB_TLS_*`
ones, `auth_token` over the token's. A server reads the certificate chain
and private key as its own and the root certificates as the ones that
verify client certificates (then required: mutual TLS).
"""

import dataclasses
import os
from typing import Optional, Sequence, Union

from reverb import pybind

# PEM text, or the path of a file holding it.
PemOrPath = Union[bytes, str, os.PathLike]


@dataclasses.dataclass(frozen=True)
class TlsOptions:
  """TLS settings of a server or of a client.

  Attributes:
    certificate_chain: The certificate presented to the peer: the server's
      (required on a server), or a client's for mutual TLS.
    private_key: The private key of `certificate_chain`.
    root_certificates: On a client, the roots that verify the server's
      certificate (None: the system's). On a server, the roots that verify
      client certificates (mutual TLS with `require_client_auth`).
    require_client_auth: Server only: refuse clients without a certificate
      that verifies against `root_certificates`.
    server_name_override: Client only: the name the server's certificate
      must carry, if not the host of the address.
  """
  certificate_chain: Optional[PemOrPath] = None
  # Not in repr(): it may be the key itself.
  private_key: Optional[PemOrPath] = dataclasses.field(default=None,
                                                       repr=False)
  root_certificates: Optional[PemOrPath] = None
  require_client_auth: bool = False
  server_name_override: Optional[str] = None


def _text(value: Optional[PemOrPath]) -> Union[bytes, str]:
  """PEM bytes or str as they are, a path as str, None as ''."""
  if value is None:
    return ''
  if isinstance(value, (bytes, str)):
    return value
  return os.fspath(value)


def channel_security(
    tls: Optional[TlsOptions],
    auth_token: Optional[str]) -> Optional[pybind.ChannelSecurity]:
  """The client side's security: None if neither argument is given (the C++
  core then reads the environment itself), else the environment's with the
  arguments given in its place."""
  if tls is None and auth_token is None:
    return None
  security = pybind.channel_security_from_environment()
  if tls is not None:
    security.tls = True
    security.root_certificates = _text(tls.root_certificates)
    security.certificate_chain = _text(tls.certificate_chain)
    security.private_key = _text(tls.private_key)
    security.server_name_override = tls.server_name_override or ''
  if auth_token is not None:
    security.auth_token = auth_token
  return security


def server_security(tls: Optional[TlsOptions],
                    auth_token: Optional[str]) -> pybind.ServerSecurity:
  """The server side's security: the arguments, else the environment's."""
  env = pybind.channel_security_from_environment()
  security = pybind.ServerSecurity()
  if tls is None:
    security.certificate_chain = env.certificate_chain
    security.private_key = env.private_key
    if env.certificate_chain and env.root_certificates:
      security.client_ca = env.root_certificates
      security.require_client_auth = True
  else:
    security.certificate_chain = _text(tls.certificate_chain)
    security.private_key = _text(tls.private_key)
    security.client_ca = _text(tls.root_certificates)
    security.require_client_auth = tls.require_client_auth
  security.auth_token = env.auth_token if auth_token is None else auth_token
  return security


def register_for_kernels(server_address, tls: Optional[TlsOptions],
                         auth_token: Optional[str]) -> None:
  """Makes the TensorFlow kernels that sample from or write to
  `server_address` (one address or a sequence of them) use `tls` and
  `auth_token`: they make their own clients, from the address alone.

  Raises:
    ValueError: If credentials are given with an address that is a tensor
      (use the environment variables then).
  """
  security = channel_security(tls, auth_token)
  if security is None:
    return
  addresses: Sequence = ([server_address] if isinstance(server_address, str)
                         else server_address)
  if (not isinstance(addresses, (list, tuple)) or
      not all(isinstance(a, str) for a in addresses)):
    raise ValueError(
        'tls and auth_token need the server address as a string (or a list '
        'of strings); with an address tensor, set REVERB_TLS_* and '
        'REVERB_AUTH_TOKEN instead.')
  for address in addresses:
    pybind.register_channel_security(address, security)
