"""The one error type the model repository builder raises for bad input."""


class ModelRepoError(ValueError):
    """Bad settings or model input; str() is one line naming the key or file."""
