"""``python -m airflow_provider_gang.sweep``: see :mod:`.command`."""

from __future__ import annotations

import sys

from airflow_provider_gang.sweep.command import main

if __name__ == "__main__":
    sys.exit(main())
