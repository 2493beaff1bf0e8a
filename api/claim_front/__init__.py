"""The claim front: everything a claim meets before the normal path (api/routes/checkout.py)
decides it, in one room (ADR 0048).

At T0 nearly every claim is a refusal, and answering one costs more than the refusal is worth
if it goes the whole way. In the order a claim meets them:

- `connection.py`: `onsale serve`'s connections look at a claim before it becomes an ASGI
  request; one that waits at its event's gate holds no task, and a sold-out refusal is written
  there in one write;
- `route.py`: the claim route skips Starlette's middleware and router;
- `asgi_lane.py`: a claim that reached ASGI without its connection's verdict waits at the gate
  there, and a sold-out refusal is answered before its token's signature is checked;
- `rules.py`: what both lanes may answer and when a claim let through is refused after all;
- `ticket.py`: the one thing in the scope that carries a claim's verdict and start onwards;
- `uvicorn_seam.py`: the only module that touches uvicorn's internals, each one named.

The gate and the sold-out memory are the engine's (engine/gate/); both lanes take its one
verdict type (REFUSED, PLACED, or Wait)."""
