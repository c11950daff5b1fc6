"""Audio stored as files (TFDS's ``Audio(lazy_decode=True)``), decoded as TFDS decodes them.

TFDS decodes such audio with pydub (``AudioSegment.from_file(file, format=file_format)``), then
gives the samples as int32 cast to the feature's dtype, of shape (length,) or (length,
channels), converting the number of channels to the feature's as pydub's ``set_channels`` does.
WAV files are decoded here without pydub, sample for sample as pydub reads them (8-bit samples
made signed, 24-bit ones widened to 32 bits as pydub widens them, 2 channels to 1 by averaging
rounded down). Other formats go through pydub itself, which runs ffmpeg (or avconv) and its
prober, where they are installed, as in TFDS; where they are not, the feature is refused up
front. FLAC is refused: TFDS decodes it with tensorflow-io's ``decode_flac``, not pydub, whose
samples at each dtype tfrec_fast does not reproduce.
"""

from __future__ import annotations

import importlib.util
import io
import struct
import warnings
from typing import Dict, Optional, Tuple

import numpy as np

from .features import Audio

__all__ = ["decode_audio", "missing_decoder"]

_INT = {1: "i1", 2: "<i2", 4: "<i4"}


def missing_decoder(feature: Audio) -> Optional[str]:
    """Why audio of this feature cannot be decoded here, or None when it can."""
    kind = feature.file_format
    if kind == "wav":
        return None
    if kind == "flac":
        return (
            "its audio is stored as FLAC, which TFDS decodes with tensorflow-io's "
            "decode_flac (not pydub) into its own samples per dtype, which tfrec_fast does "
            "not reproduce"
        )
    stored = f"its audio is stored as {kind or 'files of unknown format'}"
    if not _have_pydub():
        return (
            f"{stored}, which TFDS decodes with pydub and ffmpeg: pip install pydub and "
            "install ffmpeg"
        )
    missing = _missing_programs()
    if missing:
        return (
            f"{stored}, which TFDS decodes with pydub through ffmpeg or avconv, but pydub "
            f"finds no {missing}: install ffmpeg"
        )
    return None


def _have_pydub() -> bool:
    return importlib.util.find_spec("pydub") is not None


def _missing_programs() -> Optional[str]:
    """What pydub needs to decode other formats and does not find, as pydub looks for it: its
    converter (AudioSegment.converter: avconv or ffmpeg, or a path given) and its prober
    (avprobe or ffprobe)."""
    pydub = _import_pydub()
    which = pydub.utils.which
    converter = pydub.AudioSegment.converter
    missing = []
    if not (which(converter) or which("avconv") or which("ffmpeg")):
        missing.append("ffmpeg (or avconv)")
    if not (which("avprobe") or which("ffprobe")):
        missing.append("ffprobe (or avprobe)")
    return " nor ".join(missing) or None


def _import_pydub():
    with warnings.catch_warnings():  # "Couldn't find ffmpeg": missing_decoder says so
        warnings.simplefilter("ignore")
        pydub = importlib.import_module("pydub")  # an optional dependency, as in TFDS
        importlib.import_module("pydub.utils")
    return pydub


def decode_audio(data: bytes, feature: Audio) -> np.ndarray:
    """One stored audio file -> its samples, as TFDS gives them."""
    if feature.file_format == "wav":  # pydub too reads these itself, without ffmpeg
        samples, channels = _wav(bytes(data))
    else:
        samples, channels = _pydub(bytes(data), feature.file_format)
    samples = _set_channels(samples, channels, feature.channels)
    if feature.channels > 1:
        samples = samples.reshape(-1, feature.channels)
    elif len(feature.shape) == 2:
        samples = samples.reshape(-1, 1)
    return samples.astype(np.int32).astype(feature.dtype)


def _wav(data: bytes):
    """(interleaved samples, channels) of a WAV file, read as pydub's read_wav_audio reads it:
    at most 10 chunks after the RIFF header, "data" the last; PCM (format 1 or 0xFFFE) only."""
    chunks: Dict[bytes, Tuple[int, int]] = {}
    pos = 12
    while pos + 8 <= len(data) and len(chunks) < 10:
        chunk_id = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        chunks.setdefault(chunk_id, (pos, size))
        if chunk_id == b"data":
            break
        pos += size + 8
    if b"fmt " not in chunks or chunks[b"fmt "][1] < 16:
        raise ValueError("not a WAV file: no 'fmt ' chunk")
    if b"data" not in chunks:
        raise ValueError("not a WAV file: no 'data' chunk")
    fmt = chunks[b"fmt "][0] + 8
    audio_format, channels = struct.unpack_from("<HH", data, fmt)
    (bits,) = struct.unpack_from("<H", data, fmt + 14)
    if audio_format not in (1, 0xFFFE):
        raise ValueError(f"WAV audio format 0x{audio_format:X} is not PCM (pydub reads PCM only)")
    start, size = chunks[b"data"]
    raw = data[start + 8 : start + 8 + size]
    width = bits // 8
    if width == 3:  # pydub: 4 bytes per sample, a sign byte first (its 24 -> 32 bit widening)
        triples = np.frombuffer(raw[: len(raw) - len(raw) % 3], np.uint8).reshape(-1, 3)
        wide = np.empty((len(triples), 4), np.uint8)
        wide[:, 0] = np.where(triples[:, 2] > 0x7F, 0xFF, 0x00)
        wide[:, 1:] = triples
        samples = wide.reshape(-1).view("<i4")
    elif width == 1:  # unsigned in WAV, signed in pydub
        samples = (np.frombuffer(raw, np.uint8).astype(np.int16) - 128).astype(np.int8)
    elif width in _INT:
        if len(raw) % width:
            raise ValueError(f"the data chunk's {len(raw)} bytes are not whole {bits}-bit samples")
        samples = np.frombuffer(raw, _INT[width])
    else:
        raise ValueError(f"{bits}-bit WAV samples are not read (pydub reads 8, 16, 24 and 32)")
    if channels < 1 or len(samples) % channels:
        raise ValueError(f"{len(samples)} samples are not whole frames of {channels} channels")
    return samples, channels


def _pydub(data: bytes, file_format: Optional[str]):
    pydub = _import_pydub()
    segment = pydub.AudioSegment.from_file(io.BytesIO(data), format=file_format)
    return np.array(segment.get_array_of_samples()), segment.channels


def _set_channels(samples: np.ndarray, have: int, want: int) -> np.ndarray:
    """pydub's AudioSegment.set_channels on interleaved samples."""
    if have == want:
        return samples
    frames = samples.reshape(-1, have)
    if have == 1:  # copied into every channel
        return np.repeat(frames, want, axis=1).reshape(-1)
    if want != 1:
        raise ValueError(
            f"audio of {have} channels cannot become {want} (pydub converts "
            "to and from 1 channel only)"
        )
    info = np.iinfo(samples.dtype)
    wide = frames.astype(np.int64)
    if have == 2:  # audioop.tomono(data, width, 0.5, 0.5): rounded down, clipped
        mixed = np.floor(wide[:, 0] * 0.5 + wide[:, 1] * 0.5)
        mixed = np.where(mixed < info.min + 1, info.min, np.minimum(mixed, info.max))
        return mixed.astype(samples.dtype)
    return np.floor_divide(wide, have).sum(axis=1).astype(samples.dtype)
