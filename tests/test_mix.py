"""The machine draws a tier, then a family, then a move: the owner's calls get their share."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from leasecheck.stateful.machine import LeaseMachine
from leasecheck.stateful.mix import FAMILY, TIERS, MoveMix, install

SETTINGS = settings(
    max_examples=150,
    stateful_step_count=10,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _drawn(machine: type[RuleBasedStateMachine]) -> Counter[str]:
    """Run `machine` with the mix; count the moves made."""
    made: Counter[str] = Counter()
    machine.made = made  # type: ignore[attr-defined]
    run_state_machine_as_test(machine, settings=SETTINGS)
    return made


class _TieredOnly(MoveMix):
    """The mix with every example tiered (the real one draws that per example)."""

    def __init__(self, machine: RuleBasedStateMachine) -> None:
        super().__init__(machine)
        self.tiered = True


class _Faults(RuleBasedStateMachine):
    """Five fault moves, a clock and one owner's call, all always allowed."""

    mix: type[MoveMix] = _TieredOnly
    mixes: Counter[bool] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self._rules_strategy = self.mix(self)

    def teardown(self) -> None:
        _Faults.mixes[bool(getattr(self._rules_strategy, "tiered", False))] += 1

    def _made(self, name: str) -> None:
        self.made[name] += 1  # type: ignore[attr-defined]

    @rule()
    def pause(self) -> None:
        self._made("pause")

    @rule()
    def resume(self) -> None:
        self._made("resume")

    @rule()
    def asleep(self) -> None:
        self._made("asleep")

    @rule()
    def crash(self) -> None:
        self._made("crash")

    @rule()
    def cut(self) -> None:
        self._made("cut")

    @rule()
    def time_passes(self) -> None:
        self._made("time_passes")

    @rule()
    def heartbeat(self) -> None:
        self._made("heartbeat")


class _Plain(_Faults):
    """Hypothesis's own mix: uniform over the moves that may be made."""

    def __init__(self) -> None:
        RuleBasedStateMachine.__init__(self)


class _Swarm(_Faults):
    mix = MoveMix


def _share(made: Counter[str], *moves: str) -> float:
    return sum(made[m] for m in moves) / sum(made.values())


def test_an_owners_call_is_not_crowded_out_by_the_faults() -> None:
    plain, tiered = _drawn(_Plain), _drawn(_Faults)
    # Uniform over the seven moves gives the heartbeat about a seventh; tiered, it is
    # the calls tier's one move, so it gets up to half (less where the swarm of
    # feature flags disables it for an example).
    assert _share(tiered, "heartbeat") > 1.5 * _share(plain, "heartbeat"), (plain, tiered)
    # The five faults share one family: made far less often than uniform makes them.
    faults = TIERS["events"]["fault"]
    assert _share(tiered, *faults) < 0.75 * _share(plain, *faults), (plain, tiered)


def test_an_example_draws_which_mix_it_makes_its_moves_by() -> None:
    _Faults.mixes.clear()
    plain, swarm, tiered = _drawn(_Plain), _drawn(_Swarm), _drawn(_Faults)
    assert _Faults.mixes[False] > 30, _Faults.mixes  # from the swarm's run alone
    assert _share(plain, "heartbeat") < _share(swarm, "heartbeat") < _share(tiered, "heartbeat")


class _Gated(_Faults):
    """The owner's call may be made only after a fault."""

    faulted = False

    @rule()
    def pause(self) -> None:
        self.faulted = True
        self._made("pause")

    @precondition(lambda self: self.faulted)
    @rule()
    def heartbeat(self) -> None:
        self._made("heartbeat")


def test_a_move_whose_precondition_fails_is_never_drawn() -> None:
    made = _drawn(_Gated)
    assert made["heartbeat"] > 0
    assert made["pause"] > 0


def test_every_rule_of_the_machine_has_a_family() -> None:
    # Hypothesis lists a machine's rules by setup_state() since 6.1xx, by rules() before.
    setup = getattr(LeaseMachine, "setup_state", None)
    rules = setup().rules if setup else LeaseMachine.rules()  # type: ignore[attr-defined]
    names = {r.function.__name__ for r in rules}
    assert len(names) == 19
    assert names == set(FAMILY)


class _Stray(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._rules_strategy = MoveMix(self)

    @rule()
    def polish(self) -> None:
        pass


def test_a_rule_with_no_family_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"no family .*\['polish'\]"):
        _Stray()


def test_the_machine_installs_the_mix_over_hypothesis_own() -> None:
    machine = _Plain()
    assert not isinstance(machine._rules_strategy, MoveMix)
    install(machine)
    assert isinstance(machine._rules_strategy, MoveMix)
