"""One exception type per domain. Messages name the case, the field and the offending value."""


class CopyDecodeError(Exception):
    """Base class of every error the suite raises on bad input."""


class CorpusError(CopyDecodeError):
    """A corpus file or record is missing, malformed or unknown."""


class ProgramError(CopyDecodeError):
    """A copy program is malformed, or does not fit the source it is resolved against."""


class TokenizerError(CopyDecodeError):
    """A tokenizer cannot be found or is of a kind the suite cannot map to bytes."""


class ParamsError(CopyDecodeError):
    """A parameter in params.yaml or on the command line is missing or out of range."""


class RoundTripError(CopyDecodeError):
    """Resolving an oracle program did not give back the gold target."""


class StaleInputError(CopyDecodeError):
    """A stage output was built from inputs that have changed since (rerun the stage that wrote it)."""


class MissingOutputError(ParamsError):
    """A stage output a report reads is absent, or holds none of the rows it needs (run the stage that
    writes it). A ParamsError for the callers that already catch one; the claims engine catches only this."""


class GrammarError(CopyDecodeError):
    """A program grammar cannot be written in a format, or a grammar engine refused one."""


class GrammarLimitError(GrammarError):
    """A source is longer than a grammar form supports (the message states the limit)."""


class PatchError(CopyDecodeError):
    """A unified diff or search/replace text does not parse, or does not apply to its source."""
