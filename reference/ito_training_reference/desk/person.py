"""`Person`: the person at the desk, as a small HTTP client for tests and demos.

It does exactly what a browser does, with plain httpx and never the operator API: it opens the
sign-in link, submits the sign-in form, keeps the session cookie, reads each page's form to find
its action and single-use form token, and sends the same `Origin` and `Sec-Fetch-Site` headers a
browser would. `confirm(request_id)` returns the confirmation reference shown on the page
afterwards; it needs a recent sign-in, as a person does (`sign_in()` with a fresh link).

    person = rb.person(account_id).sign_in()
    ref = person.confirm(request_id)
"""

from __future__ import annotations

import ssl
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

TIMEOUT_S = 10.0
MAX_PAGE_BYTES = 4 * 1024 * 1024


class DeskError(Exception):
    """The desk refused: the page's status and title."""

    def __init__(self, status: int, title: str) -> None:
        super().__init__(f"desk answered {status}: {title}")
        self.status, self.title = status, title


class _Page(HTMLParser):
    """Forms (action, hidden fields, button label), element text by id, and the <title>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, Any]] = []
        self.by_id: dict[str, str] = {}
        self.title = ""
        self._form: dict[str, Any] | None = None
        self._capture: list[tuple[str, str, list[str]]] = []  # (tag, id, text parts)
        self._in_title = self._in_button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._form = {"action": a.get("action", ""), "method": a.get("method", "get").lower(), "fields": {},
                          "label": ""}
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None and a.get("name"):
            self._form["fields"][a["name"]] = a.get("value", "")
        elif tag == "button":
            self._in_button = True
        elif tag == "title":
            self._in_title = True
        if "id" in a:
            self._capture.append((tag, a["id"], []))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "button":
            self._in_button = False
        elif tag == "title":
            self._in_title = False
        if self._capture and self._capture[-1][0] == tag:
            _, element_id, parts = self._capture.pop()
            self.by_id[element_id] = "".join(parts).strip()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._in_button and self._form is not None:
            self._form["label"] += data.strip()
        for _, _, parts in self._capture:
            parts.append(data)


def _parse(response: httpx.Response) -> _Page:
    page = _Page()
    page.feed(response.text)
    page.close()
    return page


class Person:
    """One person's browser session at the desk of one backend."""

    def __init__(self, login_url: str, *, tls_ca: str | None = None) -> None:
        """`tls_ca`: a PEM file of certificates to trust for an https desk instead of the system's."""
        parts = urlsplit(login_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or not parts.path.startswith("/desk/sign-in/"):
            raise ValueError("login_url must be a desk sign-in link")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self._login_path = parts.path
        self._http = httpx.Client(base_url=self.origin, timeout=TIMEOUT_S, follow_redirects=False, trust_env=False,
                                  verify=False if parts.scheme == "http" else ssl.create_default_context(cafile=tls_ca))
        self.account_id: str | None = None

    @property
    def client(self) -> httpx.Client:
        """The underlying client; its cookie jar holds the session (tests use it to misbehave)."""
        return self._http

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Person:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- browser-like requests ---------------------------------------------------------------------
    def get(self, path: str) -> httpx.Response:
        response = self._http.get(path, headers={"Sec-Fetch-Site": "same-origin"})
        if len(response.content) > MAX_PAGE_BYTES:
            raise DeskError(response.status_code, "page too large")
        return response

    def form(self, path: str, action: str) -> dict[str, str]:
        """The fields of the form on `path` that posts to `action` (its form token, for one). Each
        call loads the page afresh, so each answer carries a new single-use token."""
        form = self.forms(path).get(action)
        if form is None:
            raise DeskError(200, f"no form for {action}")
        return form

    def forms(self, path: str) -> dict[str, dict[str, str]]:
        """Every form on one load of `path`, by action: the fields of each (they share the page's token)."""
        return {str(f["action"]): dict(f["fields"]) for f in self._page(path).forms}

    def _page(self, path: str) -> _Page:
        response = self.get(path)
        page = _parse(response)
        if response.status_code != 200:
            raise DeskError(response.status_code, page.title.split(" · ")[0])
        return page

    def _submit(self, form: dict[str, Any]) -> httpx.Response:
        """POST the form as a browser would, and follow the desk's 303 back to a page."""
        action = str(form["action"])
        if not action.startswith("/desk/"):
            raise DeskError(0, "form posts outside the desk")
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": self.origin,
                   "Sec-Fetch-Site": "same-origin"}
        response = self._http.post(action, content=urlencode(form["fields"]).encode("ascii"), headers=headers)
        if response.status_code == 303:
            response = self.get(urlsplit(response.headers["location"]).path)
        if response.status_code != 200:
            raise DeskError(response.status_code, _parse(response).title.split(" · ")[0])
        return response

    # -- what a person does ------------------------------------------------------------------------
    def sign_in(self) -> Person:
        page = self._page(self._login_path)
        form = next((f for f in page.forms if f["action"] == self._login_path), None)
        if form is None:
            raise DeskError(200, "no sign-in form")
        self._submit(form)
        label = form["label"]
        self.account_id = label.removeprefix("Sign in as ").strip() or None
        return self

    def pending(self) -> list[str]:
        """Request ids waiting on the pending page, newest first."""
        text = self.get("/desk/").text
        ids = []
        waiting = text.split("<h2>Recently decided</h2>")[0]
        for chunk in waiting.split('href="/desk/requests/')[1:]:
            ids.append(chunk.split('"', 1)[0])
        return ids

    def _decide(self, request_id: str, verb: str) -> _Page:
        path = f"/desk/requests/{request_id}"
        page = self._page(path)
        form = next((f for f in page.forms if f["action"] == f"{path}/{verb}"), None)
        if form is None:
            raise DeskError(200, f"no {verb} button on the review page")
        return _parse(self._submit(form))

    def confirm(self, request_id: str) -> str:
        """Confirm on the review page; the confirmation reference the page then shows."""
        page = self._decide(request_id, "confirm")
        ref = page.by_id.get("confirmation-ref")
        if not ref:
            raise DeskError(200, "no confirmation reference on the page")
        return ref

    def decline(self, request_id: str) -> None:
        self._decide(request_id, "decline")

    def decline_all_plans(self) -> None:
        """Decline every waiting training plan at once, with the pending page's button."""
        page = self._page("/desk/")
        form = next((f for f in page.forms if f["action"] == "/desk/decline-plans"), None)
        if form is None:
            raise DeskError(200, "no decline-all button on the pending page")
        self._submit(form)

    def sign_out(self) -> None:
        page = self._page("/desk/")
        form = next(f for f in page.forms if f["action"] == "/desk/sign-out")
        self._submit(form)
