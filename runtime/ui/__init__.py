"""``corral ui``: a small web dashboard served from a runtime's store (``pip install 'corral[ui]'``).

:mod:`.app` builds the Starlette app (pages, actions, the CSRF and token checks); :mod:`.views` turns the
store's records into what the templates show (elapsed time against the timeout, the throughput chart).
The templates and the stylesheet ship in this package: no build step, nothing fetched from elsewhere.
"""
