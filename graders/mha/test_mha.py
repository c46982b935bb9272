"""Hidden suite: multi-head self-attention with an optional mask (both tracks)."""

import pytest

from graders.common.problem import Problem
from graders.common.standard_tests import *  # noqa: F401,F403  (the tests every exercise shares)
from graders.common.sweep import *  # noqa: F401,F403  (the shape sweep and the large cases)
from graders.common.value_space import *  # noqa: F401,F403  (scores where softmax code breaks)


@pytest.fixture(scope="module")
def problem():
    return Problem("self")
