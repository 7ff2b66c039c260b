"""Egress domain resolution against a real DNS server on loopback (UDP, dnspython wire format)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import dns.asyncresolver
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from controller.workspace.egress.dns import FAILURE_TTL, DnsResolver
from controller.workspace.egress.policy import MAX_ADDRESSES_PER_DOMAIN


class Zone(asyncio.DatagramProtocol):
    """Answers A/AAAA queries from ``records``: name -> (type -> (ttl, addresses))."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, tuple[int, list[str]]]] = {}
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        name = question.name.to_text().rstrip(".")
        rdtype = dns.rdatatype.to_text(question.rdtype)
        if name not in self.records:
            response.set_rcode(dns.rcode.NXDOMAIN)
        elif rdtype in self.records[name]:
            ttl, addresses = self.records[name][rdtype]
            response.answer.append(
                dns.rrset.from_text_list(question.name, ttl, "IN", rdtype, addresses)
            )
        assert self.transport is not None
        self.transport.sendto(response.to_wire(), addr)


@pytest.fixture
async def zone() -> AsyncIterator[tuple[Zone, DnsResolver]]:
    loop = asyncio.get_running_loop()
    server = Zone()
    transport, _ = await loop.create_datagram_endpoint(lambda: server, local_addr=("127.0.0.1", 0))
    port = transport.get_extra_info("sockname")[1]
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = port
    yield server, DnsResolver(resolver, timeout=2.0)
    transport.close()


async def test_addresses_and_the_shortest_ttl_are_returned(zone: tuple[Zone, DnsResolver]) -> None:
    server, resolver = zone
    server.records["pypi.org"] = {
        "A": (120, ["151.101.0.223", "151.101.64.223"]),
        "AAAA": (60, ["2a04:4e42::223"]),
    }
    answer = await resolver.resolve("pypi.org")
    assert set(answer.addresses) == {"151.101.0.223", "151.101.64.223", "2a04:4e42::223"}
    assert answer.ttl == 60


async def test_an_address_change_is_seen_on_the_next_lookup(zone: tuple[Zone, DnsResolver]) -> None:
    server, resolver = zone
    server.records["api.example.com"] = {"A": (30, ["192.0.2.1"])}
    assert (await resolver.resolve("api.example.com")).addresses == ("192.0.2.1",)
    server.records["api.example.com"] = {"A": (30, ["192.0.2.2"])}
    assert (await resolver.resolve("api.example.com")).addresses == ("192.0.2.2",)


async def test_a_missing_name_gives_no_addresses_and_a_short_retry(
    zone: tuple[Zone, DnsResolver],
) -> None:
    _, resolver = zone
    answer = await resolver.resolve("nx.example.com")
    assert answer.addresses == () and answer.ttl == FAILURE_TTL


async def test_answers_are_bounded(zone: tuple[Zone, DnsResolver]) -> None:
    server, resolver = zone
    server.records["many.example.com"] = {"A": (30, [f"198.51.100.{i}" for i in range(1, 80)])}
    answer = await resolver.resolve("many.example.com")
    assert len(answer.addresses) == MAX_ADDRESSES_PER_DOMAIN
