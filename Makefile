# The two set-up commands of the README (docs/quickstart.md):
#   make test   - create .venv if missing, install the emulator (gang-sim/) and the provider with its
#                 test extra, both editable, run every check
#   make demo   - run the demo DAG on the embedded Kubernetes emulator
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: test lint docs release unit reservation-coverage versions test-lane-emulated test-lane-airflow test-lane-artifacts standalone production real real-shared-cluster real-own-clusters real-cluster real-preflight real-ready demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the dependencies change. gang-sim is a distribution of this repository, not of
# PyPI: it is installed from its folder in the same pip call, so the provider's test extra need not name it.
$(STAMP): pyproject.toml gang-sim/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e './gang-sim[testing]' -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check airflow_provider_gang gang-sim demo tests bench dags docs
	$(BIN)/ruff format --check airflow_provider_gang gang-sim demo tests bench dags docs
	$(BIN)/mypy
	$(BIN)/lint-imports

# Every check; first whether the real tier can run (real-preflight: at once, not after half an hour of
# other suites; a control plane not built yet starts building in the background, except under CI=true,
# where it fails naming make real-cluster). Then two lanes side by side, each one's output printed when
# it ends:
# - the emulated lane: the main suite in two pytest-xdist workers (most of its time waits on emulated
#   clusters and subprocesses, so two workers on two cores halve it), then the fault-injection suite
#   on its own (its clusters run at 40x: a booking lasts 15 s, too little beside a second worker's
#   load), then the other Airflow releases and the real-Airflow suite beside the doc set, the release
#   artifacts and the production-shaped burst;
# - the real tier (make real), from the start: its tests spend their time waiting on the real
#   controllers' loops (the cluster-autoscaler's scan, Kueue's and the scheduler's requeues) with the
#   CPU nearly idle, so it runs beside the emulated lane, two workers each with its own cluster; a
#   real control plane still being built (.ci/run) is waited for.
# GANG_STANDALONE=0 make test skips the real-Airflow suite, GANG_PRODUCTION=0 the burst, GANG_REAL=0
# the real tier, for quick local runs.
test: real-preflight lint reservation-coverage
	$(MAKE) --no-print-directory --output-sync=target -j2 test-lane-emulated real

test-lane-emulated:
	$(BIN)/python -m pytest -q -p no:cacheprovider --ignore=tests/standalone --ignore=tests/reliability --ignore=tests/real --ignore=tests/production --ignore=tests/release -n 2
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/reliability
	$(MAKE) --no-print-directory --output-sync=target -j2 test-lane-airflow test-lane-artifacts

test-lane-airflow:
	$(MAKE) --no-print-directory versions
	$(MAKE) --no-print-directory standalone

test-lane-artifacts:
	$(MAKE) --no-print-directory docs
	$(MAKE) --no-print-directory release
	$(MAKE) --no-print-directory production

# The other supported Airflow minor releases (docs/installation.md: Supported Airflow versions; the main venv has
# the newest): one venv each, .venv-airflow-<minor>, with the newest patch release, the provider and
# gang-sim editable and the `versions` extra, under tests/versions/constraints-<minor>.txt; each runs
# its subset below (the try store; dag.test() main and retry paths; the pages; real components). The cncf-kubernetes provider is
# the one pyproject asks for (10.25 supports Airflow >= 2.11). Airflow 3.1's own imports warn
# (FutureWarning, DeprecatedImportWarning) where pytest's filter makes warnings errors.
AIRFLOW_MINORS := 3.1 3.2
AIRFLOW_3.1 := 3.1.8
AIRFLOW_3.2 := 3.2.2
# Real Airflow components (tests/standalone) too, a few each: the user actions a triggerer before 3.3
# leaves to the listener (it calls no on_kill), a zombie, triggers moved to a new triggerer.
VERSIONS_TESTS_3.1 := tests/versions tests/standalone/test_real_triggerer.py tests/standalone/test_zombie.py
VERSIONS_TESTS_3.2 := tests/versions tests/e2e/test_orphans.py tests/standalone/test_real_triggerer.py tests/standalone/test_trigger_reassignment.py
.venv-airflow-%/.installed-stamp: pyproject.toml gang-sim/pyproject.toml tests/versions/constraints-%.txt
	test -x .venv-airflow-$*/bin/python || $(PYTHON) -m venv .venv-airflow-$*
	.venv-airflow-$*/bin/python -m pip install --quiet -e './gang-sim[testing]' -e '.[versions]' \
		'apache-airflow==$(AIRFLOW_$*)' -c tests/versions/constraints-$*.txt
	touch $@

# The releases side by side (two processes: their tests mostly wait on emulated clusters), each
# one's output printed when it ends.
versions: $(foreach minor,$(AIRFLOW_MINORS),.venv-airflow-$(minor)/.installed-stamp)
	$(MAKE) --no-print-directory --output-sync=target -j2 $(addprefix versions-,$(AIRFLOW_MINORS))

versions-%: .venv-airflow-%/.installed-stamp
	@echo "Airflow $(AIRFLOW_$*): $(VERSIONS_TESTS_$*)"
	.venv-airflow-$*/bin/python -m pytest -q -p no:cacheprovider -W 'ignore:The `airflow.:FutureWarning' $(VERSIONS_TESTS_$*)

# tests/standalone: Airflow's scheduler, dag-processor, triggerer(s) and api-server as processes,
# against emulated clusters, driven through the REST API (GANG_STANDALONE=0 skips it).
standalone: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=0 tests/standalone

# tests/production: Airflow as the Helm chart runs it (two schedulers, two triggerers, Celery workers,
# PostgreSQL, Redis) through a nightly burst of 60 gangs with every component and the cluster's API
# server killed once; prints its table and its rows of the reliability table.
# GANG_BURST_GANGS=200 make production runs the issue's largest burst; GANG_PRODUCTION=0 skips it.
production: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -s tests/production

# The doc set (docs/, docs/conf.py): warnings are errors, every cross-reference must resolve (-n).
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -n -q -b html docs build/docs/html

# The release artifacts (tests/release): python -m build makes the sdists and wheels of the provider
# and of gang-sim into build/release, twine checks their metadata, and the provider's wheel is
# installed with Airflow and gang-sim's wheel into a fresh venv (build/release/venv, pip's cache
# reused) that runs the quick start's DAG against gang-sim serve.
release: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/release

# The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and Kueue
# from Go modules, the cluster-autoscaler from its upstream source: GANG_CLUSTER_AUTOSCALER_SRC, README
# "The real control plane"), built into a cache outside the repository (hack/real-cluster/build.sh;
# about 20 minutes on 2 idle cores (28 CPU-minutes) and 11 GB, once; then it only prints the versions).
real-cluster:
	bash hack/real-cluster/build.sh

# The real tier: the contract suite against the real apiserver, and tests/real. Most of tests/real
# shares one real cluster per pytest-xdist worker (tests/real/conftest.py; whole modules per worker,
# since some start a module's clusters or gang-sim once); REAL_OWN_CLUSTERS start their own. A real tier
# that cannot run fails `make test` at its start (real-preflight), naming what is missing and
# `make real-cluster`; GANG_REAL=0 skips it on purpose, except under CI=true, where it always runs.
# .ci/run builds the real control plane in the background and says so in GANG_REAL_CLUSTER_BUILD_LOG:
# then real-ready waits for that build (the build script's lock) before the real tier starts.
REAL_BUILD_LOG := $(or $(GANG_REAL_CLUSTER_BUILD_LOG),build/real-cluster.log)
REAL_OWN_CLUSTERS := tests/real/test_workload_api.py tests/real/test_workload_api_autoscaler.py tests/real/test_harness.py \
	tests/real/test_topology.py tests/real/test_topology_gangs.py tests/real/test_multikueue.py tests/real/test_other_cluster.py
REAL_WORKERS := -n 2 --dist loadfile
real:
	$(MAKE) --no-print-directory real-shared-cluster
	$(MAKE) --no-print-directory real-own-clusters

real-preflight: $(STAMP)
ifeq ($(GANG_REAL),0)
	@if [ "$(CI)" = true ]; then echo "GANG_REAL=0 under CI=true: CI runs the real tier always" >&2; exit 1; fi
	@echo "the real tier is skipped on purpose (GANG_REAL=0)"
else ifneq ($(GANG_REAL_CLUSTER_BUILD_LOG),)
	@echo "the real control plane is being built in the background ($(GANG_REAL_CLUSTER_BUILD_LOG)); the real tier waits for it"
else
	@if ! $(BIN)/gang-sim real --check >/dev/null 2>&1; then \
		if [ "$(CI)" = true ]; then \
			$(BIN)/gang-sim real --check; \
			echo "CI=true: the real tier must run; build it first with make real-cluster (.ci/run does)" >&2; exit 1; \
		fi; \
		mkdir -p build; \
		echo "the real control plane is not built: building it in the background (make real-cluster: about 20 minutes and 11 GB, once; log $(REAL_BUILD_LOG)); the real tier waits for it (GANG_REAL=0 skips it on purpose)"; \
		setsid nice -n 19 ionice -c 3 bash hack/real-cluster/build.sh >$(REAL_BUILD_LOG) 2>&1 </dev/null & \
	fi
endif

# Waits for a build under way (the build script's lock) or builds what is missing; a warm cache only
# prints the versions.
real-ready: $(STAMP)
	@$(BIN)/gang-sim real --check >/dev/null 2>&1 || echo "$@: waiting for the real control plane's build ($(REAL_BUILD_LOG))"
	@mkdir -p build; bash hack/real-cluster/build.sh >>$(REAL_BUILD_LOG) 2>&1 || { cat $(REAL_BUILD_LOG); echo "building the real control plane failed (its log above)" >&2; exit 1; }
	@$(BIN)/gang-sim real --check

ifeq ($(GANG_REAL),0)
real-shared-cluster real-own-clusters:
	@echo "$@: skipped on purpose (GANG_REAL=0)"
else
real-shared-cluster: real-ready
	GANG_CONTRACT_BACKEND=real $(BIN)/python -m pytest -q -p no:cacheprovider tests/contract
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 $(REAL_WORKERS) tests/real $(addprefix --ignore=,$(REAL_OWN_CLUSTERS))

real-own-clusters: real-ready
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=5 $(REAL_WORKERS) $(REAL_OWN_CLUSTERS)
endif

# The pure core is fully decidable from its inputs: every branch of reservation/ is tested.
reservation-coverage: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/reservation --cov=airflow_provider_gang.reservation \
		--cov-branch --cov-report=term-missing:skip-covered --cov-fail-under=100

demo: $(STAMP)
	$(BIN)/python -m demo --dags-folder dags

bench: $(STAMP)
	$(BIN)/python -m bench.emulator

clean:
	rm -rf $(VENV) .venv-airflow-* .mypy_cache .ruff_cache
