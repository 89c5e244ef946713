"""The reference backend's operator API and desk, hardened:

- the bare operator token as a bearer is refused unless the backend was started with
  `--allow-operator-bearer`, and then every use is logged as a warning;
- the desk is served over https (`--tls-cert/--tls-key`), with `Secure`, `__Host-` cookies;
  behind a TLS-terminating proxy (`--public-url https://...`) the cookies are the same.

Real processes (`python -m ito_training_reference`), a real self-signed certificate, real sockets.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ito_training_reference import OperatorClient, Person, ReferenceBackend

READY_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def backend(tmp_path: Path, *flags: str) -> Iterator[tuple[str, str, Path]]:
    """`ito-training backend` as a process: (url, operator token, stderr file)."""
    port, db = _free_port(), str(tmp_path / "backend.sqlite3")
    scheme = "https" if "--tls-cert" in flags else "http"
    stderr_path = tmp_path / f"backend-{port}.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "ito_training_reference", "--db", db, "--port", str(port),
                                 *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b"listening on" not in stderr_path.read_bytes():
            assert proc.poll() is None, stderr_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "the backend did not start"
            time.sleep(0.05)
        yield f"{scheme}://127.0.0.1:{port}", Path(db + ".operator-token").read_text().strip(), stderr_path
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to serve https with")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    return cert, key


# ---------------------------------------------------------------------- the operator's bare bearer


def test_the_bare_operator_bearer_is_refused_by_default(tmp_path: Path) -> None:
    with backend(tmp_path) as (url, token, _):
        with httpx.Client(base_url=url, trust_env=False) as http:
            refused = http.get("/operator/runs", headers={"Authorization": f"Bearer {token}"})
            missing = http.get("/operator/no-such-path")
        assert refused.status_code == 404 and refused.content == missing.content
        with OperatorClient(url, token) as op:  # signed requests, as the project's own clients send them
            assert op.account()


def test_an_allowed_bare_operator_bearer_is_logged_on_every_use(tmp_path: Path) -> None:
    with backend(tmp_path, "--allow-operator-bearer") as (url, token, stderr_path):
        with httpx.Client(base_url=url, trust_env=False) as http:
            for _ in range(3):
                assert http.get("/operator/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        log = stderr_path.read_text()
    assert log.count("bare operator bearer token") >= 3
    assert token not in log


# ---------------------------------------------------------------------- the desk over https


def _signed_in_cookie(person: Person, link: str) -> str:
    """The Set-Cookie the desk answers a sign-in with."""
    path = httpx.URL(link).path
    assert person.client.get(path, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
    answer = person.client.post(path, content=b"", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Origin": person.origin, "Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 303, answer.text
    return str(answer.headers["set-cookie"])


def test_the_desk_over_https_sets_secure_host_only_cookies(tmp_path: Path, certificate: tuple[str, str]) -> None:
    cert, key = certificate
    with backend(tmp_path, "--tls-cert", cert, "--tls-key", key) as (url, token, _):
        assert url.startswith("https://")
        with OperatorClient(url, token, tls_ca=cert) as op:
            account = op.account()
            link = str(op.login_link(account)["url"])
        assert link.startswith(url + "/desk/sign-in/")
        with Person(link, tls_ca=cert) as person:
            cookie = _signed_in_cookie(person, link)
            assert cookie.startswith("__Host-ito_desk_session=")
            assert "; Path=/; Secure; HttpOnly; SameSite=Strict" in cookie
            assert account in person.get("/desk/").text
        with pytest.raises(httpx.HTTPError):  # plain http on the TLS port gets nothing
            httpx.get(url.replace("https://", "http://") + "/desk/", trust_env=False, timeout=5)


def test_behind_an_https_proxy_the_cookies_are_secure_too() -> None:
    with ReferenceBackend(public_url="https://desk.example") as rb:
        account = rb.op.account()
        link = str(rb.op.login_link(account)["url"])
        assert link.startswith("https://desk.example/desk/sign-in/")
        with Person(rb.url + link.removeprefix("https://desk.example")) as person:
            person.origin = "https://desk.example"  # what the browser behind the proxy sends as Origin
            cookie = _signed_in_cookie(person, link)
    assert cookie.startswith("__Host-ito_desk_session=") and "; Secure;" in cookie


def test_a_bad_certificate_pair_is_a_clear_error(tmp_path: Path, certificate: tuple[str, str]) -> None:
    cert, _ = certificate
    done = subprocess.run([sys.executable, "-m", "ito_training_reference", "--db", str(tmp_path / "b.sqlite3"),
                           "--port", "0", "--tls-cert", cert, "--tls-key", cert], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "TLS certificate or key" in done.stderr
    alone = subprocess.run([sys.executable, "-m", "ito_training_reference", "--port", "0", "--tls-cert", cert],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert alone.returncode == 2 and "--tls-cert and --tls-key go together" in alone.stderr
