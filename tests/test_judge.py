"""One judge: a saved failure's facts, judged again without the queue, give its verdict.

Each mutant is run until it fails, its files are written as a user's run writes
them, and the JSON is read back: `rejudge` (and `leasecheck judge`) must find the
very violation the run reported, from the facts alone, and write the same facts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import settings

import mutants
from leasecheck import cli
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.verdict.judge import Judge, rejudge, token_value
from tests.fixtures import derandomized

FIND = derandomized(300)
# One mutant per kind of fact: effect rows, a heartbeat, a failure report, the
# receiver, and the queue's state() read while judging (late-owner, no-lost-jobs).
KINDS = ["naive", "unfenced-heartbeat", "unfenced-fail", "attempt-key", "strict-lease"]


def _saved(
    name: str, pool: actors.Pool, out: Path, budget: settings = FIND
) -> tuple[Path, PropertyViolated]:
    spec = mutants.ALL[name]
    harness = Harness(queue=contract.load(spec), pool=pool, spec=spec)
    harness.reset()
    with pytest.raises(PropertyViolated) as error:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=budget)
    (path,) = [p for p in harness.recorder.write(out, name, spec) if p.suffix == ".json"]
    return path, error.value


@pytest.mark.parametrize("name", KINDS)
def test_saved_facts_are_judged_again_to_the_same_violation(
    name: str, reference_pool: actors.Pool, tmp_path: Path
) -> None:
    path, error = _saved(name, reference_pool, tmp_path)
    saved = json.loads(path.read_text())["judge"]
    judge = rejudge(saved)
    found = [str(v) for v in [*judge.oracle.ledger.violations, *judge.oracle.ledger.deferred]]
    assert str(error.violation) in found
    assert json.loads(json.dumps(judge.to_json(), default=str)) == saved


def test_no_lost_jobs_is_judged_again_from_state_answers(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    """limbo-at-cap dies on what state() answered after the drain: those answers are
    facts in the file, so no-lost-jobs is judged again without the database."""
    budget = settings(FIND, max_examples=1000)
    path, error = _saved("limbo-at-cap", reference_pool, tmp_path, budget)
    assert error.violation.prop == "no-lost-jobs"
    saved = json.loads(path.read_text())["judge"]
    assert [f["op"] for f in saved["facts"]].count("state") >= len(error.violation.evidence)
    assert str(error.violation) in [str(v) for v in rejudge(saved).oracle.ledger.violations]


def test_facts_the_oracle_did_not_read_are_refused(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    """A state answer that was never asked for means another oracle judged the file."""
    path, error = _saved("strict-lease", reference_pool, tmp_path)
    assert error.violation.prop == "late-owner"  # judged from a state() answer
    saved = json.loads(path.read_text())["judge"]
    first = next(i for i, f in enumerate(saved["facts"]) if f["op"] == "state")
    saved["facts"].insert(first, {"op": "state", "args": {"job_id": -1, "status": "done"}})
    with pytest.raises(ValueError, match="another oracle"):
        rejudge(saved)


def test_the_judge_command(
    reference_pool: actors.Pool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`leasecheck judge FILE` prints the violation and exits 1; a file without facts is
    one line and exit 2."""
    path, error = _saved("naive", reference_pool, tmp_path)
    assert cli.main(["judge", str(path)]) == 1
    assert str(error.violation) in capsys.readouterr().out
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"history": [], "violation": "x"}))
    assert cli.main(["judge", str(old)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no judge's facts" in err and len(err.splitlines()) == 1


def test_tokens_are_written_down_as_values_that_order_alike() -> None:
    """A fact holds plain values, and a token read back compares as the original did."""
    early = datetime(2026, 9, 1, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    late = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    pairs = [(1, 2), (Decimal(3), Decimal("3.5")), (early, late), ((2, "a"), (10, "a"))]
    for small, big in pairs:
        a, b = token_value(small), token_value(big)
        assert json.loads(json.dumps([a, b])) == [a, b]
        assert a < b and a != b and token_value(small) == a


def test_a_fact_of_another_version_is_one_line() -> None:
    """A fact whose arguments this oracle does not take is refused with a reason."""
    saved = {
        "rules": {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True},
        "facts": [{"op": "enqueued", "args": {"job_id": 1, "label": "job1", "priority": 5}}],
    }
    with pytest.raises(ValueError, match="fact 0 \\(enqueued\\) does not fit this oracle"):
        rejudge(saved)


def _late_owner_refused_while_a_claim_is_in_flight(answered: dict[str, object]) -> Judge:
    """w0's lease (30 s) has run out; a claim call is in flight (its answer waits) when
    w0's completion is refused at t=40s; then the claim answers as `answered` says."""
    lease = 30_000_000
    facts = [
        {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}},
        {"op": "grant", "args": {"job_id": 1, "token": 1, "worker": "w0", "label": "w0:job1#1",
                                 "at": 0, "key": "k1", "event": 2}},
        {"op": "claim_sent", "args": {"call": 7}},
        {"op": "complete", "args": {"grant": 0, "accepted": False, "at": 40_000_000,
                                    "answered": 40_000_000}},
        {"op": "state", "args": {"job_id": 1, "status": "running"}},
        {"op": "claim_answered", "args": {"call": 7, **answered}},
    ]  # fmt: skip
    saved = {
        "rules": {"lease": lease, "max_attempts": 3, "ordered_tokens": True, "observes": True},
        "facts": facts,
    }
    return rejudge(saved)


def test_a_late_owner_refusal_waits_for_the_claims_in_flight() -> None:
    """Refused while a claim that may already have taken the job had not answered: no
    verdict until it answers. It handed the job out: refused rightly. It handed out
    nothing: late-owner, judged then. Its answer was lost: not judged, and said so."""
    rightly = _late_owner_refused_while_a_claim_is_in_flight({"jobs": [1], "known": True})
    assert rightly.oracle.ledger.violations == [] and rightly.oracle.in_flight.waiting == []
    wrongly = _late_owner_refused_while_a_claim_is_in_flight({"jobs": [], "known": True})
    assert [v.prop for v in wrongly.oracle.ledger.violations] == ["late-owner"]
    assert "the queue shows it running" in wrongly.oracle.ledger.violations[0].evidence[0]
    unknown = _late_owner_refused_while_a_claim_is_in_flight({"jobs": [], "known": False})
    assert unknown.oracle.ledger.violations == []
    assert "lost its answer" in unknown.oracle.ledger.unjudged[0]


def _late_grant(sent: int | None) -> Judge:
    """w1's claim of job1 is sent at t=30s and stays in flight (paused between its
    statements); w2 is granted job1#3 at t=60s; then w1's claim answers job1#2, which
    it took at t=30s (the reference.sql file queue's run that showed the gap)."""
    grant = {
        "job_id": 1,
        "worker": "w1",
        "label": "w1:job1#2",
        "at": 30_000_000,
        "key": "k1",
        "event": 9,
    }
    facts = [
        {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}},
        {"op": "grant", "args": {"job_id": 1, "token": 1, "worker": "w0", "label": "w0:job1#1",
                                 "at": 0, "key": "k1", "event": 2}},
        {"op": "claim_sent", "args": {"call": 5}},
        {"op": "grant", "args": {"job_id": 1, "token": 3, "worker": "w2", "label": "w2:job1#3",
                                 "at": 60_000_001, "key": "k1", "event": 7}},
        {"op": "grant", "args": {**grant, "token": 2, **({"sent": sent} if sent else {})}},
        {"op": "claim_answered", "args": {"call": 5, "jobs": [1], "known": True}},
    ]  # fmt: skip
    rules = {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True, "observes": True}
    return rejudge({"rules": rules, "facts": facts})


def test_a_claim_answered_late_is_not_ordered_after_grants_made_while_in_flight() -> None:
    """Its token and lease are checked against the grants before it was sent; against
    those granted meanwhile, which came first cannot be told: not judged, and said so.
    Told as an ordinary grant, the same answers break fencing (token 2 after 3)."""
    late = _late_grant(sent=5)
    assert late.oracle.ledger.violations == []
    assert (
        "w2:job1#3 of job1 was granted while its claim was in flight"
        in late.oracle.ledger.unjudged[0]
    )
    ordinary = _late_grant(sent=None)
    assert [v.prop for v in ordinary.oracle.ledger.violations][:1] == ["fencing"]


def _refused_after_a_race() -> Judge:
    """`_late_grant`'s race, then w1:job1#2's completion refused at t=90s, its lease
    over since t=60s (the reference_v2.sql file queue's run that showed the gap: a sweep
    had re-queued the job and another worker took it while w1's claim was paused). The
    oracle that took the grant told last for the owner read the queue's state here and
    called the refusal a late-owner break; this one reads nothing for it."""
    facts = [
        *_late_grant(sent=5).to_json()["facts"],
        {"op": "complete", "args": {"grant": 2, "accepted": False, "at": 90_000_000,
                                    "answered": 90_000_000}},
    ]  # fmt: skip
    rules = {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True, "observes": True}
    return rejudge({"rules": rules, "facts": facts})


def test_which_of_racing_grants_owns_the_job_is_not_guessed() -> None:
    """A claim answered after another grant of its job was made while it was in flight:
    either may own the job, so its completion's refusal is not judged (and said so)
    where the oracle used to take the grant told last for the owner and call the
    refusal a late-owner break."""
    raced = _refused_after_a_race()
    assert raced.oracle.ledger.violations == []
    assert any(
        "cannot be told (their claims raced" in line for line in raced.oracle.ledger.unjudged
    )


def test_a_claim_that_lost_its_answer_may_have_used_an_attempt() -> None:
    """job1 is failed for good after two claims seen of three, but a third claim lost its
    answer in flight: whether it took the job's last attempt cannot be told, so no-lost-
    jobs is not judged for it; with every claim's answer known, the same state is a break."""

    def run(known: bool) -> Judge:
        grant = {"job_id": 1, "worker": "w0", "key": "k1"}
        facts = [
            {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}},
            {"op": "grant", "args": {**grant, "token": 1, "label": "w0:job1#1", "at": 0,
                                     "event": 2}},
            {"op": "fail", "args": {"grant": 0, "accepted": True, "at": 1}},
            {"op": "grant", "args": {**grant, "token": 2, "label": "w0:job1#2", "at": 2,
                                     "event": 5}},
            {"op": "fail", "args": {"grant": 1, "accepted": True, "at": 3}},
            {"op": "claim_sent", "args": {"call": 8}},
            {"op": "claim_answered", "args": {"call": 8, "jobs": [], "known": known}},
            {"op": "drained", "args": {}},
            {"op": "state", "args": {"job_id": 1, "status": "failed"}},
        ]  # fmt: skip
        rules = {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True, "observes": True}
        return rejudge({"rules": rules, "facts": facts})

    lost = run(known=False)
    assert lost.oracle.ledger.violations == []
    assert any("1 claim lost its answer" in line for line in lost.oracle.ledger.unjudged)
    seen = run(known=True)
    assert [v.prop for v in seen.oracle.ledger.violations] == ["no-lost-jobs"]


def test_a_claim_that_lost_its_answer_may_have_taken_the_job() -> None:
    """w1's claim is in flight when w0's lease runs out; w1's worker dies and the claim's
    answer is lost; then w0's completion is refused. The lost claim may have taken the
    job, so the refusal is not judged; had the claim answered nothing, it is late-owner."""

    def run(answer: dict[str, object]) -> Judge:
        facts = [
            {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}},
            {"op": "grant", "args": {"job_id": 1, "token": 1, "worker": "w0",
                                     "label": "w0:job1#1", "at": 0, "key": "k1", "event": 2}},
            {"op": "claim_sent", "args": {"call": 7}},
            {"op": "claim_answered", "args": {"call": 7, **answer}},
            {"op": "complete", "args": {"grant": 0, "accepted": False, "at": 40_000_000,
                                        "answered": 40_000_000}},
        ]  # fmt: skip
        if answer["known"]:
            facts.append({"op": "state", "args": {"job_id": 1, "status": "running"}})
        rules = {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True, "observes": True}
        return rejudge({"rules": rules, "facts": facts})

    lost = run({"jobs": [], "known": False})
    assert lost.oracle.ledger.violations == []
    assert any(
        "a claim that lost its answer may have taken job1" in u for u in lost.oracle.ledger.unjudged
    )
    nothing = run({"jobs": [], "known": True})
    assert [v.prop for v in nothing.oracle.ledger.violations] == ["late-owner"]


def test_a_claim_in_flight_took_its_job_between_send_and_answer() -> None:
    """w3's claim is sent at t=30s and paused while w1 holds job1 until t=60s (chancy's
    matrix run that showed the gap); it goes on at t=60.000001s and takes job1. Only a
    lease that held over the whole stretch breaks exclusive-lease: answered at t=45s it
    does, answered after t=60s it does not, where the judge used to date it at t=30s."""

    def run(answered_at: int) -> Judge:
        grant = {"job_id": 1, "key": "k1"}
        facts = [
            {"op": "enqueued", "args": {"job_id": 1, "label": "job1"}},
            {"op": "grant", "args": {**grant, "token": 1, "worker": "w1", "label": "w1:job1#1",
                                     "at": 30_000_000, "event": 2}},
            {"op": "claim_sent", "args": {"call": 5}},
            {"op": "grant", "args": {**grant, "token": 2, "worker": "w3", "label": "w3:job1#2",
                                     "at": 30_000_000, "event": 9, "sent": 5,
                                     "answered_at": answered_at}},
            {"op": "claim_answered", "args": {"call": 5, "jobs": [1], "known": True}},
        ]  # fmt: skip
        rules = {"lease": 30_000_000, "max_attempts": 3, "ordered_tokens": True, "observes": True}
        return rejudge({"rules": rules, "facts": facts})

    assert run(answered_at=60_000_001).oracle.ledger.violations == []
    held = run(answered_at=45_000_000).oracle.ledger.violations
    assert [v.prop for v in held] == ["exclusive-lease"]
    assert "between t=30s and t=45s (its claim was in flight)" in held[0].message
