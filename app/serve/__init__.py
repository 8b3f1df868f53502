"""`gpuledger serve`: the lake's figures over HTTP (`/metrics` for Prometheus, `/healthz`).

`create_app` (app/serve/server.py) builds the FastAPI application; other routers (the read-only
API) are mounted beside `/metrics` by passing them in.
"""
