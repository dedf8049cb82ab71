//go:build race

package main

// A test binary with the race detector builds the kremedy it runs with it
// too: a race inside a lab run then ends that run with exit 66 and the
// report, and the test fails on it.
func init() { buildFlags = append(buildFlags, "-race") }
