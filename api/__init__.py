"""HTTP face of the engine (starlette + uvicorn): checkout API and provider callbacks."""
