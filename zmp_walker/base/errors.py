"""The exception root of the project and the configuration error, shared by
``zmp_walker`` and ``whole_body_control``.

``WbcError`` is the root of every error either package raises (whole-body
control, the walker's errors included: ``zmp_walker.errors.WalkerError``
derives from it), so ``except WbcError`` catches them all; ``ConfigError`` is
the one configuration error of both, also a ``ValueError``.
"""

__all__ = ["WbcError", "ConfigError"]


class WbcError(Exception):
    """Root of every error raised by whole_body_control and zmp_walker."""


class ConfigError(WbcError, ValueError):
    """A configuration file or value is invalid; the message names file and key."""
