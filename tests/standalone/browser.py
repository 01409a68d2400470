"""Headless Chromium for the real-browser UI check: a screenshot and the rendered DOM of one URL.

:func:`render` runs Debian's ``/usr/bin/chromium`` once per page in headless mode
(https://developer.chrome.com/docs/chromium/headless) with ``--screenshot`` and ``--dump-dom``
together, a new profile directory each time, and no background traffic (no first-run, sync,
component updates, QUIC). It runs in a session of its own and is stopped by that session's id when
it overruns (Chromium forks a zygote and renderers).

:func:`read_png` decodes the screenshot with the standard library and numpy (PNG specification,
https://www.w3.org/TR/png-3/: signature, chunk CRCs, IHDR, zlib-compressed IDAT, the five
scanline filters), so :func:`blank_problems` can tell a rendered page from an empty one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

CHROMIUM = Path("/usr/bin/chromium")
WINDOW = (1280, 900)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}
"""Samples per pixel of each 8-bit PNG colour type (grey, RGB, grey + alpha, RGBA)."""


@dataclass(frozen=True)
class Rendering:
    """What Chromium made of a URL: the screenshot file, the serialized DOM, its log."""

    url: str
    screenshot: Path
    dom: str
    log: str


def render(url: str, screenshot: Path, timeout: float = 60.0) -> Rendering:
    """Load ``url`` in a fresh headless Chromium; write the screenshot to ``screenshot``."""
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="gang-chromium-") as profile:
        command = [
            str(CHROMIUM),
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={screenshot}",
            "--dump-dom",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            url,
        ]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            dom, log = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            _, log = process.communicate()
            tail = log.decode(errors="replace")[-2000:]
            raise AssertionError(f"chromium did not finish {url} in {timeout} s:\n{tail}") from None
        finally:
            # Whatever of its session is left (a renderer that outlived the browser process).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    text = log.decode(errors="replace")
    assert process.returncode == 0, f"chromium exited with {process.returncode} on {url}:\n{text[-2000:]}"
    return Rendering(url, screenshot, dom.decode(errors="replace"), text)


@dataclass(frozen=True)
class Image:
    """A decoded 8-bit PNG: ``pixels`` has shape (height, width, channels)."""

    width: int
    height: int
    pixels: npt.NDArray[np.uint8]


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG: bad signature")
    chunks, position = [], len(PNG_SIGNATURE)
    while position < len(data):
        if position + 12 > len(data):
            raise ValueError("truncated chunk")
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        if len(body) != length or zlib.crc32(kind + body) != crc:
            raise ValueError(f"chunk {kind!r}: bad length or CRC")
        chunks.append((kind, body))
        position += 12 + length
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("IHDR must come first and IEND last")
    return chunks


def _paeth(left: int, up: int, up_left: int) -> int:
    estimate = left + up - up_left
    distances = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
    if distances[0] <= distances[1] and distances[0] <= distances[2]:
        return left
    return up if distances[1] <= distances[2] else up_left


def _unfilter(
    kind: int, row: npt.NDArray[np.uint8], previous: npt.NDArray[np.uint8], channels: int
) -> npt.NDArray[np.uint8]:
    if kind == 0:
        return row
    if kind == 1:  # Sub: a running sum along the row, per channel
        return (np.cumsum(row.reshape(-1, channels).astype(np.int64), axis=0) % 256).astype(np.uint8).reshape(-1)
    if kind == 2:  # Up
        return ((row.astype(np.int64) + previous) % 256).astype(np.uint8)
    if kind not in (3, 4):
        raise ValueError(f"unknown filter type {kind}")
    out, above = bytearray(row.tobytes()), previous.tobytes()
    for index in range(len(out)):
        left = out[index - channels] if index >= channels else 0
        up_left = above[index - channels] if index >= channels else 0
        guess = (left + above[index]) // 2 if kind == 3 else _paeth(left, above[index], up_left)
        out[index] = (out[index] + guess) % 256
    return np.frombuffer(bytes(out), dtype=np.uint8)


def read_png(path: Path) -> Image:
    """Decode a non-interlaced 8-bit PNG; ``ValueError`` says what is wrong with a broken one."""
    chunks = _chunks(path.read_bytes())
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = CHANNELS[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT")), dtype=np.uint8)
    stride = width * channels + 1
    if raw.size != stride * height:
        raise ValueError(f"image data is {raw.size} bytes, expected {stride * height}")
    rows = raw.reshape(height, stride)
    previous = np.zeros(width * channels, dtype=np.uint8)
    decoded = np.empty((height, width * channels), dtype=np.uint8)
    for number in range(height):
        previous = decoded[number] = _unfilter(int(rows[number, 0]), rows[number, 1:], previous, channels)
    return Image(width, height, decoded.reshape(height, width, channels))


def blank_problems(image: Image, minimum_share: float = 0.001) -> list[str]:
    """Why ``image`` does not look like a rendered page: wrong size, or fewer than ``minimum_share``
    of its pixels differ from the most common (background) colour."""
    problems = []
    if (image.width, image.height) != WINDOW:
        problems.append(f"size {image.width}x{image.height}, expected {WINDOW[0]}x{WINDOW[1]}")
    samples = image.pixels.reshape(-1, image.pixels.shape[2]).astype(np.uint32)
    packed = np.zeros(len(samples), dtype=np.uint32)
    for channel in range(samples.shape[1]):  # one integer per colour: a 1-D unique is fast
        packed = ((packed << np.uint32(8)) | samples[:, channel]).astype(np.uint32)
    colours, counts = np.unique(packed, return_counts=True)
    drawn = 1 - counts.max() / len(packed)
    if drawn < minimum_share:
        problems.append(f"blank: {drawn:.4%} of the pixels differ from the background ({len(colours)} colours)")
    return problems
