"""Errors that describe a user mistake: shown as one sentence, never as a traceback."""


class QuarlError(Exception):
    """A problem the user can fix (bad option, missing file, ...); the message says how."""


class IncompatibleCell(QuarlError):
    """This combination of choices cannot run (the paper's "n/a"); a sweep records it as skipped."""
