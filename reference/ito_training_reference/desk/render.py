"""HTML for the desk: escaping that shows hidden characters, page layout, and the run chart.

Every dynamic value goes through `esc`: HTML-escaped, and every character a reader could not see
or that could reorder text (controls, bidi overrides and isolates, zero-width characters, odd
separators) replaced by a visible marker such as `⟨U+202E⟩`. Templates are constants in this
package; `h(template, ...)` escapes each argument unless it is already `Markup` built here.
No script, no inline style: the pages work under `default-src 'none'; style-src 'self'`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

from ..cliutil import invisible

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                                "frame-ancestors 'none'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "strict-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
MAX_SHOWN_CHARS = 20_000


class Markup(str):
    """Text that is already HTML built by this module: never escaped again."""

    __slots__ = ()


def esc(value: object, *, multiline: bool = False) -> Markup:
    if isinstance(value, Markup):
        return value
    text = str(value)
    clipped = len(text) > MAX_SHOWN_CHARS
    out: list[str] = []
    for char in text[:MAX_SHOWN_CHARS]:
        if multiline and char == "\n":
            out.append("\n")
        elif invisible(char):
            code = f"U+{ord(char):04X}"
            out.append(f'<span class="hidden-char" title="{code}">⟨{code}⟩</span>')
        else:
            out.append(html.escape(char, quote=True))
    if clipped:
        out.append('<span class="clipped">… (clipped)</span>')
    return Markup("".join(out))


def h(template: str, *args: object, **kwargs: object) -> Markup:
    """`template` is a constant; each argument is escaped unless it is `Markup`."""
    return Markup(template.format(*(esc(a) for a in args), **{k: esc(v) for k, v in kwargs.items()}))


def join(parts: Iterable[Markup], separator: str = "") -> Markup:
    return Markup(separator.join(parts))


def definition_list(rows: Sequence[tuple[str, object]]) -> Markup:
    return h("<dl>{}</dl>", join(h("<dt>{}</dt><dd>{}</dd>", key, value) for key, value in rows))


def table(header: Sequence[str], rows: Iterable[Sequence[object]], *, empty: str = "None.") -> Markup:
    """On a narrow screen the stylesheet stacks each row, labelling each cell with its column."""
    body = [h("<tr>{}</tr>", join(h('<td data-label="{}">{}</td>', name, cell)
                                  for name, cell in zip(header, row, strict=True))) for row in rows]
    if not body:
        return h('<p class="empty">{}</p>', empty)
    head = join(h('<th scope="col">{}</th>', name) for name in header)
    return h("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, join(body))


def link(href: str, label: object) -> Markup:
    """`href` is a path this package built from validated ids; it is escaped all the same."""
    return h('<a href="{}">{}</a>', href, label)


def form(action: str, token: str | None, label: str, *, css: str = "",
         hidden: Sequence[tuple[str, str]] = ()) -> Markup:
    """A POST form with one button. `token` is the page's single-use form token (none on sign-in)."""
    fields = join(h('<input type="hidden" name="{}" value="{}">', name, value) for name, value in
                  ([("csrf", token)] if token is not None else []) + list(hidden))
    return h('<form method="post" action="{}">{}<button type="submit" class="{}">{}</button></form>',
             action, fields, css, label)


def document(title: str, body: Markup, *, account: str | None = None, token: str | None = None) -> bytes:
    nav = Markup("")
    if account is not None and token is not None:
        nav = h('<nav><a href="/desk/">Pending requests</a> <a href="/desk/runs">Runs</a>'
                '<span class="who">Signed in as <strong>{}</strong></span>{}</nav>',
                account, form("/desk/sign-out", token, "Sign out", css="link"))
    page = h('<!doctype html><html lang="en"><head><meta charset="utf-8">'
             '<meta name="viewport" content="width=device-width, initial-scale=1">'
             '<meta name="referrer" content="strict-origin">'
             '<title>{} · Itô desk</title><link rel="stylesheet" href="/desk/static/desk.css">'
             '<link rel="icon" href="/desk/static/favicon.svg" type="image/svg+xml"></head>'
             '<body><header><span class="brand">Itô desk</span>{}</header><main><h1>{}</h1>{}</main>'
             '<footer>Reference backend desk: a person reviews and decides here. '
             'Nothing on this page runs scripts.</footer></body></html>', title, nav, title, body)
    return page.encode("utf-8")


# -- the chart ------------------------------------------------------------------------------------
CHART_W, CHART_H = 640, 260
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 56, 56, 16, 36


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def chart(points: Sequence[tuple[int, float | None, float]],
          marks: Sequence[tuple[int, str, str]] = ()) -> Markup:
    """Inline SVG: loss (left axis) and goodput (right axis, 0-1) over steps. `marks` are (step, kind, label)
    vertical markers, e.g. a loss spike (`spike`) and the checkpoint a restart returns to (`checkpoint`)."""
    usable = [(s, loss, g) for s, loss, g in points if math.isfinite(g) and (loss is None or math.isfinite(loss))]
    if len(usable) < 2:
        return Markup('<p class="empty">No metrics yet: the chart appears once a stage gate has passed.</p>')
    steps = [p[0] for p in usable]
    losses = [p[1] for p in usable if p[1] is not None]
    x0, x1 = min(steps), max(steps)
    top_loss = max(losses) * 1.1 if losses else 1.0
    inner_w, inner_h = CHART_W - _PAD_L - _PAD_R, CHART_H - _PAD_T - _PAD_B

    def x(step: int) -> float:
        return _PAD_L + (step - x0) / ((x1 - x0) or 1) * inner_w

    def y(value: float, top: float) -> float:
        return _PAD_T + inner_h - max(0.0, min(value / top, 1.0)) * inner_h

    loss_line = " ".join(f"{_fmt(x(s))},{_fmt(y(loss, top_loss))}" for s, loss, _ in usable if loss is not None)
    goodput_line = " ".join(f"{_fmt(x(s))},{_fmt(y(g, 1.0))}" for s, _, g in usable)
    bottom, right = _PAD_T + inner_h, _PAD_L + inner_w
    def mark(n: int, step: int, kind: str, label: str) -> Markup:
        """A dashed vertical line, labelled on the side with the more room."""
        at = x(step)
        left = at > _PAD_L + inner_w / 2
        return h('<line class="mark {}" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                 '<text class="mark {}" x="{}" y="{}" text-anchor="{}">{}</text>', kind, _fmt(at), _PAD_T, _fmt(at),
                 bottom, kind, _fmt(at - 4 if left else at + 4), _PAD_T + 12 + 14 * n, "end" if left else "start",
                 label)

    shown = [mark(n, step, kind, label) for n, (step, kind, label) in enumerate(marks) if x0 <= step <= x1]
    ticks = []
    for i in range(5):
        frac = i / 4
        ty = _PAD_T + inner_h - frac * inner_h
        ticks.append(h('<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/>'
                       '<text class="axis loss" x="{}" y="{}" text-anchor="end">{}</text>'
                       '<text class="axis goodput" x="{}" y="{}">{}</text>',
                       _PAD_L, _fmt(ty), right, _fmt(ty), _PAD_L - 6, _fmt(ty + 4), f"{top_loss * frac:.2f}",
                       right + 6, _fmt(ty + 4), f"{frac:.2f}"))
    return h('<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {ht}" width="{w}" '
             'height="{ht}" role="img" aria-labelledby="chart-title"><title id="chart-title">Loss and goodput '
             'over steps {x0} to {x1}</title>{ticks}'
             '<line class="frame" x1="{l}" y1="{b}" x2="{r}" y2="{b}"/>'
             '<polyline class="series loss" points="{loss}"/><polyline class="series goodput" points="{goodput}"/>'
             '{marks}<text class="axis" x="{l}" y="{lab}">step {x0}</text>'
             '<text class="axis" x="{r}" y="{lab}" text-anchor="end">step {x1}</text></svg>'
             '<figcaption><span class="key loss">loss (left axis)</span> '
             '<span class="key goodput">goodput (right axis, 0–1)</span></figcaption></figure>',
             w=CHART_W, ht=CHART_H, x0=x0, x1=x1, ticks=join(ticks), l=_PAD_L, r=right, b=bottom,
             loss=loss_line, goodput=goodput_line, lab=bottom + 24, marks=join(shown))
