"""The paper's strategy x category table: one model under each prompting strategy on one release's split, accuracy per
category and AVG (the macro mean over categories), with the humans' row beside; written as CSV, Markdown and LaTeX
whose bytes depend on the input only.

Every figure is benchmark.report's: each strategy is a model row of the report and the humans' row is the
report's (an item scores the mean of its raters), so the table and the release report never disagree.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass

from benchmark.report import (
    Row,
    _markdown_text,
    decimal,
    latex_escape,
    percent,
)
from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES


@dataclass(frozen=True)
class StrategyRow:
    strategy: str
    run: str  # the name of the run that stands for the strategy
    row: Row


@dataclass(frozen=True)
class StrategyTable:
    release: str
    release_hash: str
    split: str
    model: str
    items: int
    humans: Row
    strategies: tuple[StrategyRow, ...]  # in the order given


def strategy_table_of_rows(
    *,
    release: str,
    release_hash: str,
    split: str,
    model: str,
    items: int,
    humans: Row,
    strategies: Mapping[str, tuple[str, Row]],
) -> StrategyTable:
    """The table from the report's rows: the humans' and, per strategy, (run name, the run's model row labelled by
    the strategy, benchmark.report.row_of), rows kept in this order."""
    return StrategyTable(
        release=release,
        release_hash=release_hash,
        split=split,
        model=model,
        items=items,
        humans=humans,
        strategies=tuple(StrategyRow(strategy, run, row) for strategy, (run, row) in strategies.items()),
    )


def _estimates(row: Row) -> list:
    return [*(row.categories[category] for category in CATEGORIES), row.macro]


CSV_FIELDS = ("release", "release_hash", "split", "model", "row", "run", *CATEGORIES, "avg", "items")


def strategy_table_csv(table: StrategyTable) -> bytes:
    """One line per strategy, then the humans: proportions with six decimals, blank where no item was answered."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    lines = [(line.strategy, line.run, line.row) for line in table.strategies] + [
        (table.humans.label, "", table.humans)
    ]
    for label, run, row in lines:
        figures = ["" if cell is None else decimal(cell.estimate) for cell in _estimates(row)]
        items = row.micro.items if row.micro else 0
        writer.writerow([table.release, table.release_hash, table.split, table.model, label, run, *figures, items])
    return out.getvalue().encode()


HEADINGS = [*(ABBREVIATIONS[category] for category in CATEGORIES), "AVG"]


def _percent(cell) -> str:
    return "–" if cell is None else percent(cell.estimate)


def strategy_table_markdown(table: StrategyTable) -> bytes:
    """The paper's table in %: a row per strategy, then the humans; the runs behind the rows listed below."""
    lines = [
        f"# {_markdown_text(table.model)} by strategy: release {_markdown_text(table.release)}, "
        f"split {_markdown_text(table.split)}",
        "",
        f"Release hash `{table.release_hash}`, {table.items} items. Accuracy in %; AVG: the mean over categories.",
        "",
        "| Strategy | " + " | ".join(HEADINGS) + " |",
        "|---|" + "---:|" * len(HEADINGS),
    ]
    for line in table.strategies:
        figures = " | ".join(_percent(cell) for cell in _estimates(line.row))
        lines.append(f"| {_markdown_text(line.strategy)} | {figures} |")
    lines.append(
        f"| {_markdown_text(table.humans.label)} | "
        + " | ".join(_percent(cell) for cell in _estimates(table.humans))
        + " |"
    )
    lines += ["", "## Runs", ""]
    lines += [f"- {_markdown_text(line.strategy)}: {_markdown_text(line.run)}" for line in table.strategies]
    lines.append("")
    return "\n".join(lines).encode()


def strategy_table_latex(table: StrategyTable) -> bytes:
    """A booktabs tabular: a row per strategy, then the humans below a rule; accuracy in %."""
    width = len(HEADINGS)
    lines = [
        f"% {latex_escape(table.model)} by strategy: release {latex_escape(table.release)}, "
        f"split {latex_escape(table.split)}, hash {latex_escape(table.release_hash)}",
        r"\begin{tabular}{l" + "c" * width + "}",
        r"\toprule",
        " & ".join(["Strategy", *HEADINGS]) + r" \\",
        r"\midrule",
    ]
    for line in table.strategies:
        figures = ["--" if cell is None else percent(cell.estimate) for cell in _estimates(line.row)]
        lines.append(" & ".join([latex_escape(line.strategy), *figures]) + r" \\")
    lines.append(r"\midrule")
    figures = ["--" if cell is None else percent(cell.estimate) for cell in _estimates(table.humans)]
    lines.append(" & ".join([latex_escape(table.humans.label), *figures]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines).encode()
