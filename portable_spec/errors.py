"""One error type for every user-facing failure: one line, naming the fix; the CLI turns it into exit code 2."""


class PortableSpecError(Exception):
    """A user-facing error. Its message is one line that says what to do."""

    exit_code = 2


class PlatformError(PortableSpecError):
    """The requested platform is unknown or cannot run on this host."""


class UsageError(PortableSpecError):
    """A command line argparse rejects; raised instead of argparse's exit so that ``--json`` shapes it too."""
