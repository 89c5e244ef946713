"""What every desk request passes first, and the plumbing of desk responses.

- A request carrying an `Authorization` header is refused: API credentials never act here.
- A POST must come from the desk's own pages. It is accepted only when the browser says so:
  `Sec-Fetch-Site: same-origin`, or (when a browser does not send Sec-Fetch-Site, as over plain
  http to a non-loopback host) an `Origin` equal to this desk's origin. Any other Sec-Fetch-Site,
  any other Origin, and a POST carrying neither header are refused: every current browser sends
  at least one of them on a form post, so a POST with neither is not a person's browser. (The
  pages' `Referrer-Policy: strict-origin` makes browsers send the real origin, never "null", on
  the desk's own form posts.)
- A form body is a small urlencoded form with no repeated field.
- A request that carries one of the desk's cookie names twice is refused before anything else
  (so no sign-in link is used): cookies do not keep ports apart, and the second one was set by a
  page the desk did not serve. The answer removes every copy at a path the desk does not use, and
  offers to continue.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from ..state import Backend
from . import session
from .render import SECURITY_HEADERS, Markup, document, h, join

MAX_FORM_BYTES = 8 * 1024
REFUSED_FORM = "Forms are accepted only from the desk's own pages, in a browser."


class PageError(Exception):
    """Answered as an HTML error page with this status; the text is fixed, never request content."""

    def __init__(self, status: int, title: str, message: str, *, retry_path: str | None = None,
                 extra: Markup | None = None, headers: dict[str, str] | None = None,
                 cookies: list[str] | None = None) -> None:
        super().__init__(f"{status} {title}")
        self.status, self.title, self.message, self.retry_path = status, title, message, retry_path
        self.extra, self.headers, self.cookies = extra, headers or {}, cookies or []


def html(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type="text/html; charset=utf-8",
                    headers={**SECURITY_HEADERS, **(headers or {})})


def error_page(exc: PageError) -> Response:
    body = join([h('<div class="error-box"><p>{}</p></div>', exc.message), exc.extra or Markup("")])
    if exc.retry_path is not None:
        body = join([body, h('<p>Already signed in? A page opened from another site arrives without your session '
                             'cookie: <a href="{}">continue to this page</a>.</p>', exc.retry_path)])
    response = html(document(exc.title, body), exc.status, exc.headers)
    for cookie in exc.cookies:
        response.headers.append("Set-Cookie", cookie)
    return response


def redirect(path: str, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=303, headers={**SECURITY_HEADERS, "Location": path, **(headers or {})})


def is_https(request: Request, backend: Backend) -> bool:
    """Served over https, directly or behind an https public URL (a TLS-terminating proxy)."""
    return request.url.scheme == "https" or (backend.public_url or "").startswith("https://")


def origins(request: Request, backend: Backend) -> set[str]:
    allowed = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
    if backend.public_url:
        allowed.add(backend.public_url)
    return allowed


def origin_of(request: Request, backend: Backend) -> str:
    """The desk's origin for this request: its public URL, or the address the connection arrived on."""
    return backend.base_url(request.scope)


def screen(request: Request, backend: Backend) -> None:
    https = is_https(request, backend)
    twice = session.duplicated(request.headers.getlist("cookie"), session.cookie_names(https))
    if twice:
        path = request.url.path
        onward = path if request.method == "GET" or path.startswith("/desk/sign-in/") else "/desk/"
        raise PageError(
            400, "Conflicting desk cookies",
            "Your browser sent one of the desk's cookies twice: a page from another site on this machine set a copy "
            "(browsers do not keep ports apart). Nothing was done and no sign-in link was used. The desk has removed "
            "the copy it did not set.",
            extra=h('<p><a href="{}">Continue</a></p>', onward),
            cookies=[clear_cookie(name, where, https) for name in twice
                     for where in session.foreign_paths(path, "/" if https else "/desk")])
    if "authorization" in request.headers:
        raise PageError(401, "API credentials refused",
                        "The desk does not accept API tokens or any Authorization header. A person signs in "
                        "with a single-use link from the operator.")
    if request.method != "POST":
        return
    fetch_site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    allowed = origins(request, backend)
    if fetch_site is not None and fetch_site != "same-origin":
        raise PageError(403, "Refused", REFUSED_FORM)
    if origin is not None and origin != "null" and origin not in allowed:
        raise PageError(403, "Refused", REFUSED_FORM)
    if fetch_site != "same-origin" and origin not in allowed:  # neither header proves a same-origin form
        raise PageError(403, "Refused", REFUSED_FORM)


async def read_form(request: Request) -> dict[str, str]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise PageError(400, "Bad form", "The form was not sent as a form.")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_FORM_BYTES):
        raise PageError(413, "Form too large", "The form is larger than the desk accepts.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise PageError(413, "Form too large", "The form is larger than the desk accepts.")
    try:
        fields = parse_qs(body.decode("ascii"), keep_blank_values=True, strict_parsing=False, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise PageError(400, "Bad form", "The form could not be read.") from None
    if any(len(values) != 1 for values in fields.values()):
        raise PageError(400, "Bad form", "The form repeats a field.")
    return {key: values[0] for key, values in fields.items()}


def clear_cookie(name: str, path: str, https: bool) -> str:
    """Removes the cookie `name` a browser keeps at `path` (whoever set it)."""
    return f"{name}=; Path={path}; Max-Age=0{'; Secure' if https else ''}"


def set_cookie(name: str, value: str, max_age: int, https: bool) -> str:
    """HttpOnly and SameSite=Strict always. Over https: Secure and Path=/ (what a `__Host-` name
    requires); over http: Path=/desk."""
    scope = "Path=/; Secure" if https else "Path=/desk"
    return f"{name}={value}; {scope}; HttpOnly; SameSite=Strict; Max-Age={max(0, max_age)}"
