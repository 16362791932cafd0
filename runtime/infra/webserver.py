"""The dashboard's HTTP server: :func:`serve_http` runs uvicorn with an ASGI app on the running event loop until
SIGINT or SIGTERM. It lives in infra because the server owns its listening socket and the tasks it starts per
connection; uvicorn (``pip install 'corral[ui]'``) is imported only here, when a dashboard is served."""

from __future__ import annotations

from typing import Any

__all__ = ["serve_http"]


async def serve_http(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` on ``host:port`` until a stop signal (uvicorn's own handlers: the first one ends it, a
    second SIGINT forces it). No lifespan: the caller has opened what the app needs on this loop before, and
    closes it after; the signal is not raised again once the server has stopped (uvicorn does, for the
    handlers it replaced: asyncio's would then cancel that closing, and Ctrl-C ended in a traceback)."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)  # uvicorn >= 0.29 raises these again on exit
            if isinstance(captured, list):
                captured.clear()

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    await Server(config).serve()
