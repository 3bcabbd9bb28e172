"""Exception hierarchy of whole_body_control: one root, specific leaves."""


class WbcError(Exception):
    """Root of every error raised by whole_body_control."""


class ConfigError(WbcError, ValueError):
    """A configuration file or value is invalid; the message names file and key."""


class ModelError(WbcError):
    """A robot model cannot be loaded or is inconsistent."""


class ModelMismatch(ModelError):
    """Two models of the same robot (Pinocchio, MuJoCo) disagree."""


class StateError(WbcError, ValueError):
    """A robot state is invalid (non-finite, wrong size, unknown joint)."""
