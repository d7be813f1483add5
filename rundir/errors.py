"""The error every reader of a run directory raises for input it cannot use."""


class RunDirError(Exception):
    """The run directory cannot be analysed; the message says what is missing or broken."""
