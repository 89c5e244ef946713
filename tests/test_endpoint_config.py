"""`ITO_API_URL`: plain http only to a literal loopback address or exactly `localhost`; `localhost`
is never looked up; nothing refused is resolved or sent.

The classifier is property-tested against the standard library's own reading of addresses and
against httpx's reading of the URL the client will dial, so the two parsers cannot disagree
about where a request goes.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend.client import BackendClient, Exchange
from ito_training_mcp.backend.client import refusals as client_refusals
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import Me
from ito_training_mcp.errors import ConfigRefusal
from ito_training_mcp.gates.config import BackendSettings, Endpoint, parse_endpoint
from ito_training_mcp.service import TrainingService

from . import hostile_backend as hb
from .proving import is_proof_request, proof_response

_SETTINGS = {"deadline": None, "derandomize": True, "database": None}


def accepted(url: str) -> Endpoint | None:
    try:
        return parse_endpoint(url)
    except ConfigRefusal:
        return None


# ---------------------------------------------------------------------------- decided cases

PLAIN_HTTP_OK = {
    "http://127.0.0.1": "127.0.0.1",
    "http://127.0.0.1:8080/api/": "127.0.0.1",
    "http://127.255.255.254:1": "127.255.255.254",
    "http://127.1.2.3:65535": "127.1.2.3",
    "http://[::1]:8080": "::1",
    "http://[0:0:0:0:0:0:0:1]": "::1",
    "http://localhost:8080": "127.0.0.1",
    "http://LOCALHOST": "127.0.0.1",
    "HTTP://LocalHost:9/v1base": "127.0.0.1",
}

PLAIN_HTTP_REFUSED = [
    # names that only look local: DNS (or /etc/hosts) would decide where they go
    "http://localhost.", "http://localhost.:8080", "http://LOCALHOST.", "http://localhost.localdomain",
    "http://localhost6", "http://ip6-localhost", "http://evil.localhost", "http://localhost.evil.example",
    "http://127.0.0.1.nip.io", "http://127-0-0-1.example", "http://loopback",
    # shorthand, octal, hex and integer forms some parsers read as 127.0.0.1
    "http://127.1", "http://127.0.1", "http://0x7f.0.0.1", "http://0x7f000001", "http://2130706433",
    "http://017700000001", "http://0177.0.0.1", "http://127.000.000.001", "http://127.0.0.1.",
    # IPv6 forms that are not ::1 as written
    "http://[::ffff:127.0.0.1]", "http://[::ffff:7f00:1]", "http://[::127.0.0.1]", "http://[::1%25lo]",
    "http://[::]", "http://[127.0.0.1]", "http://[::1", "http://::1",
    # not loopback at all
    "http://10.0.0.1", "http://0.0.0.0", "http://169.254.169.254", "http://ito.example", "http://[2001:db8::1]",
    # userinfo, fragment and backslash tricks
    "http://127.0.0.1@evil.example", "http://localhost@evil.example", "http://evil.example#@127.0.0.1",
    "http://evil.example?@127.0.0.1", "http://evil.example\\@127.0.0.1", "http://127.0.0.1\\.evil.example",
    "http://127.0.0.1:80@evil.example", "http://user:pass@127.0.0.1",
    # percent-encoding and look-alike characters
    "http://127.0.0.%31", "http://%6cocalhost", "http://localhos%74", "http://ｌｏｃａｌｈｏｓｔ",
    "http://127。0。0。1", "http://localhost\u200b", "http://l\u0131calhost",
    # ports
    "http://127.0.0.1:0", "http://127.0.0.1:65536", "http://127.0.0.1:99999", "http://127.0.0.1:",
    "http://127.0.0.1:+80", "http://127.0.0.1:8080x", "http://127.0.0.1:١٢",
    # paths a WHATWG parser would normalise differently
    "http://127.0.0.1/a/%2e%2e/b", "http://127.0.0.1/a/%2E/b", "http://127.0.0.1/a\\b", "http://127.0.0.1/a/../b",
]

HTTPS_OK = {
    "https://api.ito.example": "api.ito.example",
    "https://API.Ito.Example:8443/v1base": "api.ito.example",
    "https://xn--bcher-kva.example": "xn--bcher-kva.example",
    "https://10.0.0.1": "10.0.0.1",
    "https://[2001:db8::1]:443": "2001:db8::1",
    "https://ito_api.internal": "ito_api.internal",
    "https://localhost:8443": "127.0.0.1",
}

HTTPS_REFUSED = [
    "https://bücher.example", "https://api.ito.example.", "https://127.1", "https://a..b.example",
    "https://-a.example", "https://a-.example", "https://%61pi.example", "https://1.2.3", "https://api.123",
    "https://" + "a" * 64 + ".example", "https://" + ".".join(["a" * 50] * 6), "https://ａｐｉ.example",
]


@pytest.mark.parametrize(("url", "dial"), sorted(PLAIN_HTTP_OK.items()))
def test_plain_http_to_a_loopback_literal_or_localhost(url: str, dial: str) -> None:
    endpoint = parse_endpoint(url)
    assert endpoint.scheme == "http" and endpoint.dial_host == dial
    assert httpx.URL(endpoint.dial_base_url).raw_host.decode() == dial


@pytest.mark.parametrize("url", PLAIN_HTTP_REFUSED)
def test_plain_http_anywhere_else_is_refused(url: str) -> None:
    with pytest.raises(ConfigRefusal) as caught:
        parse_endpoint(url)
    assert caught.value.code.value == "CONFIG_INVALID"
    assert caught.value.details == {"setting": "ITO_API_URL", "problem": caught.value.details["problem"]}


@pytest.mark.parametrize(("url", "host"), sorted(HTTPS_OK.items()))
def test_https_to_a_well_formed_host(url: str, host: str) -> None:
    endpoint = parse_endpoint(url)
    assert endpoint.dial_host == host
    assert httpx.URL(endpoint.dial_base_url).raw_host.decode() == host


@pytest.mark.parametrize("url", HTTPS_REFUSED)
def test_https_to_an_ill_formed_host_is_refused(url: str) -> None:
    assert accepted(url) is None


# ---------------------------------------------------------------------------- properties


def _is_loopback_literal(host: str) -> bool:
    address = ipaddress.ip_address(host)
    return (address.version == 4 and address in ipaddress.ip_network("127.0.0.0/8")) or str(address) == "::1"


def _check_accepted(url: str, endpoint: Endpoint) -> None:
    """Every accepted endpoint: http dials a loopback literal; the dialled URL reads back the same in
    httpx (what sends) and urllib (what validated); the Host header names the configured host."""
    if endpoint.scheme == "http":
        assert _is_loopback_literal(endpoint.dial_host), url
    dialled = httpx.URL(endpoint.dial_base_url)
    assert (dialled.scheme, dialled.raw_host.decode(), dialled.port or (443 if dialled.scheme == "https" else 80)) == (
        endpoint.scheme, endpoint.dial_host, endpoint.port), url
    assert dialled.userinfo == b"" and dialled.query == b"" and dialled.fragment == ""
    named = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    assert endpoint.host_header in (named, f"{named}:{endpoint.port}")


host_chars = st.sampled_from([*"abclocahstx0127.:-_[]@#?%/\\ ", "ı", "ｌ", "。", "\u200b", "é"])
hostish = st.one_of(
    st.text(host_chars, min_size=1, max_size=24),
    st.sampled_from(["localhost", "LOCALHOST", "127.0.0.1", "[::1]", "127.1", "localhost.", "::1"]).flatmap(
        lambda base: st.tuples(st.just(base), st.text(host_chars, max_size=4)).map("".join)),
    st.sampled_from(["localhost", "LocalHost", "127.0.0.1", "127.9.8.7", "[::1]", "api.example", "10.1.2.3"]),
    st.ip_addresses().map(lambda a: f"[{a}]" if a.version == 6 else str(a)),
)


def test_any_url_is_refused_or_dials_where_it_says() -> None:
    outcomes: dict[str, int] = {"http": 0, "https": 0, "refused": 0}

    @settings(max_examples=700, **_SETTINGS)
    @given(scheme=st.sampled_from(["http", "https", "HTTP"]), host=hostish,
           port=st.one_of(st.none(), st.integers(0, 70000).map(str), st.text("0123456789+- ", max_size=6)),
           path=st.sampled_from(["", "/", "/api", "/a/b/", "/%2e%2e", "/.."]))
    def check(scheme: str, host: str, port: str | None, path: str) -> None:
        url = f"{scheme}://{host}{'' if port is None else ':' + port}{path}"
        endpoint = accepted(url)
        outcomes["refused" if endpoint is None else endpoint.scheme] += 1
        if endpoint is not None:
            _check_accepted(url, endpoint)

    check()
    assert min(outcomes.values()) >= 20, outcomes  # the property was exercised on every side


@settings(max_examples=400, **_SETTINGS)
@given(address=st.ip_addresses(v=4))
def test_plain_http_to_any_ipv4_literal_iff_127_slash_8(address: ipaddress.IPv4Address) -> None:
    endpoint = accepted(f"http://{address}:8080")
    assert (endpoint is not None) is (int(address) >> 24 == 127)
    if endpoint is not None:
        assert endpoint.dial_host == str(address)


@settings(max_examples=400, **_SETTINGS)
@given(address=st.one_of(st.ip_addresses(v=6), st.just(ipaddress.IPv6Address("::1"))),
       compressed=st.booleans())
def test_plain_http_to_any_ipv6_literal_iff_it_is_loopback(address: ipaddress.IPv6Address, compressed: bool) -> None:
    written = address.compressed if compressed else address.exploded
    endpoint = accepted(f"http://[{written}]:8080")
    assert (endpoint is not None) is (address == ipaddress.IPv6Address("::1"))


@settings(max_examples=150, **_SETTINGS)
@given(name=st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True),
       upper=st.booleans(), dot=st.booleans())
def test_plain_http_to_any_name_but_localhost_is_refused(name: str, upper: bool, dot: bool) -> None:
    host = (name.upper() if upper else name) + ("." if dot else "")
    endpoint = accepted(f"http://{host}:8080")
    assert (endpoint is not None) is (name == "localhost" and not dot)
    if not dot and not name.endswith("-") and "-." not in name:
        assert accepted(f"https://{host}:8080") is not None  # the same name over https is fine


@settings(max_examples=300, **_SETTINGS)
@given(userinfo=st.text(st.sampled_from(list("abc127.0:@#%")), min_size=0, max_size=12),
       host=st.sampled_from(["127.0.0.1", "localhost", "[::1]", "evil.example"]))
def test_userinfo_is_refused_whatever_it_says(userinfo: str, host: str) -> None:
    assume("#" not in userinfo and "/" not in userinfo)
    assert accepted(f"http://{userinfo}@{host}:8080") is None
    assert accepted(f"https://{userinfo}@{host}:8080") is None


@settings(max_examples=100, **_SETTINGS)
@given(secret=st.from_regex(r"[A-Za-z0-9]{24,40}", fullmatch=True))
def test_a_refusal_never_echoes_the_value(secret: str) -> None:
    for url in (f"http://{secret}.example", f"http://u:{secret}@127.0.0.1", f"http://127.0.0.1/?k={secret}",
                f"https://{secret}..example"):
        with pytest.raises(ConfigRefusal) as caught:
            parse_endpoint(url)
        assert secret not in str(caught.value) and secret not in repr(caught.value.details)


# ---------------------------------------------------------------------------- nothing resolved


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every name resolution in this process; `localhost` (in any case) fails loudly if looked up."""
    seen: list[str] = []
    real = socket.getaddrinfo

    def spy(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        seen.append(name)
        if name.lower().rstrip(".").startswith("localhost"):
            raise socket.gaierror(socket.EAI_NONAME, "localhost must never be looked up")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    yield seen


@pytest.mark.parametrize("url", ["http://localhost.:9", "http://localhost.localdomain:9", "http://127.1:9",
                                 "http://ito.example", "http://127.0.0.1@evil.example", "https://bücher.example"])
async def test_a_refused_url_sends_nothing_and_resolves_nothing(url: str, lookups: list[str]) -> None:
    envelope = await TrainingService({"ITO_API_URL": url, "ITO_API_KEY": hb.TOKEN}).check_training_availability(
        booking_id=hb.BOOKING)
    assert envelope.error is not None and envelope.error.code.value == "CONFIG_INVALID"
    assert envelope.live_api_contacted is False
    assert envelope.error.details == {"setting": "ITO_API_URL", "problem": envelope.error.details["problem"]}
    assert lookups == []


@pytest.fixture(scope="module")
def hostile() -> Iterator[hb.HostileBackend]:
    with hb.HostileBackend("0" * 64) as server:
        yield server


@pytest.mark.parametrize("written", ["localhost", "LOCALHOST", "LocalHost"])
async def test_localhost_is_dialled_as_127_0_0_1_and_named_in_the_host_header(
    hostile: hb.HostileBackend, lookups: list[str], written: str
) -> None:
    """With every lookup of `localhost` failing, a call to http://localhost:<port> still reaches the
    loopback server, and the server sees `Host: localhost:<port>`."""
    before = len(hostile.requests())
    env = {"ITO_API_URL": hostile.url("none", "none", host=written), "ITO_API_KEY": hb.TOKEN,
           "ITO_TRAINING_CAPABILITIES_TTL_S": "0"}
    envelope = await TrainingService(env).check_training_availability(booking_id=hb.BOOKING)
    assert envelope.ok, envelope.to_json()
    seen = hostile.requests()[before:]
    assert [s.endpoint for s in seen] == ["capabilities", "me", "eligibility"]
    assert {s.headers["host"] for s in seen} == {f"localhost:{hostile.port}"}
    assert not any(name.lower().startswith("localhost") for name in lookups)


def test_https_localhost_keeps_its_name_for_tls() -> None:
    """Dialled as 127.0.0.1, but the certificate is checked against `localhost` (the SNI name)."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"account_id": hb.ACCOUNT})

    async def go() -> None:
        settings = BackendSettings.from_env({"ITO_API_URL": "https://localhost:8443/base"})
        assert settings is not None
        async with BackendClient(settings, Exchange(), transport=httpx.MockTransport(answer)) as api:
            api.authenticate(Credential(hb.TOKEN, "ITO_API_KEY"))
            await api.request("GET", "/v1/me", Me, gate=None)

    import anyio

    anyio.run(go)
    (request,) = seen
    assert str(request.url) == "https://127.0.0.1:8443/base/v1/me"
    assert request.headers["host"] == "localhost:8443"
    assert request.extensions["sni_hostname"] == "localhost"
    client_refusals._revoked_fingerprints.clear()


def test_default_ports_leave_the_host_header_bare() -> None:
    assert parse_endpoint("http://localhost").host_header == "localhost"
    assert parse_endpoint("https://localhost:443").host_header == "localhost"
    assert parse_endpoint("http://localhost:8080").host_header == "localhost:8080"
    assert parse_endpoint("http://[::1]:8080").base_url == "http://[::1]:8080"


@pytest.mark.parametrize("url", ["https://xn--bcher-kva.example", "https://[2001:db8::1]:8443", "http://[::1]:9"])
def test_the_origin_check_accepts_every_accepted_host_form(url: str) -> None:
    """The client refuses to send outside the configured origin; that check must agree with the
    parser about punycode and IPv6 hosts (httpx shows an xn-- name decoded)."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if is_proof_request(request.url.path):  # plain http: the origin proof comes first
            return proof_response(request, hb.TOKEN)
        seen.append(request)
        return httpx.Response(200, json={"account_id": hb.ACCOUNT})

    async def go() -> None:
        settings = BackendSettings.from_env({"ITO_API_URL": url})
        assert settings is not None
        async with BackendClient(settings, Exchange(), transport=httpx.MockTransport(answer)) as api:
            api.authenticate(Credential(hb.TOKEN, "ITO_API_KEY"))
            await api.request("GET", "/v1/me", Me, gate=None)

    import anyio

    anyio.run(go)
    assert len(seen) == 1
