import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Tests run on the CPU OpenCL device (PoCL) unless told otherwise, so results are the same on every machine.
os.environ.setdefault("PRB_OPENCL_DEVICE", "cpu")

from tests.skip_reasons import ALLOWED_SKIP_REASONS  # noqa: E402


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_unexpected_skip(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):  # xfail markers are checked by pytest itself
        return
    reason = _skip_reason(report)
    if reason in ALLOWED_SKIP_REASONS:
        return
    report.outcome = "failed"
    report.longrepr = (f"unexpected skip ({reason}): only the reasons in tests/skip_reasons.py "
                       f"ALLOWED_SKIP_REASONS may skip a test")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_unexpected_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_unexpected_skip(outcome.get_result())
