"""Driving an HTTP endpoint with wrk (a separate C process, so the load generator does not share
the server's interpreter) and reading its figures: the rate, the latency quantiles, the non-2xx
answers and, with a CpuMeter, each process group's CPU per request. `claim_script` makes the
claim's requests: a new login's token per claim, or a few logins that claim again and again."""

import re
import subprocess
import tempfile
from collections.abc import Iterable

from api.identity import DemoTokens
from loadtest.bench.cpu_meter import CpuMeter

# Each wrk thread reads the tokens file and takes every THREADS-th line from its own offset,
# so no two requests of a run share a login when the file has a line per claim.
WRK_CLAIM = """
local threads, made = %d, 0
setup = function(thread)
  thread:set("tid", made)
  made = made + 1
end
local tokens, n = {}, 0
init = function(args)
  local i = 0
  for line in io.lines("%s") do
    if i %% threads == tid then tokens[#tokens + 1] = line end
    i = i + 1
  end
end
request = function()
  n = n + 1
  local token = tokens[((n - 1) %% #tokens) + 1]
  return wrk.format("POST", "%s",
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, "{}")
end
"""
WRK_THREADS = 2
CLAIM_PATH = "/v1/events/bench/holds"
# Logins per second of a run, more than this machine claims (about 7,000/s; the bare endpoint
# about 10,000/s): every claim is a new login's, and a short run signs few tokens. Production
# tokens (RS256 JWTs) take about 0.3 ms each to sign, and their claims go slower: fewer.
LOGINS_PER_S = 25_000
JWT_LOGINS_PER_S = 9_000


def claim_script(tokens: Iterable[str]) -> str:
    """A wrk script claiming on event "bench" with `tokens`, one per claim in turn, cycling:
    more tokens than claims makes every claim a new login's (the realistic shape: each buyer
    holds one hold); a few makes each login claim again and again (each claim then also
    releases the login's previous hold)."""
    return claim_scripts(tokens, CLAIM_PATH)[0]


def claim_scripts(tokens: Iterable[str], *paths: str) -> list[str]:
    """`claim_script`'s requests POSTed to each of `paths`, one wrk script per path, the tokens
    written once for all."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as t:
        t.write("\n".join(tokens))
    scripts = []
    for path in paths:
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(WRK_CLAIM % (WRK_THREADS, t.name, path))
        scripts.append(f.name)
    return scripts


def demo_tokens(token_secret: str, logins: int) -> list[str]:
    """A demo token (the name-only login) for each of `logins` logins."""
    tokens = DemoTokens(token_secret, ttl_s=3_600)
    return [tokens.issue(f"u{i}") for i in range(logins)]


def wrk(
    url: str,
    seconds: int,
    connections: int,
    script: str | None = None,
    meter: CpuMeter | None = None,
) -> dict[str, float]:
    """wrk's rate and latency; with a `meter`, also each process group's CPU µs per request."""
    cmd = ["wrk", f"-t{WRK_THREADS}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if script:
        cmd += ["-s", script]
    took = meter.start() if meter is not None else None
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = float(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    lat = {}
    for q in ("50", "99"):
        m = re.search(rf"\s{q}(?:\.000)?%\s+([\d.]+)(us|ms|s)", out)
        assert m, out
        value, unit = float(m.group(1)), m.group(2)
        lat[q] = value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": rps,
        "p50": lat["50"],
        "p99": lat["99"],
        "non2xx": float(non2xx.group(1)) if non2xx else 0.0,
        **(took(requests) if took is not None else {}),
    }
