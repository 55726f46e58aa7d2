"""TLS: which CA a client trusts, its own certificate and key (mutual TLS), and how strictly
it verifies the server, by the same four names everywhere.

- ``tls_ca``: the CA bundle (PEM) that signed the server's certificate;
  ``ECHOMQ_TLS_CA`` in the environment.
- ``tls_cert``: this client's certificate (PEM), for a server that asks for one (mutual
  TLS); ``ECHOMQ_TLS_CERT``.
- ``tls_key``: this client's private key (PEM); ``ECHOMQ_TLS_KEY``.
- ``tls_verify``: ``full`` (the chain and the host name, the default), ``ca`` (the chain
  only) or ``none``; ``ECHOMQ_TLS_VERIFY``.

Each is a URL query parameter (``valkeys://host:6380/0?tls_ca=/etc/echomq/ca.pem``), a
keyword argument of ``App(...)``, ``Connector.connect(...)`` and
``AsyncConnector.connect(...)``, and an environment variable, by these names.
A keyword argument wins over the URL's query, which wins over the environment. They apply
to a TLS URL only (``valkeys://``, ``rediss://``, ``valkeys+cluster://``): naming one on a
plain URL is refused, as is a file that does not exist, a certificate without its key, or
a ``tls_verify`` outside the three words, all before any I/O. Without ``tls_ca`` the
system's trusted CAs verify the server (a public CA's certificate needs nothing here). On
a cluster the settings apply to every node's connections.

Pure: no I/O beyond checking that the named files exist.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from echomq.core.errors import ConfigError

NAMES = ("tls_ca", "tls_cert", "tls_key", "tls_verify")
ENV = {name: f"ECHOMQ_{name.upper()}" for name in NAMES}
VERIFY = ("full", "ca", "none")


@dataclass(frozen=True, slots=True)
class TLS:
    """Resolved TLS settings (paths absolute); ``verify`` one of ``VERIFY``."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    verify: str = "full"

    def client_options(self) -> dict[str, Any]:
        """The valkey-py connection options these settings make."""
        # valkey-py's words for verify_mode (its asyncio client takes no ssl constant)
        out: dict[str, Any] = {
            "ssl_cert_reqs": "none" if self.verify == "none" else "required",
            "ssl_check_hostname": self.verify == "full",
        }
        if self.ca:
            out["ssl_ca_certs"] = self.ca
        if self.cert:
            out["ssl_certfile"] = self.cert
            out["ssl_keyfile"] = self.key
        return out


def resolve(tls_url: bool, query: Mapping[str, str], explicit: Mapping[str, str | None],
            environ: Mapping[str, str] | None = None) -> TLS | None:
    """The TLS settings for one connection: ``explicit`` (keyword arguments, ``None`` =
    not given) over ``query`` (the URL's) over ``environ`` (default ``os.environ``).
    ``None`` for a plain URL with none given; ``ConfigError`` for anything refused (see
    the module docstring)."""
    env = os.environ if environ is None else environ
    got: dict[str, str] = {}
    named_here = False
    for name in NAMES:
        value = explicit.get(name)
        if value is None:
            value = query.get(name)
        if value is not None:
            named_here = True
        if value is None:
            value = env.get(ENV[name]) or None
        if value is not None:
            got[name] = str(value)
    if not tls_url:
        if named_here:
            given = ", ".join(n for n in NAMES if explicit.get(n) is not None or n in query)
            raise ConfigError(f"{given} given for a plain URL: TLS settings need a valkeys:// "
                              "(or valkeys+cluster://) URL")
        return None  # the environment's settings are for TLS URLs only
    verify = got.get("tls_verify", "full").lower()
    if verify not in VERIFY:
        raise ConfigError(f"tls_verify must be one of {', '.join(VERIFY)}, not {verify!r}")
    if ("tls_cert" in got) != ("tls_key" in got):
        have, lack = ("tls_cert", "tls_key") if "tls_cert" in got else ("tls_key", "tls_cert")
        raise ConfigError(f"{have} needs {lack} too (mutual TLS takes the client's "
                          f"certificate and its key; {ENV[lack]} in the environment)")
    paths = {name: _file(name, got[name]) for name in ("tls_ca", "tls_cert", "tls_key")
             if name in got}
    return TLS(paths.get("tls_ca"), paths.get("tls_cert"), paths.get("tls_key"), verify)


def _file(name: str, value: str) -> str:
    path = pathlib.Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(f"{name}: no such file: {value} (a PEM file; {ENV[name]} in the "
                          "environment)")
    return str(path.resolve())
