"""scheduler.decisions.epochs: the epoch's composition and the membership generation decision."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.errors import InvalidInput
from scheduler.decisions.epochs import (
    CVERSION_MASK,
    GENERATION_LIMIT,
    Incarnation,
    compose_epoch,
    generation_for,
    split_epoch,
)

generations = st.integers(min_value=0, max_value=GENERATION_LIMIT - 1)
cversions = st.integers(min_value=0, max_value=CVERSION_MASK)
incarnations = st.builds(
    Incarnation,
    czxid=st.integers(min_value=0, max_value=2**63 - 1),
    ctime=st.integers(min_value=0, max_value=2**45),
)
#: recorded incarnations with distinct generations, as the store's keys make them
recorded_maps = st.lists(incarnations, unique=True, max_size=6).flatmap(
    lambda incs: st.lists(generations, min_size=len(incs), max_size=len(incs), unique=True).map(
        lambda gens: dict(zip(incs, gens, strict=True))
    )
)
epochs = st.builds(compose_epoch, generations, cversions)


@given(generations, cversions)
def test_compose_and_split_are_inverse(generation: int, cversion: int) -> None:
    epoch = compose_epoch(generation, cversion)
    assert split_epoch(epoch) == (generation, cversion)
    assert 0 <= epoch < 2**53  # exact in JSON numbers read by JavaScript


@given(generations, cversions, generations, cversions)
def test_epochs_order_by_generation_then_cversion(g1: int, c1: int, g2: int, c2: int) -> None:
    assert (compose_epoch(g1, c1) < compose_epoch(g2, c2)) == ((g1, c1) < (g2, c2))


def test_a_wiped_zookeeper_still_gives_a_higher_epoch() -> None:
    before = compose_epoch(0, 4_000_000)  # a long-lived group: many joins and leaves
    after = compose_epoch(1, 1)  # the recreated members znode's first join
    assert after > before
    assert compose_epoch(0, 7) == 7  # generation 0: the bare child version, as before


@pytest.mark.parametrize(
    ("generation", "cversion"),
    [(-1, 0), (GENERATION_LIMIT, 0), (0, -1), (0, CVERSION_MASK + 1)],
)
def test_out_of_range_parts_are_refused(generation: int, cversion: int) -> None:
    with pytest.raises(InvalidInput):
        compose_epoch(generation, cversion)


def test_a_negative_epoch_is_refused() -> None:
    with pytest.raises(InvalidInput):
        split_epoch(-1)


@given(recorded_maps, cversions, st.none() | epochs, st.data())
def test_a_recorded_incarnation_keeps_its_generation(
    recorded: dict[Incarnation, int], cversion: int, highest: int | None, data: st.DataObject
) -> None:
    """Every node, at any time, reads the same generation for one incarnation; nothing is
    written, however old the incarnation (a node with a stale view gets its old, lower one)."""
    if not recorded:
        return
    incarnation = data.draw(st.sampled_from(sorted(recorded, key=lambda i: recorded[i])))
    choice = generation_for(incarnation, recorded, cversion=cversion, highest_epoch=highest)
    assert (choice.generation, choice.record) == (recorded[incarnation], False)


@given(recorded_maps, incarnations, cversions, st.none() | epochs)
def test_a_new_incarnation_outranks_everything_recorded_and_stored(
    recorded: dict[Incarnation, int],
    new: Incarnation,
    cversion: int,
    highest: int | None,
) -> None:
    if new in recorded or len(recorded) == 0:
        return
    try:
        choice = generation_for(new, recorded, cversion=cversion, highest_epoch=highest)
    except InvalidInput:  # the generations ran out: 2**21 recreations of one znode
        assert max(recorded.values()) + 1 >= GENERATION_LIMIT or (
            highest is not None and split_epoch(highest)[0] + 1 >= GENERATION_LIMIT
        )
        return
    assert choice.record
    assert choice.generation > max(recorded.values())
    epoch = compose_epoch(choice.generation, cversion)
    # above every epoch of every recorded incarnation, whatever its child version
    assert all(epoch > compose_epoch(g, CVERSION_MASK) for g in recorded.values())
    if highest is not None:
        assert epoch > highest  # the jobs claimed under older incarnations can be claimed again


@given(cversions)
def test_the_first_incarnation_of_a_new_group_is_generation_zero(cversion: int) -> None:
    choice = generation_for(Incarnation(5, 6), {}, cversion=cversion, highest_epoch=None)
    assert (choice.generation, choice.record) == (0, True)


@given(incarnations, cversions, epochs)
def test_a_first_record_keeps_stored_epochs_claimable_with_the_smallest_generation(
    incarnation: Incarnation, cversion: int, highest: int
) -> None:
    """The first start of this version: epochs stay what they were when ZooKeeper kept its data
    (the stored epochs are at most the current child version), and rise past the stored ones
    when it did not."""
    try:
        choice = generation_for(incarnation, {}, cversion=cversion, highest_epoch=highest)
    except InvalidInput:
        assert split_epoch(highest)[0] + 1 >= GENERATION_LIMIT
        return
    epoch = compose_epoch(choice.generation, cversion)
    assert choice.record and epoch >= highest
    if choice.generation > 0:
        assert compose_epoch(choice.generation - 1, cversion) < highest  # the smallest


def test_an_upgrade_with_zookeeper_intact_keeps_todays_epochs() -> None:
    choice = generation_for(Incarnation(1, 2), {}, cversion=12, highest_epoch=9)
    assert choice.generation == 0 and compose_epoch(choice.generation, 12) == 12


def test_an_upgrade_after_an_earlier_wipe_rises_above_the_stored_epochs() -> None:
    choice = generation_for(Incarnation(1, 2), {}, cversion=3, highest_epoch=40)
    assert choice.generation == 1 and compose_epoch(1, 3) > 40


@given(st.lists(incarnations, unique=True, min_size=1, max_size=8), cversions)
def test_successive_incarnations_get_increasing_generations(
    sequence: list[Incarnation], cversion: int
) -> None:
    """One znode recreated again and again (each recorded in turn): generations only grow."""
    recorded: dict[Incarnation, int] = {}
    for incarnation in sequence:
        choice = generation_for(incarnation, recorded, cversion=cversion, highest_epoch=None)
        assert choice.record
        assert all(choice.generation > g for g in recorded.values())
        recorded[incarnation] = choice.generation
    assert sorted(recorded.values()) == list(range(len(sequence)))
