"""The root of the office's errors: every exception class of hive_core derives from
OfficeError, and also from the builtin it honestly is where there is one (a refused draft
is a ValueError too), so a caller can catch the office's own errors as one kind and
nothing else (tests/unit/test_errors.py checks every module)."""


class OfficeError(Exception):
    """An error of the office; its message is a sentence that says what is wrong and, where
    the person or an agent can do something about it, what to do."""
