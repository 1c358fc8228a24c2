"""The split over plain rows: groups kept whole, both splits non-empty, binary answers balanced."""

from __future__ import annotations

from array import array
from collections import Counter

from benchmark.splits import UnionFind, answer_place, balance_answers, choose_val_groups, id_hash, orientation_is_fixed


def test_union_find_joins_the_items_that_share_a_node():
    uf = UnionFind()
    uf.union(1, 2)
    uf.union(3, 2)
    uf.union(5, 6)
    assert uf.find(3) == uf.find(1) != uf.find(5)


def groups(count: int, size: int = 1) -> tuple[dict, dict]:
    return (
        {g: Counter({("temporal", "natural"): size}) for g in range(count)},
        {g: id_hash(f"group {g}") for g in range(count)},
    )


def test_about_the_fraction_of_the_items_go_to_val_and_never_every_group():
    sizes, identity = groups(40)
    assert len(choose_val_groups(sizes, identity, fraction=0.1, seed=0)) == 4
    sizes, identity = groups(2, size=10)
    assert len(choose_val_groups(sizes, identity, fraction=0.9, seed=0)) == 1  # test keeps one
    assert len(choose_val_groups(sizes, identity, fraction=0.01, seed=0)) == 1  # val gets one
    assert choose_val_groups(sizes, identity, fraction=0, seed=0) == set()


def test_the_val_groups_follow_the_seed_and_the_groups_identity_not_their_keys():
    sizes, identity = groups(30)
    chosen = {identity[g] for g in choose_val_groups(sizes, identity, fraction=0.2, seed=3)}
    renamed = {g + 100: members for g, members in sizes.items()}, {g + 100: h for g, h in identity.items()}
    assert {renamed[1][g] for g in choose_val_groups(*renamed, fraction=0.2, seed=3)} == chosen
    assert {identity[g] for g in choose_val_groups(sizes, identity, fraction=0.2, seed=4)} != chosen


def test_binary_answers_are_balanced_to_half_first_in_each_split_and_category():
    count = 10
    swapped = balance_answers(
        array("q", range(count)),
        array("b", [0] * count),
        ["state"] * count,
        array("q", [id_hash(str(i)) for i in range(count)]),
        array("b", [1] * count),  # every answer is "first image"
        seed=0,
    )
    assert len(swapped) == 5 and list(swapped) == sorted(swapped)


def test_items_that_must_keep_their_orientation_count_as_they_are():
    places = array("b", [-1, -1, -1, 1, 1, 0])  # three fixed "first", two free "first", one non-binary
    swapped = balance_answers(
        array("q", range(6)),
        array("b", [0] * 6),
        ["state"] * 5 + ["action"],
        array("q", [id_hash(str(i)) for i in range(6)]),
        places,
        seed=0,
    )
    assert list(swapped) == [3, 4]  # 5 binary items: at most 3 "first", the fixed three


def test_the_place_of_a_binary_answer_and_what_fixes_an_orientation():
    assert answer_place({"category": "state", "answer": "First image", "distractors": ["second image"]}) == 1
    assert answer_place({"category": "state", "answer": "second image", "distractors": ["first image"]}) == 2
    assert answer_place({"category": "action", "answer": "first image", "distractors": ["second image"]}) == 0
    assert orientation_is_fixed(question="Is the second one darker?", caption=None)
    assert orientation_is_fixed(question="Which is darker?", caption="The lamp is off.")
    assert not orientation_is_fixed(question="Which is darker?", caption="  ")
