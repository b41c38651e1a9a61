"""Where two runs of one program parted (`stateful.story.parted`), from stories alone."""

from __future__ import annotations

from leasecheck.stateful.program import Step
from leasecheck.stateful.story.parted import Stories

START = Step("start", {"workers": 2})
CLAIM = Step("claim", {"pick": 0})


def _run(stories: Stories, steps: list[Step], lines: list[str]) -> None:
    """Tell one example: step i's line after it is appended, as the machine does."""
    program: list[Step] = []
    stories.begin(program)
    for step, line in zip(steps, lines, strict=True):
        program.append(step)
        stories.told(line)


def test_the_first_line_that_differs_within_the_shared_steps_is_named() -> None:
    stories = Stories()
    _run(stories, [START, CLAIM, Step("crash", {"pick": 0})], ["enqueue job1", "w0 claims", "x"])
    _run(stories, [START, CLAIM], ["enqueue job1", "w0 claim:\n nothing"])
    said = stories.parted()
    assert said is not None
    assert said.startswith("the two runs parted at step 2, state.claim(pick=0): ")
    assert "this run told 'w0 claim: nothing', an earlier run of the same steps 'w0 claims'" in said


def test_stories_that_agree_name_nothing() -> None:
    stories = Stories()
    assert stories.parted() is None
    _run(stories, [START, CLAIM], ["enqueue job1", "w0 claims"])
    assert stories.parted() is None  # nothing earlier to compare with
    _run(stories, [START, CLAIM], ["enqueue job1", "w0 claims"])
    _run(stories, [START, Step("pause", {"pick": 0})], ["enqueue job1", "w0 pauses"])
    assert stories.parted() is None  # they differ only past the steps they share
