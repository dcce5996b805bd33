# The project's everyday commands. Each works from a fresh clone with Go on
# the PATH; none needs anything make itself does not.
.PHONY: test bench demo

# test runs what CI runs for the Go code: vet, then the race-enabled suite.
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
