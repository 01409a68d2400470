"""The emulator's HTTP layer: Kubernetes API paths over aiohttp, plus control endpoints under ``/_sim/``."""
