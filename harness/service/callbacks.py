"""Where a webhook may go: the callback URL's host is resolved at delivery, every address it resolves to is
checked, and the connection is made to the checked address (so a DNS answer that changes between the check and
the connection cannot point it elsewhere). Refused: loopback, private, link-local (cloud metadata at
169.254.169.254 and fd00:ec2::254 included), multicast, unspecified, reserved and every other non-global range,
in IPv4 and IPv6, including IPv4-mapped, 6to4, Teredo and NAT64 forms. In-house receivers are let through by
an allow-list of networks (``GRADER_WEBHOOK_ALLOW``, e.g. ``10.1.2.0/24,fd12::/64``)."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
from urllib.parse import urlsplit

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """The callback URL points somewhere a webhook may not go."""


def parse_allow(value: str | None) -> tuple:
    """Networks from a comma-separated list; ValueError names a bad entry."""
    out = []
    for item in (value or "").replace(" ", "").split(","):
        if item:
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"GRADER_WEBHOOK_ALLOW: {item!r} is not an IP network") from None
    return tuple(out)


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _kind(a) -> str | None:
    for name, bad in (("loopback", a.is_loopback), ("link-local", a.is_link_local), ("multicast", a.is_multicast),
                      ("unspecified", a.is_unspecified), ("private", a.is_private), ("reserved", a.is_reserved),
                      ("non-global", not a.is_global)):
        if bad:
            return name
    return None


def refusal(address: str, allow: tuple = ()) -> str | None:
    """Why a webhook may not be sent to this IP address, or None when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:   # ::ffff:a.b.c.d is a.b.c.d on the wire
        ip = ip.ipv4_mapped
    forms = [ip] + ([v4] if ip.version == 6 and (v4 := _embedded_v4(ip)) is not None else [])
    if any(a.version == net.version and a in net for a in forms for net in allow):
        return None
    for a in reversed(forms):   # the embedded IPv4 address names the kind best
        kind = _kind(a)
        if kind:
            return f"{address} is a {kind} address (allow it with GRADER_WEBHOOK_ALLOW)"
    return None


def literal_refusal(url: str, allow: tuple = ()) -> str | None:
    """At intake: the URL's host, when it is an IP literal (or localhost), checked without any DNS."""
    host = urlsplit(url).hostname or ""
    if host.rstrip(".").lower() == "localhost" or host.lower().endswith(".localhost"):
        return refusal("127.0.0.1", allow)
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None   # a name: resolved and checked at delivery
    return refusal(host, allow)


def resolve(host: str, port: int, allow: tuple = ()) -> str:
    """The address to connect to: every address ``host`` resolves to must be allowed (Refused otherwise)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"cannot resolve {host}: {exc}") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    for a in addresses:
        why = refusal(a, allow)
        if why:
            raise Refused(why)
    return addresses[0]


def post(url: str, body: bytes, headers: dict, *, timeout: float, allow: tuple = ()) -> int:
    """POST ``body`` to ``url`` through the checked address (no proxy, no redirect); the HTTP status."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"not an absolute http(s) URL: {url[:100]!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = resolve(parts.hostname, port, allow)
    if parts.scheme == "https":   # the certificate is checked against the URL's host name
        conn = http.client.HTTPSConnection(parts.hostname, port, timeout=timeout,
                                           context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(parts.hostname, port, timeout=timeout)

    def pinned(_address, timeout=None, source_address=None):
        return socket.create_connection((address, port), timeout, source_address)
    conn._create_connection = pinned
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read(65536)
        return resp.status
    finally:
        conn.close()
