"""The two exceptions every layer shares, and an error in one line; a leaf module, so nothing
here imports the rest."""


def first_line(exc: BaseException) -> str:
    """`Type: the first line of its message` (at most 400 characters), or the type alone."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:400]}" if text else type(exc).__name__


class UserError(Exception):
    """Bad input: the CLI prints the message as one line and exits 2."""


class Unsupported(RuntimeError):
    """A variant's explicit refusal: this device, dtype or shape is outside what it computes.

    Raise it from a variant (or let torch raise its own "No available kernel" / dtype / device
    refusal); the cell is then recorded `unsupported` with the message. Any other exception is
    a failure, not a refusal.
    """
