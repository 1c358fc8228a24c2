"""One apportionment rule: floors, then the largest remainders, equal remainders by a seeded hash."""

from __future__ import annotations

from benchmark.apportion import apportion, apportion_sizes, round_half_up, tie_order


def test_round_half_up_rounds_halves_up_not_to_even():
    assert [round_half_up(x) for x in (0.5, 1.5, 2.5, 2.49, 0.1 * 45)] == [1, 2, 3, 2, 5]


def test_the_places_left_after_the_floors_go_to_the_largest_remainders():
    assert apportion({"a": 2.8, "b": 1.2, "c": 1.0}, 5, seed=0) == {"a": 3, "b": 1, "c": 1}


def test_equal_remainders_go_in_the_order_of_the_seeds_hash_so_no_group_always_wins():
    winners = set()
    for seed in range(20):
        counts = apportion({"a": 0.5, "b": 0.5}, 1, seed=seed)
        winner = min("ab", key=lambda key: tie_order(seed, key))
        assert counts[winner] == 1 and sum(counts.values()) == 1
        winners.add(winner)
    assert winners == {"a", "b"}


def test_a_minimum_may_push_the_sum_over_the_total_and_a_cap_is_never_passed():
    assert apportion({"a": 0.4, "b": 0.4, "c": 0.4}, 1, seed=0, minimum=1) == {"a": 1, "b": 1, "c": 1}
    assert apportion_sizes({"a": 1, "b": 9, "c": 0}, 10, seed=0) == {"a": 1, "b": 9}


def test_sizes_are_apportioned_in_proportion():
    counts = apportion_sizes({"x": 25, "y": 3}, 3, seed=0)  # 2.68 and 0.32
    assert counts == {"x": 3, "y": 0}
