"""The browser pages (ADR 0028): a buyer's page and the ops dashboard, plain files served from
api/static (Starlette's StaticFiles: ETag, Last-Modified, 304), built on the public API only.
Every page answer carries a Content-Security-Policy that allows scripts, styles and requests
from this origin alone (no inline script, no third party), and the runbooks of docs/deploy.md
are served as a page so the dashboard can link to their anchors."""

import html
import re
from pathlib import Path
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

from api.context import ctx, endpoint
from api.errors import ApiError
from engine.config.settings import StripeSettings

ASSETS = ("buyer.html", "buyer.js", "seatmap.js", "common.js", "i18n.js", "strings.json",
          "oidc.js", "dashboard.html", "dashboard.js", "style.css")  # fmt: skip
CSP = (
    "default-src 'none'; script-src 'self'{js}; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'{api}; frame-src{frames}; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
# Stripe.js's own origins, as Stripe's CSP guide lists them: the script, its API, its frames.
STRIPE_ORIGINS = {"js": "https://js.stripe.com", "api": "https://api.stripe.com",
                  "frames": "https://js.stripe.com https://hooks.stripe.com"}  # fmt: skip
PAGE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated by ETag: a deploy's new page is seen at once
}
RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"

_static = StaticFiles(packages=[("api", "static")])


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def csp(stripe: StripeSettings | None, issuer: str = "") -> str:
    """This origin alone, and Stripe.js's origins when the pages pay through it (ADR 0039):
    its own (js.stripe.com and Stripe's), or the stand-in's origin, which serves all three;
    and the identity provider's, whose discovery document and token endpoint the pages call
    when they sign in through it (ADR 0050)."""
    used = {"js": "", "api": "", "frames": ""}
    if stripe is not None and stripe.publishable_key:
        origin = origin_of(stripe.js_url)
        used = STRIPE_ORIGINS if origin == STRIPE_ORIGINS["js"] else dict.fromkeys(used, origin)
    if issuer:
        used = {**used, "api": " ".join(x for x in (used["api"], origin_of(issuer)) if x)}
    parts = {k: f" {v}" if v else "" for k, v in used.items()}
    return CSP.format(**{**parts, "frames": parts["frames"] or " 'none'"})


def _with_headers(request: Request, response: Response) -> Response:
    settings = ctx(request).settings
    provider = settings.pages_sign_in
    issuer = provider.issuer if provider is not None else ""
    response.headers["Content-Security-Policy"] = csp(settings.engine.stripe, issuer)
    for name, value in PAGE_HEADERS.items():
        response.headers[name] = value
    return response


async def _file(request: Request, name: str) -> Response:
    try:
        return _with_headers(request, await _static.get_response(name, request.scope))
    except HTTPException as exc:  # a file missing from the package
        raise ApiError(404, "not_found", f"no page {name}") from exc


@endpoint("ui_index")
async def index(request: Request) -> Response:
    return await _file(request, "index.html")


def asset(name: str) -> Route:
    @endpoint(f"ui_{name}")
    async def serve(request: Request) -> Response:
        return await _file(request, name)

    return Route(f"/ui/{name}", serve, methods=["GET"])


def slug(title: str) -> str:
    """The anchor a heading gets, as code hosts make it: lower case, punctuation dropped,
    spaces to hyphens ("Runbook: refund parked" -> "runbook-refund-parked")."""
    return re.sub(r"[^a-z0-9 _-]", "", title.strip().lower()).replace(" ", "-")


def markdown_page(text: str, title: str) -> str:
    """Enough of Markdown to read a runbook and land on its anchors: headings (with ids), fenced
    code, and paragraphs kept as written. Everything is escaped."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            out.append("</pre>" if fenced else "<pre>")
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(#{1,6})\s+(.*)$", line)):
            level, heading = len(m[1]), m[2]
            out.append(f'<h{level} id="{slug(heading)}">{html.escape(heading)}</h{level}>')
        else:
            out.append(html.escape(line) if fenced else f"<p>{html.escape(line)}</p>")
    body = "\n".join(out) + ("</pre>" if fenced else "")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="stylesheet" href="/ui/style.css">'
        f'</head><body class="doc"><main>{body}</main></body></html>'
    )


@endpoint("ui_runbooks")
async def runbooks(request: Request) -> Response:
    """docs/deploy.md as a page (its runbook sections are the dashboard's links)."""
    if not RUNBOOKS.is_file():  # an install without the repository's docs
        raise ApiError(404, "not_found", "the runbooks are in docs/deploy.md of the repository")
    page = markdown_page(RUNBOOKS.read_text(), "onsale runbooks")
    return _with_headers(request, Response(page, media_type="text/html"))


ROUTES = [
    Route("/ui/", index, methods=["GET"]),
    *(asset(name) for name in ASSETS),
    Route("/ui/runbooks", runbooks, methods=["GET"]),
]
