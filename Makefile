# Thin doors onto the invoke tasks (which are thin doors onto python -m nsa_exp). No venv activation
# needed: .venv/bin/python is used when it exists (README's install line creates it), else python3.
# GPU targets need scripts/run_h100.sh's environment: scripts/run_h100.sh make bench
# Outputs go to runs/<name>/ (README, "two namespaces"); ARGS passes options to the task: make report ARGS=--overwrite
PY := $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
INVOKE := $(PY) -m invoke
.PHONY: check smoke bench test lint routing report
check smoke bench test lint routing report:
	$(INVOKE) $@ $(ARGS)
