"""Which errors another attempt may mend, the typed errors the rest become, and back-off.

- Credentials missing or refused (botocore's NoCredentialsError, google-auth's errors, HTTP 401
  and 403, S3's AccessDenied / InvalidAccessKeyId / SignatureDoesNotMatch, ...) fail at once as
  ``PermissionError`` saying so.
- A pinned read of an object that changed (HTTP 412, S3 PreconditionFailed, a pinned version
  gone) is :class:`~tfrec_fast.errors.ObjectChangedError`.
- Not found, a directory, other 4xx answers: the usual ``OSError`` subclass, at once.
- Anything else (5xx, dropped connections, timeouts, short bodies) is retried ``retries`` times
  with jittered exponential back-off, then ``OSError`` naming the URL, the byte offset and the
  attempts. When the backend retries by itself (gcsfs, pyarrow, a filesystem you made), only
  what it cannot see (a short body) is retried here, so the attempts never multiply.

The original exception is always the ``__cause__``; messages mask credentials.
"""

from __future__ import annotations

import errno
import os
import random
from typing import Iterator, Optional

from ..errors import ObjectChangedError
from .paths import redact
from .settings import Settings

__all__ = ["ShortRead", "final_error", "delays", "gave_up", "cause"]

# Exceptions no retry can mend, raised as they are (with the file's name where they name one).
_FINAL = (
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    FileExistsError,
    ImportError,
    TypeError,
    ValueError,
    NotImplementedError,
)
_NAMED = (
    (FileNotFoundError, errno.ENOENT),
    (IsADirectoryError, errno.EISDIR),
    (NotADirectoryError, errno.ENOTDIR),
    (FileExistsError, errno.EEXIST),
)
# Exception classes (by name: the packages are optional) that mean "no usable credentials".
_CREDENTIAL_CLASSES = {
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "NoAuthTokenError",
    "UnauthorizedSSOTokenError",
    "TokenRetrievalError",
    "DefaultCredentialsError",
    "RefreshError",  # google-auth
    "ClientAuthenticationError",  # azure-core
}
_CREDENTIAL_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
    "AllAccessDisabled",
    "AccountProblem",
    "InvalidSecurity",
    "Forbidden",
    "Unauthorized",
}


class ShortRead(OSError):
    """The server sent fewer (or more) bytes than asked for: retried, never taken for the end
    of the object."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__  # type: ignore[assignment]


def _status(error: BaseException) -> Optional[int]:
    """The HTTP status of an error from aiohttp, botocore, gcsfs or requests, if it has one."""
    for name in ("status", "code", "status_code"):
        value = getattr(error, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    return None


def _code(error: BaseException) -> Optional[str]:
    """S3's error code (botocore ClientError)."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code")
    return None


def _credentials_problem(error: BaseException) -> bool:
    for e in _chain(error):
        if (
            type(e).__name__ in _CREDENTIAL_CLASSES
            or _code(e) in _CREDENTIAL_CODES
            or _status(e) in (401, 403)
        ):
            return True
    return isinstance(error, PermissionError)


def _changed(error: BaseException) -> bool:
    for e in _chain(error):
        if (
            _status(e) == 412
            or _code(e) == "PreconditionFailed"
            or type(e).__name__ == "FileExpired"
        ):
            return True
    return False


def cause(error: BaseException) -> str:
    """A short description of ``error`` for messages, credentials masked."""
    text = redact(str(error)) or "no detail"
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(error).__name__}: {text}"


def final_error(
    error: BaseException, name: str, offset: Optional[int] = None, pinned: bool = False
) -> Optional[BaseException]:
    """The typed error to raise for ``error`` at once, or None when another attempt may mend
    it. ``pinned``: the read asked for the version the object had when it was planned, so a
    vanished object changed under the reader. Raise the result ``from error``."""
    if isinstance(error, ObjectChangedError):
        return error
    if _changed(error) or (pinned and isinstance(error, FileNotFoundError)):
        return ObjectChangedError(
            f"the store refused the version being read: {cause(error)}", path=name, offset=offset
        )
    if _credentials_problem(error):
        said = list(_chain(error))[-1]  # the store's (or the client's) own words
        return PermissionError(
            errno.EACCES,
            "credentials missing or refused: give them in "
            "storage_options (key/secret, token, ...) or the environment "
            f"({cause(said)})",
            name,
        )
    for kind, code in _NAMED:
        if isinstance(error, kind):
            return kind(code, os.strerror(code), name)
    if isinstance(error, _FINAL):
        return error
    status = _status(error)
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return OSError(errno.EIO, f"the server refused the request ({cause(error)})", name)
    return None


def retryable(error: BaseException, backend_retries: bool) -> bool:
    """Whether to try again here (the backend retried what it retries already)."""
    return isinstance(error, ShortRead) or not backend_retries


def delays(settings: Settings) -> Iterator[float]:
    """Seconds to wait before each retry: retry_delay doubled each time, between half and all
    of it at random (so clients that failed together do not retry together)."""
    for attempt in range(settings.retries):
        full = settings.retry_delay * (2**attempt)
        yield full / 2 + random.uniform(0, full / 2)


def gave_up(
    what: str, name: str, offset: Optional[int], attempts: int, error: BaseException
) -> OSError:
    where = f" at byte offset {offset}" if offset is not None else ""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return OSError(errno.EIO, f"{what} failed{where}{tries} ({cause(error)})", name)
