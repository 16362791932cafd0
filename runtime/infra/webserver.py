"""The dashboard's HTTP server: :func:`serve_http` runs uvicorn with an ASGI app on the running event loop until
SIGINT or SIGTERM. It lives in infra because the server owns its listening socket and the tasks it starts per
connection; uvicorn (``pip install 'corral[ui]'``) is imported only here, when a dashboard is served."""

from __future__ import annotations

from typing import Any

__all__ = ["serve_http"]


async def serve_http(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` on ``host:port`` until a stop signal (uvicorn's own handlers: the first one ends it).
    No lifespan: the caller has opened what the app needs on this loop before, and closes it after."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    await uvicorn.Server(config).serve()
