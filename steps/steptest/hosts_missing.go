package steptest

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// The missing-call side of the fake's strictness. A scripted response
// (StopFails, Unreachable, Unwritable) is a test declaring that a command
// comes and meets it: a broker's stop that fails, a host that cannot be
// reached, a log dir listed that the login may not write. If that command
// never comes, the scenario the test set up never happened and the test
// checks something else than it says; like an unexpected command, that
// fails the test (lazygit's fake command runner, CheckForMissingCalls).

// response names one scripted response: StopFails[node],
// Unreachable[node] or Unwritable[node][dir].
type response struct {
	kind string
	node int32
	dir  string
}

// answered notes that a command met scripted response r.
func (h *Hosts) answered(r response) {
	if h.met == nil {
		h.met = map[response]bool{}
	}
	h.met[r] = true
}

// missing lists, one sentence each, the scripted responses no command
// met: the expected commands that never came. NewHosts fails the test
// with each when it ends (checkMissing).
func (h *Hosts) missing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, n := range slices.Sorted(maps.Keys(h.StopFails)) {
		if code := h.StopFails[n]; code != 0 && !h.met[response{kind: "StopFails", node: n}] {
			if b, ok := h.target.Host(n); ok {
				out = append(out, fmt.Sprintf("StopFails[%d] = %d: broker %d's stop command %q never came", n, code, n, b.Stop))
			} else {
				out = append(out, fmt.Sprintf("StopFails[%d] = %d: node %d is no broker of the target, and the fake fails only brokers' stops", n, code, n))
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.Unreachable)) {
		if h.Unreachable[n] != nil && !h.met[response{kind: "Unreachable", node: n}] {
			out = append(out, fmt.Sprintf("Unreachable[%d]: no command for node %d came", n, n))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.Unwritable)) {
		for _, d := range slices.Sorted(maps.Keys(h.Unwritable[n])) {
			if a := h.Unwritable[n][d]; a != "" && !h.met[response{kind: "Unwritable", node: n, dir: d}] {
				out = append(out, fmt.Sprintf("Unwritable[%d][%q] = %q: no listing of %s on broker %d came", n, d, a, d, n))
			}
		}
	}
	return out
}

// checkMissing fails t with each expected command that never came (see
// missing), when the test ends.
func (h *Hosts) checkMissing(t testing.TB) {
	t.Cleanup(func() {
		for _, m := range h.missing() {
			t.Errorf("steptest.Hosts: an expected command never came: %s", m)
		}
	})
}
