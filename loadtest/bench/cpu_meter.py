"""Where a load's CPU goes, per process: the CPU time (user + system) that each group of
processes (a server and its workers, Redis, the load generator) spent during one phase, per
request the phase answered. A side-by-side run of two endpoints then says not only which is
faster but which process the difference is in (`loadtest.bench.claim_rate`)."""

import resource
from collections.abc import Callable, Mapping

import psutil

Pids = Callable[[], list[int]]  # the root processes of a group, read when the phase starts


def group_cpu_s(roots: list[int]) -> float:
    """CPU seconds spent so far by `roots` and every process under them (one gone: skipped)."""
    total = 0.0
    for pid in roots:
        try:
            proc = psutil.Process(pid)
            procs = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for each in procs:
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def children_cpu_s() -> float:
    """CPU seconds of this process's children that were waited for (the load generator run by
    subprocess.run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """`with meter.phase() as took:` ... then `took(requests)`: µs of CPU per request of each
    group, and of the load generator (`load`), during the phase."""

    def __init__(self, groups: Mapping[str, Pids]) -> None:
        self.groups = dict(groups)

    def start(self) -> Callable[[float], dict[str, float]]:
        roots = {name: pids() for name, pids in self.groups.items()}
        before = {name: group_cpu_s(r) for name, r in roots.items()}
        before_load = children_cpu_s()

        def took(requests: float) -> dict[str, float]:
            per = 1e6 / max(requests, 1.0)
            used = {f"{n}_us": (group_cpu_s(r) - before[n]) * per for n, r in roots.items()}
            return used | {"load_us": (children_cpu_s() - before_load) * per}

        return took
