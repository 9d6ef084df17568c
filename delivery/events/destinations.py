"""Where events may be sent: public addresses only, unless ``EVENTS_ALLOW_PRIVATE_URLS``.

A subscription's URL is given by an Operator or by whoever holds an API key with the
``campaigns`` scope. Unguarded, the events worker would be their proxy into the private
network: signed POSTs to internal services or a cloud's metadata endpoint, with the first
bytes of each answer readable in the subscription's ``last_error``. So a URL whose host is,
or resolves to, a loopback, private, link-local, shared or reserved address is refused when
the subscription is saved, and again when the worker connects: the name is resolved there,
every address is checked, and the socket goes to the address that was checked, not to a
second lookup that a rebinding DNS server could answer differently. TLS still verifies the
certificate against the URL's host name. Environment proxies are not used.

``EVENTS_ALLOW_PRIVATE_URLS`` (on when ``DEBUG``) lets receivers on this machine or the
private network through, for development and for a deployment whose receivers are inside.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection


class DestinationRefused(NewConnectionError):
    """The host is not a public address (the worker records it as the batch's error)."""


def address_refusal(address: str) -> str | None:
    """Why events may not go to ``address`` (an IP literal), or ``None``."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_global and not ip.is_multicast:
        return None
    return f"{address} is not a public address"


def addresses_of(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now, each once; ``socket.gaierror`` when none."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:  # the IDNA codec: a label empty or over 63 characters
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} is not a host name") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def host_refusal(host: str, port: int) -> str | None:
    """Why events may not go to ``host`` (a name or an address literal), or ``None``. A name
    that does not resolve now is not refused here: delivery retries it."""
    if settings.EVENTS_ALLOW_PRIVATE_URLS:
        return None
    try:
        return address_refusal(host.strip("[]"))
    except ValueError:
        pass  # a name
    try:
        addresses = addresses_of(host, port)
    except OSError:
        return None
    for address in addresses:
        if address_refusal(address):
            return f"{host} resolves to {address}, not a public address"
    return None


class _CheckedConnect:
    """``_new_conn`` of urllib3's connections, connecting only to addresses that pass."""

    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        if settings.EVENTS_ALLOW_PRIVATE_URLS:
            return super()._new_conn()  # type: ignore[misc, no-any-return]
        try:
            addresses = addresses_of(self.host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        for address in addresses:
            refusal = address_refusal(address)
            if refusal:
                raise DestinationRefused(self, f"refused: {self.host} is {refusal}")  # type: ignore[arg-type]
        last: OSError | None = None
        for address in addresses:
            try:
                return urllib3_connection.create_connection(
                    (address, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except OSError as exc:
                last = exc
        raise NewConnectionError(
            self,  # type: ignore[arg-type]
            f"Failed to establish a new connection: {last}",
        )


class CheckedHTTPConnection(_CheckedConnect, HTTPConnection):
    pass


class CheckedHTTPSConnection(_CheckedConnect, HTTPSConnection):
    pass


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = CheckedHTTPSConnection


class CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _CheckedHTTPPool,
            "https": _CheckedHTTPSPool,
        }


def checked_session() -> requests.Session:
    """A session that connects only to public addresses (see the module's docstring)."""
    session = requests.Session()
    session.trust_env = False
    adapter = CheckedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
