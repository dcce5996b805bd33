//go:build race

package s3

const raceEnabled = true
