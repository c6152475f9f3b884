"""Progress bars, one home: a live tqdm bar on a terminal, a plain line now and then in a log.

A tqdm bar redraws itself with carriage returns many times a second. Written to a file (a recipe's
log, CI output, `nohup`), every redraw stays: a 13-minute demo log was mostly redrawn bars. When
the bar's stream is not a terminal, `progress_bar` writes whole, newline-ended status lines
instead, at most one every LOG_INTERVAL_S seconds (plus the first and the last).
"""
from __future__ import annotations

import sys
from typing import Any, Iterable

from tqdm.std import tqdm

LOG_INTERVAL_S = 30.0


class LogLines(tqdm):
    """tqdm for a stream that is not a terminal: each refresh is one line, never a carriage return."""

    @staticmethod
    def status_printer(file):
        def print_status(text: str) -> None:
            if text:
                file.write(text.rstrip() + "\n")
                file.flush()

        return print_status

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg == "":  # tqdm clears its line on close: nothing to clear in a log
            return False
        self.sp(self.__str__() if msg is None else msg)
        return True

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs) -> None:
        super().set_postfix(ordered_dict, refresh=False, **kwargs)  # shown with the next line, not now

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        super().set_description(desc, refresh=False)

    def close(self) -> None:
        if not self.disable and self.last_print_n != self.n:
            self.display()  # the final count, once
        self.leave = False  # tqdm would end with a blank line (leave) or a carriage return
        super().close()


def progress_bar(iterable: Iterable | None = None, **kwargs: Any) -> tqdm:
    """`tqdm(iterable, **kwargs)` on a terminal; `LogLines` when the stream (kwargs' file, else
    stderr) is not one."""
    stream = kwargs.get("file") or sys.stderr
    if _is_terminal(stream):
        return tqdm(iterable, **kwargs)
    kwargs.setdefault("ascii", True)  # a log may not be read as UTF-8
    # a bar tuned for a terminal (mininterval=0.5) still writes a log line only now and then
    kwargs["mininterval"] = max(kwargs.get("mininterval", 0), LOG_INTERVAL_S)
    kwargs["maxinterval"] = max(kwargs.get("maxinterval", 0), kwargs["mininterval"])
    return LogLines(iterable, **kwargs)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
