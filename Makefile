# The project's everyday commands. Each works from a fresh clone with Go on
# the PATH; none needs anything make itself does not.
.PHONY: check test bench demo

# check installs what the tests need and runs every test, Go and extension,
# as CI does on a fresh machine (see scripts/check.sh).
check:
	scripts/check.sh

# test runs the Go half of check: vet, then the race-enabled suite.
test:
	go vet ./...
	go test -race ./...

# bench builds toolhost, measures it over real pipes beside baselines taken
# in the same run, and writes BENCHMARKS.md (a few minutes on 2 cores).
bench:
	go run ./bench -out BENCHMARKS.md

# demo plays a short session against a temporary workspace.
demo:
	go run . demo
