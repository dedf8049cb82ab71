package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault injection for rehearsals on a lab and for kremedy's own lab tests:
// KREMEDY_FAULT makes a headless run (or resume) hurt itself at an exact
// point of its journal, right after that record is on disk, so that "Ctrl-C
// at every step boundary" or "the operator's laptop slept during the znode
// step" can be rehearsed and tested deterministically. It is refused for an
// inventory that is not a kremedy lab: nobody injects faults into the
// cluster they are repairing.
//
//	KREMEDY_FAULT=WHAT@TYPE:STEP[:N][,WHAT@TYPE:STEP[:N]...]
//
// WHAT is sigint (as if the operator pressed Ctrl-C), sigkill (a crash) or
// pause (wait until the file named by KREMEDY_FAULT_RELEASE exists, after
// creating that name + ".paused", so that a test can break something
// outside at that moment). TYPE is a journal record type (step-start, plan,
// approval, action-start, action-end, output, check, step-done, note); the
// fault fires on the Nth such record of STEP (default 1).
const (
	faultEnv   = "KREMEDY_FAULT"
	releaseEnv = "KREMEDY_FAULT_RELEASE"
)

type faultPoint struct {
	what, typ, step string
	n, seen         int
}

type faults struct {
	mu      sync.Mutex
	points  []*faultPoint
	release string
	log     io.Writer
	ctx     context.Context
}

// parseFaults reads KREMEDY_FAULT; nil when unset.
func parseFaults(spec, release string) (*faults, error) {
	if spec == "" {
		return nil, nil
	}
	f := &faults{release: release}
	for _, item := range strings.Split(spec, ",") {
		what, at, ok := strings.Cut(item, "@")
		parts := strings.Split(at, ":")
		if !ok || len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("%s=%q: each fault is WHAT@TYPE:STEP[:N]", faultEnv, item)
		}
		p := &faultPoint{what: what, typ: parts[0], step: parts[1], n: 1}
		if len(parts) == 3 {
			n, err := strconv.Atoi(parts[2])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%s=%q: N must be a positive number", faultEnv, item)
			}
			p.n = n
		}
		switch what {
		case "sigint", "sigkill":
		case "pause":
			if release == "" {
				return nil, fmt.Errorf("%s=%q: pause needs %s (the file whose creation ends the pause)", faultEnv, item, releaseEnv)
			}
		default:
			return nil, fmt.Errorf("%s=%q: WHAT is sigint, sigkill or pause", faultEnv, item)
		}
		f.points = append(f.points, p)
	}
	return f, nil
}

// faultsFor returns the faults to inject into a run on inventory lab, or a
// usage error when they are asked for on a real cluster.
func faultsFor(lab bool) (*faults, error) {
	f, err := parseFaults(os.Getenv(faultEnv), os.Getenv(releaseEnv))
	if err != nil {
		return nil, usageErr(err)
	}
	if f != nil && !lab {
		return nil, usageErr(errors.New(faultEnv + " is set, but the inventory is not a kremedy lab: faults are only injected into rehearsals; unset it. Nothing was done"))
	}
	return f, nil
}

// after is the steps.Run.AfterRecord hook.
func (f *faults) after(typ, step string) {
	f.mu.Lock()
	var fire *faultPoint
	for _, p := range f.points {
		if p.typ == typ && p.step == step {
			p.seen++
			if p.seen == p.n {
				fire = p
			}
		}
	}
	f.mu.Unlock()
	if fire == nil {
		return
	}
	fmt.Fprintf(f.log, "\nKREMEDY_FAULT: %s after %s record %d of step %s\n", fire.what, typ, fire.n, step)
	switch fire.what {
	case "sigkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the kernel ends the process
	case "sigint":
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		// Let the signal land before the engine moves on, as a Ctrl-C at
		// exactly this point would.
		select {
		case <-f.ctx.Done():
		case <-time.After(5 * time.Second):
		}
	case "pause":
		_ = os.WriteFile(f.release+".paused", nil, 0o600)
		for {
			if _, err := os.Stat(f.release); err == nil {
				_ = os.Remove(f.release)
				_ = os.Remove(f.release + ".paused")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
