# Thin doors onto the invoke tasks (which are thin doors onto python -m nsa_exp).
# GPU targets need scripts/run_h100.sh's environment: scripts/run_h100.sh make bench
.PHONY: check smoke bench test lint routing
check:
	invoke check
smoke:
	invoke smoke
bench:
	invoke bench
test:
	invoke test
lint:
	invoke lint
routing:
	invoke routing
