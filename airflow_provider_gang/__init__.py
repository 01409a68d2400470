"""airflow-provider-gang: all-or-nothing (gang) start of distributed GPU jobs on Kubernetes.

Layers, checked by import-linter (see ``pyproject.toml``)::

    decorators -> operators -> triggers -> hooks -> kube -> reservation

``reservation`` is pure decision logic and ``kube`` the only HTTP code. The Kubernetes API emulator
the tests run against is a distribution of its own, ``gang-sim`` (package ``gang_sim``), which
imports nothing from Airflow or this provider.
"""

__version__ = "0.1.0"
