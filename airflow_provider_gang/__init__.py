"""airflow-provider-gang: all-or-nothing (gang) start of distributed GPU jobs on Kubernetes.

Layers, checked by import-linter (see ``pyproject.toml``)::

    operators -> triggers -> hooks -> kube -> reservation

``reservation`` is pure decision logic, ``kube`` is the only HTTP code, and ``sim`` is a separate
Kubernetes API emulator that imports nothing from Airflow or the provider layers.
"""

__version__ = "0.1.0"
