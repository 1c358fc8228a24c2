"""A progress bar for management commands: drawn (tqdm) when their output is a terminal, absent otherwise.

It has the two methods a `Job` offers a service (`start(total)`, `advance(steps)`), so a service that reports
progress to a job row can report to a terminal the same way.
"""

from __future__ import annotations

from tqdm import tqdm


class TerminalProgress:
    """A tqdm bar on `stream` if it is a terminal; otherwise every call does nothing, so piped or captured
    output (a log file, cron, CI) holds only the command's own lines."""

    def __init__(self, stream, description: str, unit: str = "it"):
        # A command's self.stdout is Django's OutputWrapper, which appends a newline to each write: the bar goes
        # to the file underneath, where a carriage return redraws it in place.
        self.stream = getattr(stream, "_out", stream)
        self.description = description
        self.unit = unit
        self.bar: tqdm | None = None
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())

    def start(self, total: int | None = None) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            # Fixed width from the terminal at start: a terminal that reports no size (0 columns) still gets a bar.
            self.bar = tqdm(total=total, desc=self.description, unit=self.unit, file=self.stream)
        else:
            self.bar.reset(total=total)

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        if self.bar is not None:
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ProgressTee:
    """Reports to several progress targets at once: a job row (or its claimed unit) and a terminal's bar."""

    def __init__(self, *targets):
        self.targets = [target for target in targets if target is not None]

    def start(self, total: int | None = None) -> None:
        for target in self.targets:
            target.start(total=total)

    def advance(self, steps: int = 1, error: str | None = None) -> None:
        for target in self.targets:
            target.advance(steps, error=error)
