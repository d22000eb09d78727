"""tests/conftest.py's guard on skips and xfails, run on small test files of its own: a skip or an
xfail with an unlisted reason, a non-strict xfail, an xfail without a known failure's band, a known
failure whose value left its band either way, or one that passes, each fails the run."""
import pytest

from tests.skip_reasons import XFAIL_COLLIDING_SCENE_PARTS

pytest_plugins = ["pytester"]

HEADER = f'''
import pytest
from tests.known_failures import KnownFailure, known_failure
LISTED = {XFAIL_COLLIDING_SCENE_PARTS!r}
'''


def run(pytester, body):
    pytester.makeconftest("from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport")
    pytester.makepyfile(HEADER + body)
    return pytester.runpytest("-p", "no:cacheprovider")


def known(value):
    """A test that fails with ``value`` where 0.056 +- 0.003 is known."""
    return f'''
@pytest.mark.xfail(strict=True, raises=KnownFailure, reason=LISTED)
def test_known():
    with known_failure(speed=({value}, 0.056, 0.003)):
        assert {value} < 0.01
'''


@pytest.mark.parametrize("value, outcome", [
    (0.0565, dict(xfailed=1)),
    (0.0595, dict(failed=1)),  # worse
    (0.0400, dict(failed=1)),  # better, still failing
    (0.0050, dict(failed=1)),  # fixed: a strict xpass
])
def test_a_known_failure_is_expected_only_within_its_band(pytester, value, outcome):
    run(pytester, known(value)).assert_outcomes(**outcome)


@pytest.mark.parametrize("marker", [
    "pytest.mark.xfail(strict=False, raises=KnownFailure, reason=LISTED)",
    "pytest.mark.xfail(raises=KnownFailure, reason=LISTED)",  # xfail_strict is not set: not strict
    "pytest.mark.xfail(strict=True, reason=LISTED)",  # no band
    "pytest.mark.xfail(strict=True, raises=AssertionError, reason=LISTED)",
    "pytest.mark.xfail(strict=True, raises=KnownFailure, reason='not in the list')",
    "pytest.mark.xfail(False, strict=True, raises=KnownFailure, reason='not in the list')",  # even inactive
])
def test_an_xfail_marker_outside_the_rules_fails_the_run(pytester, marker):
    result = run(pytester, f'''
@{marker}
def test_marked():
    with known_failure(speed=(0.056, 0.056, 0.003)):
        assert False
''')
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*xfail*"])


def test_an_xfail_called_in_the_test_fails_the_run(pytester):
    run(pytester, '''
def test_imperative():
    pytest.xfail(LISTED)
''').assert_outcomes(failed=1)


def test_a_skip_outside_the_list_fails_the_run(pytester):
    run(pytester, '''
def test_skipped():
    pytest.skip("no reason listed")
''').assert_outcomes(failed=1)
