"""ConfigManager: one JSON config file under ``<store_path_root_dir>/config/`` (RocketMQ's cm/ConfigManager.java).

A subclass says where its file is (``config_file_path``) and how its state is written and read (``encode(pretty)``,
``decode(text)``); this base owns ``persist()`` (tmp, fsync, ``.bak``, rename, fsync the directory; False on an I/O
error) and ``load()`` (falls back to ``.bak``; ``ConfigLoadError`` when neither decodes, never an empty broker).
Invariants: at every instant either ``<file>`` or ``<file>.bak`` holds a complete document; ``decode`` either replaces
the state with the whole document or raises and leaves it unchanged (subclasses parse everything before assigning).
Thread-safety: state is owned by the broker's event loop; ``persist`` serialises file writes with a lock so a call
at shutdown from another thread cannot interleave with one on the loop (the caller must not mutate the state
concurrently with ``encode``).
Details: docs/BROKER_DESIGN.md, 'Config files'.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from abc import ABC, abstractmethod

log = logging.getLogger(__name__)


class ConfigLoadError(Exception):
    """A config file (and its ``.bak``) exists but cannot be decoded."""


class ConfigDecodeError(ValueError):
    """A config document that is not the shape its manager writes (raised by ``decode``)."""


def fsync_directory(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_text(path: str) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return data.decode("utf-8")


class ConfigManager(ABC):
    """Base of every broker config file manager (topics, subscription groups, offsets, filters, delay offsets)."""

    def __init__(self, config_file_path: str) -> None:
        self._config_file_path = os.fspath(config_file_path)
        self._file_lock = threading.Lock()

    @property
    def config_file_path(self) -> str:
        return self._config_file_path

    @abstractmethod
    def encode(self, pretty: bool = False) -> str:
        """The state as RocketMQ writes it (fastjson; ``pretty`` = its PrettyFormat, tab-indented)."""

    @abstractmethod
    def decode(self, text: str) -> None:
        """Replace the state with the document ``text``; raise (state unchanged) if it is not a valid document."""

    # -- persistence ---------------------------------------------------------------------------------------------

    def persist(self) -> bool:
        text = self.encode(True)
        path = self._config_file_path
        tmp, bak = path + ".tmp", path + ".bak"
        with self._file_lock:
            try:
                directory = os.path.dirname(path) or "."
                os.makedirs(directory, exist_ok=True)
                with open(tmp, "wb") as f:
                    f.write(text.encode("utf-8"))
                    f.flush()
                    os.fsync(f.fileno())
                if os.path.exists(path):
                    os.replace(path, bak)
                os.replace(tmp, path)
                fsync_directory(directory)
                return True
            except OSError:
                log.exception("failed to persist %s", path)
                return False

    def load(self) -> bool:
        path = self._config_file_path
        bak = path + ".bak"
        text = _read_text(path)
        if text is not None and text.strip():
            try:
                self.decode(text)
                log.info("load %s OK", path)
                return True
            except Exception as e:
                log.error("load %s failed (%s), trying %s", path, e, bak)
                main_error: Exception | None = e
        else:
            main_error = None
        bak_text = _read_text(bak)
        if bak_text is None or not bak_text.strip():
            if main_error is not None:
                raise ConfigLoadError(
                    f"config file {path} cannot be decoded ({main_error}) and there is no usable backup {bak}; "
                    f"fix or remove {path} to start"
                ) from main_error
            return True  # first boot: nothing stored yet
        try:
            self.decode(bak_text)
        except Exception as e:
            what = (
                f"config file {path} cannot be decoded ({main_error}) and"
                if main_error
                else f"config file {path} is missing or empty and"
            )
            raise ConfigLoadError(f"{what} its backup {bak} cannot be decoded either ({e})") from e
        log.warning("load %s OK (from the backup)", bak)
        if main_error is not None:
            aside = f"{path}.corrupt.{time.time_ns() // 1_000_000}"
            try:
                os.replace(path, aside)
                log.warning("kept the undecodable %s as %s", path, aside)
            except OSError:
                log.exception("could not move the undecodable %s aside", path)
        return True
