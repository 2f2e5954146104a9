"""The library's small exception hierarchy: fail loudly and say how to fix it."""


class PretrainError(Exception):
    """Base class for every error raised on purpose by the pretrain library."""


class ConfigError(PretrainError, ValueError):
    """A configuration value is invalid; the message says which field and how to fix it."""


class DataError(PretrainError):
    """Input data cannot be read or violates a data contract."""


class CheckpointError(PretrainError):
    """A checkpoint is missing, incomplete or does not match the run that loads it."""
