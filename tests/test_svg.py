"""The SVG timeline, read back as XML: lanes, lease bars, completions and the violation.

The fixtures in tests/data are failure files the machine wrote for real mutants
(`tests/data/make_svg_fixtures.py`), drawn with the judge their saved facts give; the
small hand-built ones pin down one rule each, with a judge told their answers as the
machine tells it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from leasecheck.stateful.contract import Claim, as_claim
from leasecheck.stateful.history import History
from leasecheck.stateful.story import timeline
from leasecheck.stateful.story.claimtext import short_label
from leasecheck.stateful.story.svg import _CHAR, load, main, render_svg
from leasecheck.stateful.verdict.grants import Grant
from leasecheck.stateful.verdict.judge import Judge, Rules

DATA = Path(__file__).with_name("data")
SECOND = 1_000_000
LEASE = 30 * SECOND
NS = "{http://www.w3.org/2000/svg}"
FIXTURES = sorted(DATA.glob("*.json"))


def _judged(history: History) -> Judge:
    """A judge told a hand-built history's committed answers, in order, as the machine does."""
    judge = Judge(Rules(lease=LEASE, max_attempts=None, ordered_tokens=False))
    grants: dict[tuple[str, Any], Grant] = {}
    for e in history.events:
        if e.kind != "ok":
            continue
        if e.op == "enqueue":
            judge.enqueued(e.value, e.job or "?")
        elif e.op == "claim" and isinstance(e.value, dict):
            claim = Claim(e.value["job_id"], e.value["token"], e.worker)
            label = f"{e.worker}#{claim.token}"
            grants[(e.worker, claim.token)] = judge.grant(claim, label, int(e.at), "k", e.seq)
        elif e.op in ("heartbeat", "complete", "fail"):
            getattr(judge, e.op)(grants[(e.worker, e.token)], e.value is True, int(e.at))
    return judge


def _svg(
    history: History,
    violation: str | None = None,
    prop: str | None = None,
    judge: Judge | None = None,
) -> ET.Element:
    judge = judge or _judged(history)
    return ET.fromstring(render_svg(history, judge, violation, prop, SECOND).encode())


def _classed(root: ET.Element, *classes: str) -> list[ET.Element]:
    return [e for e in root.iter() if set(classes) <= set((e.get("class") or "").split())]


def _fixture(path: Path) -> tuple[History, Judge, str | None, str | None, dict[str, Any]]:
    history, judge, violation, prop = load(path)
    return history, judge, violation, prop, json.loads(path.read_text())


def _claims(raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(worker, job label, token) of every answered claim, read straight from the JSON."""
    labels = {
        str(e["value"]): e["job"]
        for e in raw["history"]
        if e["op"] == "enqueue" and e["kind"] == "ok"
    }
    return [
        (e["worker"], labels[str(e["value"]["job_id"])], e["value"]["token"])
        for e in raw["history"]
        if e["op"] == "claim" and e["kind"] == "ok" and isinstance(e["value"], dict)
    ]


def test_fixtures_are_there() -> None:
    """The real histories the other tests read are present (a missing one is not a pass)."""
    assert len(FIXTURES) >= 3


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_one_lane_per_worker(path: Path) -> None:
    """Every worker in the history gets one labelled lane; producer and clock get none."""
    history, judge, violation, prop, raw = _fixture(path)
    workers = {e["worker"] for e in raw["history"]} - {"producer", "clock"}
    lanes = [e.text or "" for e in _classed(_svg(history, violation, prop, judge), "lane")]
    assert sorted(lanes) == sorted(workers)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_one_bar_per_claim_with_its_job(path: Path) -> None:
    """Each answered claim is one lease bar, in its worker's lane, labelled with its job."""
    history, judge, violation, prop, raw = _fixture(path)
    root = _svg(history, violation, prop, judge)
    bars = [
        (b.get("data-worker"), b.get("data-job"), b.get("data-token"))
        for b in _classed(root, "lease")
    ]
    assert sorted(bars) == sorted(_claims(raw))
    labels = sorted(e.text or "" for e in _classed(root, "job-label"))
    assert labels == sorted(f"{job}#{token}" for _, job, token in _claims(raw))
    # readable where `paint-order` is ignored: the white halo is a copy drawn before the ink
    assert "paint-order" not in ET.tostring(root, encoding="unicode")
    order = [e for e in root.iter() if e.get("class") in ("job-halo", "job-label")]
    pairs = list(zip(order[::2], order[1::2], strict=True))
    assert pairs and all(
        h.get("class") == "job-halo" and lab.get("class") == "job-label" for h, lab in pairs
    )
    assert all(
        (h.text, h.get("x"), h.get("y")) == (lab.text, lab.get("x"), lab.get("y"))
        and lab.get("stroke") is None
        for h, lab in pairs
    )


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_completions_are_counted_by_outcome(path: Path) -> None:
    """Accepted and rejected completions are drawn as many times as the history has them."""
    history, judge, violation, prop, raw = _fixture(path)
    root = _svg(history, violation, prop, judge)
    done = [e for e in raw["history"] if e["op"] == "complete" and e["kind"] == "ok"]
    assert len(_classed(root, "complete", "accepted")) == sum(e["value"] is True for e in done)
    assert len(_classed(root, "complete", "rejected")) == sum(e["value"] is False for e in done)


def test_naive_race_shows_two_accepted_completions_on_the_named_bars() -> None:
    """The naive mutant's double completion: two bars of job1, both completions accepted."""
    history, judge, violation, prop, _ = _fixture(DATA / "naive-single-completion.json")
    root = _svg(history, violation, prop, judge)
    hot = {
        (b.get("data-worker"), b.get("data-job"), b.get("data-token"))
        for b in _classed(root, "lease")
        if b.get("data-hot")
    }
    assert hot == {("w0", "job1", "1"), ("w1", "job1", "2")}
    assert len(_classed(root, "complete", "accepted")) == 2
    assert len(_classed(root, "offending")) == 2


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_violation_caption_names_the_property(path: Path) -> None:
    """The caption box carries the property id and every line of the violation text."""
    history, judge, violation, prop, _ = _fixture(path)
    assert violation and prop
    root = _svg(history, violation, prop, judge)
    [box] = _classed(root, "violation")
    assert box.get("data-property") == prop
    [title] = _classed(root, "violation-title")
    assert prop in (title.text or "")
    shown = " ".join((e.text or "").strip() for e in _classed(root, "violation-text"))
    for line in violation.splitlines():
        for word in line.split():
            assert word in shown


def test_no_caption_without_a_violation() -> None:
    """A history drawn without a violation has no caption and no highlighted bar."""
    history, judge, _, _, _ = _fixture(DATA / "naive-single-completion.json")
    root = _svg(history, judge=judge)
    assert _classed(root, "violation") == []
    assert not any(b.get("data-hot") for b in _classed(root, "lease"))


def _claimed(h: History, worker: str, at: int, job: str = "job1", token: str = "1") -> None:
    h.add(at, worker, "claim", "invoke")
    h.add(at, worker, "claim", "ok", value={"job_id": 7, "token": token, "worker": worker})


def _story() -> History:
    h = History()
    h.add(0, "producer", "enqueue", "invoke", job="job1")
    h.add(0, "producer", "enqueue", "ok", job="job1", value=7)
    _claimed(h, "w0", 0)
    return h


def test_accepted_heartbeat_extends_the_lease_and_a_refused_one_does_not() -> None:
    """A heartbeat accepted at t moves the lease end to t + lease; a refused one leaves it."""
    h = _story()
    h.add(20 * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
    h.add(20 * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=True)
    h.add(40 * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
    h.add(40 * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=False)
    [bar] = _classed(_svg(h), "lease")
    assert bar.get("data-lease-end") == str(50 * SECOND)
    assert len(_classed(_svg(h), "heartbeat", "accepted")) == 1
    assert len(_classed(_svg(h), "heartbeat", "rejected")) == 1


def test_a_lapse_revived_by_a_heartbeat_is_drawn_as_lapsed() -> None:
    """A heartbeat accepted after the lease ran out leaves the lapse visible, once."""
    h = _story()
    h.add(45 * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
    h.add(45 * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=True)
    h.add(50 * SECOND, "w0", "complete", "invoke", job="job1", token="1")
    h.add(50 * SECOND, "w0", "complete", "ok", job="job1", token="1", value=True)
    root = _svg(h)
    [bar] = _classed(root, "lease")
    assert bar.get("data-lease-end") == str(75 * SECOND)
    assert len(_classed(root, "lapsed")) == 1


def test_the_bar_is_the_judges_lease_not_every_accepted_heartbeat() -> None:
    """A stale claim's heartbeat the queue accepted (a fencing violation) extends no
    lease: the judge's lease for w0 still ends at 30 s, and the picture says so."""
    h = _story()
    _claimed(h, "w1", 31 * SECOND, token="2")
    h.add(40 * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
    h.add(40 * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=True)
    judge = _judged(h)
    assert [v.prop for v in judge.oracle.ledger.violations] == ["fencing"]
    ends = {b.get("data-worker"): b.get("data-lease-end") for b in _classed(_svg(h), "lease")}
    assert ends == {"w0": str(30 * SECOND), "w1": str(61 * SECOND)}


def test_crash_ends_the_bar() -> None:
    """A crashed worker's claim ends at the crash."""
    h = _story()
    h.add(5 * SECOND, "w0", "crash", "event", note="crashed; w0.2 starts")
    [bar] = _classed(_svg(h), "lease")
    assert bar.get("data-ended") == "crash"


def test_rolled_back_claim_ends_at_the_rollback() -> None:
    """A claim made inside a transaction that rolls back is dropped there."""
    h = History()
    h.add(0, "producer", "enqueue", "ok", job="job1", value=7)
    h.add(0, "w0", "begin", "event")
    _claimed(h, "w0", 0)
    h.add(SECOND, "w0", "rollback", "event", note="rolled back by the worker")
    [bar] = _classed(_svg(h), "lease")
    assert bar.get("data-ended") == "rolled back"


def test_hostile_text_stays_valid_xml() -> None:
    """Notes, names and violation text with <&>"' are escaped, and read back intact."""
    hostile = "<script>&\"'</script>"
    h = History()
    h.add(0, "producer", "enqueue", "ok", job="job<1>", value=7)
    h.add(0, "w<0>&", "claim", "ok", value={"job_id": 7, "token": "'1'&", "worker": "w"})
    h.add(0, "w<0>&", "pause", "event", note=hostile)
    h.add(SECOND, "w<0>&", "cut", "event", note=hostile)
    h.add(SECOND, "clock", "advance", "event", value=hostile)
    root = _svg(h, f"[fencing] {hostile} w<0>&:job<1>#'1'&", "fencing")
    text = " ".join(" ".join(e.itertext()) for e in root.iter())
    assert hostile in text
    assert [e.text for e in _classed(root, "lane")] == ["w<0>&"]
    [bar] = _classed(root, "lease")
    assert (bar.get("data-job"), bar.get("data-token")) == ("job<1>", "'1'&")


def test_cli_writes_an_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m stateful.story.svg HISTORY.json -o OUT` writes a parseable picture."""
    out = tmp_path / "out.svg"
    assert main([str(DATA / "no-row-lock-exclusive-lease.json"), "-o", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert root.tag == f"{NS}svg"
    assert _classed(root, "violation")[0].get("data-property") == "exclusive-lease"


def test_cli_rejects_a_file_that_is_not_a_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON file without a history list is refused with one line saying what is wrong."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"property": "fencing"}))
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "'history' list" in err and len(err.splitlines()) == 1


def _extent(e: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a text, by the module's width estimate per 9.5 px."""
    x, y, size = float(e.get("x") or 0), float(e.get("y") or 0), float(e.get("font-size") or 9.5)
    width = len(e.text or "") * _CHAR * size / 9.5
    return x, y - size, x + width, y + 0.25 * size  # DejaVu Sans: ascent ~1 em, descent ~¼ em


def test_every_text_fits_in_the_picture() -> None:
    """A long violation in a long history: no text runs past the picture's width or viewBox."""
    h = _story()
    for t in range(10, 110, 10):
        h.add(t * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
        h.add(t * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=True)
    h.add(110 * SECOND, "w0", "complete", "invoke", job="job1", token="1")
    h.add(110 * SECOND, "w0", "complete", "ok", job="job1", token="1", value=True)
    _claimed(h, "w1", 150 * SECOND, token="4")
    h.add(180 * SECOND, "w1", "complete", "invoke", job="job1", token="4")
    h.add(180 * SECOND, "w1", "complete", "ok", job="job1", token="4", value=False)
    said = "the completion of w1:job1#4, which owns job1, was refused at t=180s"
    violation = f"[owner-progress] {said}; " * 6 + "w1:job1#4/" * 40
    root = _svg(h, violation, "owner-progress")
    width = float(root.get("width") or 0)
    assert (root.get("viewBox") or "").split()[2] == root.get("width")
    texts = list(root.iter(f"{NS}text"))
    assert len(texts) > 10
    over = [(e.text, right) for e in texts if (right := _extent(e)[2]) > width]
    assert over == []


def test_producer_and_clock_labels_do_not_overlap() -> None:
    """The strip's two lane names get boxes of their own, one above the other."""
    h = _story()
    h.add(SECOND, "clock", "advance", "event", value="1s")
    root = _svg(h)
    [producer] = [e for e in root.iter(f"{NS}text") if e.text == "producer"]
    [clock] = [e for e in root.iter(f"{NS}text") if e.text == "clock"]
    a, b = _extent(producer), _extent(clock)
    apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    assert apart, (a, b)


# ---------------------------------------------------------------- claims of any type


@dataclass(frozen=True)
class _MyClaim:
    """A user's own claim type: the contract takes any object with these attributes."""

    job_id: int
    token: int
    worker: str


def _claim_file(
    tmp_path: Path, raw: object, saved: str, *, committed: bool = True, extra: Any = None
) -> Path:
    """A failure file in which w0 claims job1 (id 7) as `raw` and completes it; the claim
    answer saved as `saved` says: "dict" (the form every claim type is saved in) or
    "repr" (what files saved for a user's claim type before that)."""
    claim = as_claim(raw)
    token = repr(claim.token)  # how every line of the history names a token
    h = History()
    judge = Judge(Rules(lease=LEASE, max_attempts=None, ordered_tokens=False))
    h.add(0, "producer", "enqueue", "invoke", job="job1")
    h.add(0, "producer", "enqueue", "ok", job="job1", value=7)
    judge.enqueued(7, "job1")
    h.add(1, "w0", "claim", "invoke")
    value = {"job_id": 7, "token": token, "worker": "w0"} if saved == "dict" else repr(raw)
    answer = h.add(1, "w0", "claim", "ok", value=value)
    if committed:
        grant = judge.grant(claim, f"w0:job1#{token}", 1, "job-7", answer.seq)
    h.add(SECOND, "w0", "complete", "invoke", job="job1", token=token)
    h.add(SECOND, "w0", "complete", "ok", job="job1", token=token, value=True)
    if committed:
        judge.complete(grant, True, SECOND)
    path = tmp_path / "failure.json"
    h.write(
        path,
        {"property": "fencing", "violation": "[fencing] made up", **(extra or {})}
        | {"judge": judge.to_json()},
    )
    return path


def _drawn(path: Path, tmp_path: Path) -> ET.Element:
    """Draw a failure file as `leasecheck svg` does, and read the picture back."""
    out = tmp_path / "out.svg"
    assert main([str(path), "-o", str(out)]) == 0
    return ET.parse(out).getroot()


CLAIM_TYPES = {
    "dataclass": (_MyClaim(7, 1, "w0"), "1"),
    "tuple": ((7, "tok-a", "w0"), "'tok-a'"),
    "Claim": (Claim(7, 3, "w0"), "3"),
}


@pytest.mark.parametrize("saved", ["dict", "repr"])
@pytest.mark.parametrize("kind", list(CLAIM_TYPES))
def test_any_claim_type_is_drawn_as_a_bar_of_its_job(tmp_path: Path, kind: str, saved: str) -> None:
    """A user's dataclass, a tuple and leasecheck.Claim each draw one bar of job1, labelled
    `job1#token`, with the completion on it: from the saved answer, or, where an older
    file saved the claim as its repr, from the judge's grant fact."""
    raw, token = CLAIM_TYPES[kind]
    root = _drawn(_claim_file(tmp_path, raw, saved), tmp_path)
    [bar] = _classed(root, "lease")
    assert (bar.get("data-worker"), bar.get("data-job"), bar.get("data-token")) == (
        "w0",
        "job1",
        token,
    )
    assert bar.get("data-ended") == "complete"
    assert [e.text for e in _classed(root, "job-label")] == [f"job1#{token}"]
    assert len(_classed(root, "complete", "accepted")) == 1
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert not any(t in ("none", "nothing") for t in texts)  # no claim read as empty


def test_a_repr_claim_nobody_committed_is_marked_not_guessed(tmp_path: Path) -> None:
    """A claim saved as its repr with no grant fact (never committed) names no job a file
    says: the picture marks the answer and draws no bar of a guessed job."""
    root = _drawn(_claim_file(tmp_path, (7, 1, "w0"), "repr", committed=False), tmp_path)
    assert _classed(root, "lease") == []
    titles = [t.text or "" for t in root.iter(f"{NS}title")]
    assert any(t.startswith("claim answered (7, 1, 'w0')") for t in titles)


OLDER = DATA / "older" / "graphile-worker-0.18.0-fencing.json"
"""A failure file of the release matrix (graphile-worker 0.18.0, fencing), saved when a
claim of the adapter's own type was written down as its repr."""


def test_an_older_file_with_repr_claims_draws_every_granted_claim() -> None:
    """Each grant fact of the older file is a bar in the lane of the worker whose claim it
    answered, with its job and token; the two named in the violation are marked."""
    history, judge, violation, prop, raw = _fixture(OLDER)
    assert all(
        isinstance(e["value"], str)
        for e in raw["history"]
        if e["op"] == "claim" and e["kind"] == "ok" and e["value"] is not None
    )
    worker_of = {e["seq"]: e["worker"] for e in raw["history"]}
    labels = {
        f["args"]["job_id"]: f["args"]["label"]
        for f in raw["judge"]["facts"]
        if f["op"] == "enqueued"
    }
    granted = sorted(
        (worker_of[f["args"]["event"]], labels[f["args"]["job_id"]], str(f["args"]["token"]))
        for f in raw["judge"]["facts"]
        if f["op"] == "grant"
    )
    root = _svg(history, violation, prop, judge)
    bars = _classed(root, "lease")
    drawn = sorted((b.get("data-worker"), b.get("data-job"), b.get("data-token")) for b in bars)
    assert drawn == granted
    assert len(granted) >= 3
    hot = {b.get("data-ref") for b in bars if b.get("data-hot")}
    assert hot == {"w1:job2#1", "w0:job2#2"}


# ---------------------------------------------------------------- the violation's references


def _race() -> History:
    """job1 granted to w0 (token 1), then to w1 (token 2); both complete."""
    h = _story()
    _claimed(h, "w1", 31 * SECOND, token="2")
    for worker, token in (("w0", "1"), ("w1", "2")):
        h.add(40 * SECOND, worker, "complete", "invoke", job="job1", token=token)
        h.add(40 * SECOND, worker, "complete", "ok", job="job1", token=token, value=True)
    return h


def _hot(root: ET.Element) -> set[str | None]:
    return {b.get("data-ref") for b in _classed(root, "lease") if b.get("data-hot")}


def _refs_file(tmp_path: Path, refs: object) -> Path:
    h = _race()
    path = tmp_path / "race.json"
    said = "[single-completion] job1 completed 2 times: w0:job1#1 and w1:job1#2"
    facts = {"property": "single-completion", "violation": said, "judge": _judged(h).to_json()}
    h.write(path, {**facts, "violation_refs": refs})
    return path


def test_the_bars_marked_are_the_ones_violation_refs_name(tmp_path: Path) -> None:
    """With `violation_refs`, the marked bars are the grants it lists, whatever the
    violation's words say (they name both claims here; the refs name one)."""
    root = _drawn(_refs_file(tmp_path, {"grants": ["w1#2"], "jobs": []}), tmp_path)
    assert _hot(root) == {"w1#2"}


def test_a_job_violation_refs_name_marks_all_its_bars(tmp_path: Path) -> None:
    """A job named without any of its claims: every bar of that job is marked."""
    root = _drawn(_refs_file(tmp_path, {"jobs": ["job1"]}), tmp_path)
    assert _hot(root) == {"w0#1", "w1#2"}


def test_without_violation_refs_the_words_are_read(tmp_path: Path) -> None:
    """An older file (no `violation_refs`): the `worker:job#token` names in its text."""
    h = _race()
    said = "[fencing] the completion of stale w0:job1#1 was accepted"
    assert _hot(_svg(h, said, "fencing")) == {"w0#1"}


def test_malformed_violation_refs_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`violation_refs` of another shape is an error that says so, not a silent guess."""
    path = _refs_file(tmp_path, {"grants": "w0#1"})
    assert main([str(path), "-o", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err.strip()
    assert "violation_refs" in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------- heartbeats that answer nothing


def _beating(value: object) -> History:
    h = _story()
    for t in (10, 20, 40):
        h.add(t * SECOND, "w0", "heartbeat", "invoke", job="job1", token="1")
        h.add(t * SECOND, "w0", "heartbeat", "ok", job="job1", token="1", value=value)
    return h


def test_a_fire_and_forget_heartbeat_is_drawn_as_sent(tmp_path: Path) -> None:
    """A queue declaring `heartbeat_answers = False`: the machine sends the beats and the
    judge is told nothing, so each is drawn as sent, neither accepted nor refused, and
    the lease the judge saw is the claim's own."""
    h = _beating(None)
    judge = Judge(Rules(lease=LEASE, max_attempts=None, ordered_tokens=False))
    judge.enqueued(7, "job1")
    claimed = next(e for e in h.events if e.op == "claim" and e.kind == "ok")
    judge.grant(Claim(7, "1", "w0"), "w0:job1#1", 0, "k", claimed.seq)  # no heartbeat fact
    path = tmp_path / "beats.json"
    h.write(path, {"judge": judge.to_json()})
    root = _drawn(path, tmp_path)
    assert len(_classed(root, "heartbeat", "sent")) == 3
    assert _classed(root, "heartbeat", "rejected") == []
    assert _classed(root, "heartbeat", "accepted") == []
    [bar] = _classed(root, "lease")
    assert bar.get("data-lease-end") == str(LEASE)
    legend = " ".join(t.text or "" for t in root.iter(f"{NS}text"))
    assert "heartbeat sent (answers nothing)" in legend
    # said outright, the same; and a heartbeat that answers is never drawn as sent
    assert len(_classed(_svg(h, judge=judge), "heartbeat", "sent")) == 3
    answering = ET.fromstring(render_svg(h, judge, None, None, SECOND, heartbeat_answers=True))
    assert len(_classed(answering, "heartbeat", "rejected")) == 3


def test_a_heartbeat_that_answers_none_to_the_judge_is_a_refusal() -> None:
    """A queue whose heartbeat answers (the default) but returns None was judged refused:
    the judge's heartbeat facts say it answers, so the picture draws refusals."""
    h = _beating(False)
    judge = _judged(h)
    plain = _beating(None)
    root = _svg(plain, judge=judge)
    assert len(_classed(root, "heartbeat", "rejected")) == 3
    assert _classed(root, "heartbeat", "sent") == []


# ---------------------------------------------------------------- idle stretches


def test_an_idle_stretch_is_cut_short_and_its_length_said() -> None:
    """Ten minutes with no event (a drain waiting) is drawn as a narrow break labelled
    with its length, not 350 px of nothing; the lease that ends in it stays to scale."""
    h = _story()  # w0 holds job1 from 0 s, its lease to 30 s
    _claimed(h, "w1", 40 * SECOND, token="2")
    h.add(41 * SECOND, "w1", "complete", "invoke", job="job1", token="2")
    h.add(41 * SECOND, "w1", "complete", "ok", job="job1", token="2", value=True)
    h.add(41 * SECOND, "clock", "advance", "event", value="641s")
    h.add(641 * SECOND, "w0", "complete", "invoke", job="job1", token="1")
    h.add(641 * SECOND, "w0", "complete", "ok", job="job1", token="1", value=False)
    root = _svg(h)
    [cut] = _classed(root, "axis-cut")
    assert (cut.get("data-from"), cut.get("data-to")) == (str(41 * SECOND), str(641 * SECOND))
    assert [e.text for e in _classed(root, "cut-label")] == ["+10m"]
    done = [float(c.get("cx") or 0) for c in _classed(root, "complete")]
    assert done[1] - done[0] < 100  # a 10-minute log-scale gap would be about 350 px
    bars = {b.get("data-worker"): b for b in _classed(root, "lease")}
    lease_x = float(bars["w0"].get("x") or 0) + float(bars["w0"].get("width") or 0)
    assert lease_x < done[0]  # w0's lease (to 30 s) ends before the stretch, to scale


def test_a_lease_ending_in_a_long_stretch_keeps_its_place() -> None:
    """A claim still held through a long stretch: the stretch is cut only after its lease
    ends, so the hatched part past the lease starts where the lease ran out."""
    h = _story()
    h.add(SECOND, "clock", "advance", "event", value="601s")
    h.add(601 * SECOND, "w0", "complete", "invoke", job="job1", token="1")
    h.add(601 * SECOND, "w0", "complete", "ok", job="job1", token="1", value=True)
    root = _svg(h)
    [cut] = _classed(root, "axis-cut")
    assert cut.get("data-from") == str(LEASE)
    [lapsed] = _classed(root, "lapsed")
    assert float(lapsed.get("x") or 0) <= float(cut.get("x") or 0)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_race_within_a_lease_is_never_cut(path: Path) -> None:
    """The mutants' stories (stalls just past a lease) keep their whole axis."""
    history, judge, violation, prop, _ = _fixture(path)
    assert _classed(_svg(history, violation, prop, judge), "axis-cut") == []


# ---------------------------------------------------------------- the text timeline


def test_the_timeline_names_a_claim_by_its_job_and_token() -> None:
    """The text timeline says `claim -> job1#1`, and a claim an older file saved as its
    repr is cut to the column instead of stretching it."""
    h = _story()
    h.add(SECOND, "w1", "claim", "invoke")
    h.add(SECOND, "w1", "claim", "ok", value=repr(_MyClaim(7, 2, "w1")))
    text = timeline.render(h, SECOND)
    assert "claim -> job1#1" in text
    [line] = [ln for ln in text.splitlines() if "_MyClaim" in ln]
    cell = line.split("|")[3]
    assert len(cell.strip()) <= 30 and cell.strip().endswith("…")


@pytest.mark.parametrize(
    ("token", "shown"),
    [
        (repr(datetime(2000, 1, 1, 0, 0, 30, tzinfo=UTC)), "job1#00:00:30"),
        (repr(datetime(2000, 1, 1, 0, 1, 2, 5)), "job1#00:01:02.000005"),
        (repr(UUID("0190a3b2-1234-7abc-8def-0123456789ab")), "job1#…456789ab"),
        (repr(Decimal("3")), "job1#3"),
        (2, "job1#2"),
        ("a" * 40, "job1#aaaaaaaaaaa…"),
    ],
)
def test_a_token_is_shown_short_and_readable(token: object, shown: str) -> None:
    """A column names a claim by its token: a timestamp's repr cut to 12 characters read
    `datetime.da…` for every claim, so it is shown by its time of day."""
    assert short_label("job1", token) == shown
