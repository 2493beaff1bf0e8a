"""Sum the parts of `make test` (one JUnit XML report per part) into one table and one closing
line, so a run that failed in one part still reports every part and how many tests ran."""

import sys
import xml.etree.ElementTree as ET


def counts(path: str) -> dict[str, int]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}  # the part never reported
    suites = [root] if root.tag == "testsuite" else list(root)
    return {
        k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")
    }


def main(paths: list[str]) -> int:
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    print(f"{'part':<40} {'ran':>6} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for path in paths:
        c = counts(path)
        failed = c["failures"] + c["errors"]
        passed = c["tests"] - failed - c["skipped"]
        print(f"{path:<40} {c['tests']:>6} {passed:>7} {failed:>7} {c['skipped']:>8}")
        for k in total:
            total[k] += c[k]
    failed = total["failures"] + total["errors"]
    passed = total["tests"] - failed - total["skipped"]
    print(f"total: {passed} passed, {failed} failed, {total['skipped']} skipped")
    return 1 if failed or total["tests"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
