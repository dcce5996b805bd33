//go:build !race

package integration

// raceEnabled says the tests run with -race, so the binary is built with it.
const raceEnabled = false
