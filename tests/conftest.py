import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# Tests run on the CPU OpenCL device (PoCL) unless told otherwise, so results are the same on every machine.
os.environ.setdefault("PRB_OPENCL_DEVICE", "cpu")

from tests.known_failures import KnownFailure  # noqa: E402
from tests.skip_reasons import ALLOWED_SKIP_REASONS, ALLOWED_XFAIL_REASONS, NON_STRICT_XFAIL_REASONS  # noqa: E402


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail(report, message: str) -> None:
    report.outcome = "failed"
    report.longrepr = message


def _fail_unexpected_skip(report) -> None:
    if hasattr(report, "wasxfail"):  # an xfailed (or non-strict xpassed) test: its reason must be listed
        if report.wasxfail not in ALLOWED_XFAIL_REASONS:
            _fail(report, f"unexpected xfail ({report.wasxfail}): only the reasons in tests/skip_reasons.py "
                          f"ALLOWED_XFAIL_REASONS may mark a test xfail")
        return
    if not report.skipped:
        return
    reason = _skip_reason(report)
    if reason in ALLOWED_SKIP_REASONS:
        return
    _fail(report, f"unexpected skip ({reason}): only the reasons in tests/skip_reasons.py "
                  f"ALLOWED_SKIP_REASONS may skip a test")


def xfail_rule_broken(item) -> str | None:
    """What is wrong with ``item``'s xfail markers, whatever their condition (one that only holds
    on a GPU is checked on the CPU too): each must carry a listed reason and be a known failure,
    strict=True with raises=KnownFailure, unless its reason is listed as non-strict."""
    for mark in item.iter_markers("xfail"):
        reason = mark.kwargs.get("reason", "")
        if reason not in ALLOWED_XFAIL_REASONS:
            return f"xfail reason not in tests/skip_reasons.py ALLOWED_XFAIL_REASONS ({reason or 'none given'})"
        if reason in NON_STRICT_XFAIL_REASONS:
            continue
        strict = mark.kwargs.get("strict", item.config.getini("xfail_strict"))
        if strict is not True or mark.kwargs.get("raises") is not KnownFailure:
            return ("an xfail must be strict=True with raises=KnownFailure, its assertion inside "
                    "tests/known_failures.py known_failure(), so that a pass or a changed value fails the "
                    "run; only NON_STRICT_XFAIL_REASONS may be otherwise")
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup" and report.passed:
        broken = xfail_rule_broken(item)
        if broken:
            _fail(report, broken)
            return
    if (report.skipped and hasattr(report, "wasxfail") and report.wasxfail not in NON_STRICT_XFAIL_REASONS
            and not (call.excinfo and call.excinfo.errisinstance(KnownFailure))):
        _fail(report, f"xfailed without a KnownFailure ({report.wasxfail}): pytest.xfail() in a test "
                      f"cannot be strict; mark it xfail(strict=True, raises=KnownFailure)")
        return
    _fail_unexpected_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_unexpected_skip(outcome.get_result())
