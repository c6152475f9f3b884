"""One error type for every failure a user can cause: bad data, bad paths, bad configs.

The CLI catches ShrinkbertError and prints its message as one line with a non-zero exit,
so raise it with a message that says what is wrong and what to do about it. A failure of the
machine rather than of the code (a full disk, a read-only or forbidden folder) is one line too
(`environment_error`); the atomic writes have already removed what was half-written.
"""
from __future__ import annotations

import errno
import os
import re

# errnos that say the machine refused, not that the code is wrong
ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
# Rust-backed writers (safetensors, tokenizers) raise their own types, naming the OS error in the text
# ("os error 28"); shutil.copytree gathers its failures into one shutil.Error with no errno ("[Errno 28]")
OS_ERROR_IN_TEXT = re.compile(r"(?:os error |\[Errno )(\d+)")


class ShrinkbertError(Exception):
    """A user-facing error: the message is printed as one line, no traceback."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ShrinkbertError(message)


def environment_error(err: BaseException) -> str | None:
    """One line for a full disk or a refused folder anywhere in `err`'s chain (an OSError, or a
    library error that names one); None for anything else, which stays a traceback (a bug)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        code = err.errno if isinstance(err, OSError) else None
        if code is None:
            found = OS_ERROR_IN_TEXT.search(str(err))
            code = int(found.group(1)) if found else None
        if code in ENVIRONMENT_ERRNOS:
            where = getattr(err, "filename", None)
            return (f"{os.strerror(code)}{f': {where}' if where else ''} (nothing was written; "
                    "free some space or choose another --output-dir)")
        err = err.__cause__ or err.__context__
    return None


def error_line(err: BaseException) -> str | None:
    """What a command line prints after `error: ` for `err`, or None when it is a bug (a traceback)."""
    return str(err) if isinstance(err, ShrinkbertError) else environment_error(err)
