"""`/docs` offline: Swagger UI 5 (it reads FastAPI's OpenAPI 3.1) from the `fastapi-swagger`
package, whose wheel ships its assets, instead of FastAPI's default page, which loads them
from a CDN and is blank on a machine with no internet. Open without a token, as before."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from scheduler.api.bodies import BoundedRoute

ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
PREFIX = "/docs-assets/"


def asset_paths() -> set[str]:
    """The paths served without a token besides /docs itself."""
    return {PREFIX + name for name in ASSETS}


def docs_router(title: str, openapi_url: str | None) -> APIRouter:
    """`/docs` and its assets, for an app created with `docs_url=None`."""
    root = Path(str(files("fastapi_swagger") / "resources"))
    openapi_url = openapi_url or "/openapi.json"
    router = APIRouter(route_class=BoundedRoute)

    @router.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} API",
            swagger_js_url=PREFIX + "swagger-ui-bundle.js",
            swagger_css_url=PREFIX + "swagger-ui.css",
            swagger_favicon_url=PREFIX + "favicon-32x32.png",
        )

    @router.get(PREFIX + "{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name not in ASSETS:
            return Response(status_code=404)
        return Response(
            (root / name).read_bytes(),
            media_type=ASSETS[name],
            headers={"Cache-Control": "max-age=86400"},
        )

    return router
