"""The two exceptions every layer shares; a leaf module, so nothing here imports the rest."""


class UserError(Exception):
    """Bad input: the CLI prints the message as one line and exits 2."""


class Unsupported(RuntimeError):
    """A variant's explicit refusal: this device, dtype or shape is outside what it computes.

    Raise it from a variant (or let torch raise its own "No available kernel" / dtype / device
    refusal); the cell is then recorded `unsupported` with the message. Any other exception is
    a failure, not a refusal.
    """
