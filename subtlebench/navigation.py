"""The top bar's menus: the pages grouped by what people do there (make the benchmark, bring in its sources,
measure it, operate the app), each role seeing only the pages it may open, and the page it is on marked."""

from __future__ import annotations

from dataclasses import dataclass

from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, ROLES, has_role


@dataclass(frozen=True)
class Link:
    label: str
    href: str
    roles: tuple[str, ...]  # any of them may open it (has_role); () for every signed-in user
    hint: str = ""
    also: tuple[str, ...] = ()  # other path prefixes of its pages

    def matches(self, path: str) -> int:
        """How long the prefix of `path` it owns is (0: none): the longest match is the current page."""
        return max((len(prefix) for prefix in (self.href, *self.also) if path.startswith(prefix)), default=0)


ANYONE = ROLES
MENUS: tuple[tuple[str, str, tuple[Link, ...]], ...] = (
    (
        "make",
        "Make",
        (
            Link("Pick pairs", "/work/", (ANNOTATOR,), "Frames of a video, or a collection's candidate pairs"),
            Link("Write captions", "/captions/work/", (ANNOTATOR,), "Describe what changed", ("/captions/tasks/",)),
            Link("Review", "/review/", (REVIEWER,), "Accept, correct or reject", ("/captions/review/",)),
            Link("Data", "/tables/pairs/", (REVIEWER,), "Tables of pairs, videos, captions", ("/tables/",)),
            Link("Check edits", "/edits/check/", (REVIEWER,), "Is a model's edit what was asked?"),
            Link("Caption batches", "/captions/", (COORDINATOR,), "Choose pairs to caption"),
            Link("Guidelines", "/guidelines/", (COORDINATOR,), "Per category and domain, with examples"),
        ),
    ),
    (
        "sources",
        "Sources",
        (
            Link("Videos", "/videos/", (COORDINATOR,), "Import and sample YouTube-8M videos"),
            Link("Collections", "/collections/", (COORDINATOR,), "Image collections and their candidates"),
            Link("Mining", "/mining/", (COORDINATOR,), "Find subtle pairs across the corpus"),
            Link("Synthetic", "/synthetic/", (COORDINATOR,), "Controlled sweeps of generated pairs"),
            Link("Edits", "/edits/", (COORDINATOR,), "Pairs made by an image-editing model"),
        ),
    ),
    (
        "measure",
        "Measure",
        (
            Link("Overview", "/overview/", (COORDINATOR,), "Pairs per category and domain; who holds what"),
            Link("Team analytics", "/stats/", (COORDINATOR,), "Throughput, agreement, targets"),
            Link("Releases", "/releases/", (COORDINATOR,), "Published, frozen versions and reports"),
            Link("Studies", "/studies/", (COORDINATOR,), "Human baseline: blinded studies with intervals"),
            Link("Models", "/models/", (COORDINATOR,), "Endpoints, runs, compare"),
        ),
    ),
    (
        "operate",
        "Operate",
        (
            Link("Jobs", "/jobs/", ANYONE, "Long jobs and their progress"),
            Link("Exports", "/exports/", (COORDINATOR,), "The benchmark in the official format"),
            Link("API", "/api/docs/", (), "The REST API and its schema", ("/api/redoc/",)),
            Link("API tokens", "/account/tokens/", (), "Tokens for scripts"),
        ),
    ),
)


def nav_menus(user, path: str) -> list[dict]:
    """The menus this user sees (those with at least one page for their roles), each page with `current` set on the
    one `path` belongs to, and the menu holding it marked `current` too."""
    if not user.is_authenticated:
        return []
    menus = []
    best = (0, None)
    for key, label, links in MENUS:
        shown = [
            {"label": link.label, "href": link.href, "hint": link.hint, "current": False, "match": link.matches(path)}
            for link in links
            if not link.roles or has_role(user, *link.roles)
        ]
        if not shown:
            continue
        menu = {"key": key, "label": label, "links": shown, "current": False}
        menus.append(menu)
        for entry in shown:
            if entry["match"] > best[0]:
                best = (entry["match"], (menu, entry))
    if best[1] is not None:
        menu, entry = best[1]
        menu["current"] = entry["current"] = True
    return menus
