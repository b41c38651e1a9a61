"""The SVG timeline, read back as XML: lanes, lease bars, completions and the violation.

The fixtures in tests/data are failure files the machine wrote for real mutants
(`tests/data/make_svg_fixtures.py`), drawn with the judge their saved facts give; the
small hand-built ones pin down one rule each, with a judge told their answers as the
machine tells it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from leasecheck.stateful.contract import Claim
from leasecheck.stateful.history import History
from leasecheck.stateful.judge import Judge, Rules
from leasecheck.stateful.model import Grant
from leasecheck.stateful.svg import _CHAR, load, main, render_svg

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
    lanes = [e.text for e in _classed(_svg(history, violation, prop, judge), "lane")]
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
    assert [v.prop for v in judge.oracle.violations] == ["fencing"]
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
    """`python -m stateful.svg HISTORY.json -o OUT` writes a parseable picture."""
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
