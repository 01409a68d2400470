"""``make demo``: the example nightly DAG run once with ``dag.test()`` on the emulator's ``demo`` scenario.

Not part of either distribution: it runs from a checkout of this repository, with both installed
(``make demo`` installs them).

- :mod:`.cluster`: a started :class:`gang_sim.testing.ClusterHarness` with an Airflow connection
  pointing at it (also the end-to-end tests' cluster);
- :mod:`.runner`: run an example DAG of a given DAGs folder with its wall-clock limits scaled;
- :mod:`.report`: what the demo prints about the run;
- ``python -m demo --dags-folder dags``: all three, for ``make demo``.
"""
