"""The few places where Python itself differs between operating systems."""

from __future__ import annotations

import os
import sys
from typing import Callable

__all__ = ["after_fork_in_child", "process_alive"]

_SYNCHRONIZE = 0x00100000  # Windows access right: wait on the process handle
_WAIT_TIMEOUT = 0x102  # WaitForSingleObject: still running
_ERROR_ACCESS_DENIED = 5  # OpenProcess on another user's process: it exists


def after_fork_in_child(function: Callable[[], None]) -> None:
    """Runs ``function`` in every child made by fork; nothing where there is no fork (Windows)."""
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=function)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. Not os.kill(pid, 0) on Windows, where it ends the
    process (any signal but CTRL_C_EVENT/CTRL_BREAK_EVENT is TerminateProcess there)."""
    if sys.platform == "win32":  # (mypy checks this branch only for Windows)
        import _winapi

        try:
            handle = _winapi.OpenProcess(_SYNCHRONIZE, False, pid)
        except OSError as e:
            return getattr(e, "winerror", None) == _ERROR_ACCESS_DENIED
        try:
            return _winapi.WaitForSingleObject(handle, 0) == _WAIT_TIMEOUT
        finally:
            _winapi.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
