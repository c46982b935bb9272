"""/docs: Swagger UI from the assets the fastapi-offline package ships (pinned in pyproject and constraints.txt),
served by this server under /static/docs, so the API docs work on an air-gapped host. The page's one inline
script (its initialisation) is allowed by its hash; nothing is loaded from anywhere else."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/static/docs"
router = APIRouter(include_in_schema=False)


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


def _page() -> tuple[str, str]:
    html = get_swagger_ui_html(openapi_url="/openapi.json", title="attention-grader API",
                               swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS_URL}/favicon.png").body.decode()
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(js.encode()).digest()).decode() + "'"
                      for js in re.findall(r"<script>(.*?)</script>", html, re.S))
    csp = (f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
    return html, csp


@router.get("/docs", response_class=HTMLResponse)
def docs() -> HTMLResponse:
    html, csp = _page()
    return HTMLResponse(html, headers={"Content-Security-Policy": csp})


PUBLIC = ("/healthz", "/readyz")


def install(app: FastAPI) -> None:
    """The /docs page and its assets (the app is created with docs_url=None), and the bearer scheme in the
    OpenAPI document, so /docs has an Authorize button and its "Try it out" sends the token."""
    app.mount(ASSETS_URL, StaticFiles(directory=str(assets_dir())), name="docs-assets")
    app.include_router(router)
    plain = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = plain()
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "a token from `grade tokens create`"}}
            for path, ops in schema.get("paths", {}).items():
                if path not in PUBLIC:
                    for op in ops.values():
                        op.setdefault("security", [{"bearer": []}])
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
