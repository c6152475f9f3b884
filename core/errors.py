"""One error type for every failure a user can cause: bad data, bad paths, bad configs.

The CLI catches ShrinkbertError and prints its message as one line with a non-zero exit,
so raise it with a message that says what is wrong and what to do about it.
"""


class ShrinkbertError(Exception):
    """A user-facing error: the message is printed as one line, no traceback."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ShrinkbertError(message)
