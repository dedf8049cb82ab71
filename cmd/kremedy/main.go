// Command kremedy walks an on-call engineer through repairing a ZooKeeper-mode
// Kafka cluster whose metadata, broker caches and on-disk segments drifted
// apart, and runs a local rehearsal lab that breaks exactly that way.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, shared by every command (docs and scripts rely on them).
const (
	exitOK          = 0
	exitFailed      = 1 // a failed check or a refusal
	exitUsage       = 2 // bad usage, config or input
	exitInterrupted = 3 // interrupted and resumable
)

// exitError carries an exit code to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error { return &exitError{exitUsage, err} }

func failedErr(err error) error { return &exitError{exitFailed, err} }

var version = "dev"

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kremedy",
		Short:         "Repair a ZooKeeper-mode Kafka cluster whose metadata drifted apart, step by step",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.AddCommand(newLabCmd(), newRunbooksCmd(), newDiagnoseCmd(), newPlanCmd(), newRunCmd(), newResumeCmd(), newZnodesCmd(), newSegmentsCmd())
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	os.Exit(report(err, ctx))
}

func report(err error, ctx context.Context) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "kremedy:", err)
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	default:
		// cobra's own usage errors (unknown command, missing args) are plain.
		if isCobraUsage(err) {
			return exitUsage
		}
		return exitFailed
	}
}

func isCobraUsage(err error) bool {
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument", "unknown shorthand"} {
		if strings.Contains(err.Error(), p) {
			return true
		}
	}
	return false
}
