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
	"time"

	"github.com/spf13/cobra"
)

// Exit codes, shared by every command (docs and scripts rely on them).
const (
	exitOK          = 0
	exitFailed      = 1 // a failed check or a refusal
	exitUsage       = 2 // bad usage, config or input
	exitInterrupted = 3 // interrupted and resumable
)

// verbose (-v) turns on the adapters' own logs.
var verbose bool

// exitError carries an exit code to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error { return &exitError{exitUsage, err} }

func failedErr(err error) error { return &exitError{exitFailed, err} }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kremedy",
		Short:         "Diagnose, repair, roll and migrate a Kafka cluster (ZooKeeper or KRaft mode), one confirmed step at a time",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "print the adapters' own logs (ZooKeeper client, Kafka client) on stderr")
	root.AddCommand(newVersionCmd(), newLabCmd(), newRunbooksCmd(), newDiagnoseCmd(), newInventoryCmd(), newPlanCmd(), newRunCmd(), newResumeCmd(), newApproveCmd(), newZnodesCmd(), newSegmentsCmd(), newDrillCmd())
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	root := newRoot()
	// A command acting on a running drill's inventory records itself
	// (actsOn); its end is recorded here.
	ctx, hook := withDrillHook(ctx, start)
	_, err := root.ExecuteContextC(ctx)
	code := report(err, ctx)
	recordForDrill(hook.rec.Ended(err, code))
	os.Exit(code)
}

func report(err error, ctx context.Context) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "kremedy:", err)
	return exitCode(ctx, err)
}

// exitCode is the code kremedy exits with for err (0 for nil).
func exitCode(ctx context.Context, err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	case isCobraUsage(err): // cobra's own usage errors (unknown command, missing args) are plain
		return exitUsage
	default:
		return exitFailed
	}
}

func isCobraUsage(err error) bool {
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires ", "invalid argument", "unknown shorthand", "required flag"} {
		if strings.Contains(err.Error(), p) {
			return true
		}
	}
	return false
}

// group makes c a command that only holds subcommands: an unknown
// subcommand (or none) is a usage error, exit 2, naming the commands it
// has. Its flags are not parsed, so "lab dwn --dir D" reports the
// misspelled command, not "unknown flag --dir".
func group(c *cobra.Command) *cobra.Command {
	c.FParseErrWhitelist.UnknownFlags = true
	c.Args = noUnknownSubcommand
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return usageErr(fmt.Errorf("%q needs a command: %s (see `%s --help`)", cmd.CommandPath(), subcommands(cmd), cmd.CommandPath()))
	}
	return c
}

// noUnknownSubcommand refuses an argument to a command that takes none but
// its subcommands' names: exit 2, naming them.
func noUnknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := ""
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageErr(fmt.Errorf("unknown command %q for %q%s; its commands: %s", args[0], cmd.CommandPath(), hint, subcommands(cmd)))
}

func subcommands(c *cobra.Command) string {
	var names []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return strings.Join(names, ", ")
}
