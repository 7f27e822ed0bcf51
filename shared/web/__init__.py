"""The web layer both servers use (FastAPI, Starlette, uvicorn): access control, request
limits, JSON bodies that fail with the contract's 422, the predict-route metrics and the
uvicorn start-up. The rest of `shared` imports no web framework.
"""
