"""Errors of the regression suites: bad suite files, unknown names, bad options."""

from __future__ import annotations

from sandcrew.errors import UserError


class SuiteError(UserError):
    """A suite, a completions file, a report or a solver choice is unusable.

    The message names the file, the line or task, and the field, and says how
    to fix it.
    """
