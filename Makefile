# karpenter-lambda: every target installs what it needs (fresh machine friendly).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# pytest workers: 2 cores here; override with `make test PYTEST_WORKERS=0` to run serially.  --dist loadfile keeps
# a module's tests (and its module-scoped simulation) on one worker; tests/conftest.py starts the slowest modules
# first.  (--dist loadgroup, used before, does not group at all with pytest 9.2 + xdist 3.8 here: every shared
# module fixture ran on both workers.)
PYTEST_WORKERS ?= 2
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION=1
export CDK_HOME := $(CURDIR)/.cdk-home

.PHONY: venv test demo bench synth clean wheel-check

# -c watcher/requirements.txt: the suite runs with the watcher image's pinned boto3 (a test holds them equal), so a
# new boto3 release cannot turn a fresh clone red; kubernetes is pinned in requirements-dev.txt.
venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt watcher/requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt -c watcher/requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# the wheel installed with its [sim] extra in a fresh venv runs every console command (.ci/wheel-check)
wheel-check: $(STAMP)
	PYTHON=$(PYTHON) .ci/wheel-check

demo: $(STAMP)
	$(PY) -m karpenter_lambda demo
	@mkdir -p .demo
	$(PY) -m karpenter_lambda simulate examples/demo/nodepools.yaml examples/demo/workloads.yaml examples/demo/scenario.yaml --report .demo/report.html

bench: $(STAMP)
	@mkdir -p .bench-out
	$(PY) bench/run_all.py --out .bench-out

# `make synth CLUSTER=my-cluster [NODEPOOLS=folder]` synthesises the CDK app into cdk.out (bundles the layer locally)
# and prints its warnings (e.g. an EC2NodeClass role the stack cannot pass). SYNTH_CONTEXT replaces the whole context.
CLUSTER ?= demo
NODEPOOLS ?=
comma := ,
SYNTH_CONTEXT ?= {"clusterName":"$(CLUSTER)"$(if $(NODEPOOLS),$(comma)"nodePools":"$(NODEPOOLS)")}
synth: $(STAMP)
	CDK_CONTEXT_JSON='$(SYNTH_CONTEXT)' $(PY) app.py

clean:
	rm -rf $(VENV) .pytest_cache cdk.out .cdk-home .bench-out .demo .wheel-check
