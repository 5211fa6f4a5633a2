"""The test harness's interpreter shortcuts (tests/interpreter.py) in a child process the suite starts, e.g. the
release arm's child, which runs FLA's kernels in a fresh interpreter that the suite's conftest never sees.

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that holds one; a test puts this
folder on the child's ``PYTHONPATH`` (:func:`tests.helpers.harness_env`) and the release arm passes its parent's
``sys.path`` on to its child. It acts only when ``NSA_EXP_TEST_HARNESS=1`` and ``TRITON_INTERPRET=1`` are both set:
it then skips Triton's redundant re-patching and replays launches already run on byte-identical arguments, as the
suite does in its own processes; the kernels, grids and FLA files are untouched."""

import os

if os.environ.get("NSA_EXP_TEST_HARNESS") == "1" and os.environ.get("TRITON_INTERPRET") == "1":
    from tests.interpreter import replay_identical_launches, skip_repatching_inside_a_launch

    if skip_repatching_inside_a_launch():
        replay_identical_launches()
