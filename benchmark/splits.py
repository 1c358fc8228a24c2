"""The split of a benchmark over plain rows: leak-free groups (no video or image in both splits), the choice of the
val groups stratified by category and domain, and the balance of the binary answers ("first image" about half the
time in each split and category). Deterministic from item ids and the seed, never from database ids."""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import Counter, defaultdict

from benchmark.apportion import apportion, apportion_sizes, exact, round_half_up
from benchmark.questions import option_key
from benchmark.taxonomy import BINARY_CATEGORIES, FIRST_IMAGE, SECOND_IMAGE

# A question that names an image by its place would be wrong once the two images trade places.
NAMES_A_PLACE = re.compile(r"\b(first|second|former|latter)\b", re.IGNORECASE)


class UnionFind:
    """The groups of items that must share a split: an item joins the nodes of its images, video and group."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, node: int) -> int:
        parent = self.parent.setdefault(node, node)
        root = node
        while parent != root:
            root, parent = parent, self.parent[parent]
        while node != root:  # path compression keeps later finds short
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def id_hash(identifier: str) -> int:
    """An 8-byte signed hash of an item id (or any text): what the split keeps per item instead of the id."""
    return int.from_bytes(hashlib.blake2b(identifier.encode(), digest_size=8).digest(), "big", signed=True)


def group_order_key(seed: int, identity: int) -> bytes:
    return hashlib.sha256(f"{seed}:{identity}".encode()).digest()


def answer_place(row: dict) -> int:
    """1 or 2 when the answer of a binary question names the first or the second image; 0 for any other."""
    if row["category"] not in BINARY_CATEGORIES or len(row["distractors"]) != 1:
        return 0
    options = (option_key(row["answer"]), option_key(row["distractors"][0]))
    return {(FIRST_IMAGE, SECOND_IMAGE): 1, (SECOND_IMAGE, FIRST_IMAGE): 2}.get(options, 0)


def orientation_is_fixed(*, question: str, caption: str | None) -> bool:
    """A caption describes the second image against the first, and a question may name an image by its place:
    trading the images of such an item would make it wrong, so it keeps its stored orientation."""
    return bool((caption or "").strip()) or bool(NAMES_A_PLACE.search(question))


def choose_val_groups(groups: dict[int, Counter], identity: dict[int, int], *, fraction: float, seed: int) -> set:
    """The groups that go to val: about `fraction` of the items, stratified by category and domain.

    `groups`: group -> items per (category, domain); `identity`: group -> a number fixed by its items (the
    smallest id hash). val gets round(fraction x items), halves up, shared among the categories by `apportion`
    (and within a category among its domains): a category too small for its own val item still counts towards the
    whole. The groups are walked in an order fixed by the seed and their identity; a group joins val when that
    brings the categories (then the cells) closer to their quotas. With two groups or more and a fraction above 0,
    each split gets at least one group: the official evaluator cannot run on an empty split.
    """
    if fraction <= 0 or not groups:
        return set()
    cells: Counter = Counter()
    for sizes in groups.values():
        cells.update(sizes)
    wanted = round_half_up(exact(fraction) * sum(cells.values()))
    if len(groups) >= 2:
        wanted = max(wanted, 1)
    per_category: Counter = Counter()
    for (category, _), size in cells.items():
        per_category[category] += size
    category_quota = apportion({c: exact(fraction) * n for c, n in per_category.items()}, wanted, seed=seed)
    cell_quota: dict = {}
    for category, quota in category_quota.items():
        sizes = {cell: size for cell, size in cells.items() if cell[0] == category}
        cell_quota.update(apportion_sizes(sizes, quota, seed=seed))

    in_category: Counter = Counter()
    in_cell: Counter = Counter()

    def change(sizes: Counter, sign: int = 1) -> tuple[int, int]:
        """How much adding (sign 1) or removing (-1) a group moves val away from its quotas: (categories, cells)."""
        by_category: Counter = Counter()
        cell_change = 0
        for cell, size in sizes.items():
            by_category[cell[0]] += size
            now = in_cell[cell]
            cell_change += abs(now + sign * size - cell_quota[cell]) - abs(now - cell_quota[cell])
        category_change = sum(
            abs(in_category[c] + sign * size - category_quota[c]) - abs(in_category[c] - category_quota[c])
            for c, size in by_category.items()
        )
        return category_change, cell_change

    def move(root: int, sign: int) -> None:
        for cell, size in groups[root].items():
            in_cell[cell] += sign * size
            in_category[cell[0]] += sign * size
        (chosen.add if sign > 0 else chosen.discard)(root)

    order = sorted(groups, key=lambda root: group_order_key(seed, identity[root]))
    chosen: set[int] = set()
    # First the groups that bring both their category and their cell closer, then those that help the category.
    for strict in (True, False):
        for root in order:
            if root not in chosen:
                category_change, cell_change = change(groups[root])
                if (category_change < 0 and cell_change < 0) if strict else (category_change, cell_change) < (0, 0):
                    move(root, 1)
    if len(groups) >= 2 and not chosen:  # every group overshoots its quota: the one that overshoots least
        move(min(order, key=lambda root: change(groups[root])), 1)
    if len(chosen) == len(groups):  # test (the evaluator's default split) keeps the group whose leaving costs least
        move(min((r for r in order if r in chosen), key=lambda root: change(groups[root], -1)), -1)
    return chosen


def balance_answers(included, in_val, categories, id_hashes, places, *, seed) -> array:
    """The sorted keys of the binary items whose two images are to be swapped, so that in each split and category
    about half the answers are "first image".

    Parallel sequences, one entry per item: its key, whether it is in val, its category, its id hash, and its place
    (`answer_place`; negative when its orientation is fixed, 0 for a non-binary item). Items that must keep their
    orientation count as they are; the others are ranked by a hash of the seed and their item id: the first ones of
    that ranking get the answer first, the last ones second, as many of each as the half needs. The decision reads
    item ids, not the stored orientation, so an export that is imported and exported again comes out with every
    item the same way round. One exception: of an odd count, the one item that may go either way stays as it is
    stored (that is just as balanced, and keeps an already balanced dataset as it was).
    """
    fixed_first: Counter = Counter()
    fixed: Counter = Counter()
    free: dict[tuple, list] = defaultdict(list)  # (split, category) -> [(rank, stored place, key)]
    for pk, val, category, hashed, place in zip(included, in_val, categories, id_hashes, places, strict=True):
        if not place:
            continue
        bucket = ("val" if val else "test", category)
        if place < 0:
            fixed[bucket] += 1
            fixed_first[bucket] += place == -1
        else:
            free[bucket].append((id_hash(f"{seed}:orientation:{hashed}"), place, pk))
    swapped = []
    for bucket, items in free.items():
        total = fixed[bucket] + len(items)
        # At least total // 2 answers first and at most total - total // 2, as far as the free items allow.
        first_at_least = min(max(total // 2 - fixed_first[bucket], 0), len(items))
        first_at_most = min(max(total - total // 2 - fixed_first[bucket], 0), len(items))
        for rank, (_, place, pk) in enumerate(sorted(items)):
            wanted = 1 if rank < first_at_least else 2 if rank >= first_at_most else place
            if place != wanted:
                swapped.append(pk)
    return array("q", sorted(swapped))


def swap_binary_answer(answer: str, distractors: list[str]) -> tuple[str, list[str]]:
    """The answer and distractors of a binary item once its two images have traded places."""
    return distractors[0], [answer]
