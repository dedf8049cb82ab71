package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/drill"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/tui"
)

func newDrillCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "A scored rehearsal: a lab broken by a hidden cause, customers writing and reading, a debrief at the end",
		Long: "A drill builds a lab, starts customer traffic (an acks=all idempotent producer and a consumer group per topic),\n" +
			"breaks the lab with a scenario it does not name, and pages you as an alert would. Repair it with kremedy and any\n" +
			"tool; every kremedy command run against the drill's inventory is recorded. `drill end` (or the victory check:\n" +
			"diagnose clean, traffic flowing on every topic) writes the debrief. Scenarios: " + strings.Join(drill.Names(), ", ") + ".",
	}
	cmd.AddCommand(newDrillStartCmd(), newDrillStatusCmd(), newDrillHintCmd(), newDrillEndCmd(), newDrillClientsCmd(), newDrillTrafficCmd())
	return group(cmd)
}

// drillSession is the drill in dir, saying what it does on cmd's output;
// its victory check diagnoses through openCluster (inventory/connect).
func drillSession(cmd *cobra.Command, dir string) *drill.Session {
	return &drill.Session{Dir: dir, Out: cmd.OutOrStdout(), Connect: func(ctx context.Context, path string) (ports.Cluster, func(), error) {
		cl, err := openCluster(ctx, path)
		if err != nil {
			return ports.Cluster{}, nil, err
		}
		return cl.Ports, func() { _ = cl.Close() }, nil
	}}
}

// drillErr gives a drill's error its exit code: the caller's (2), the
// lab's (labErr), or a failure (1).
func drillErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, drill.ErrUsage):
		return usageErr(err)
	case errors.Is(err, drill.ErrLab):
		return labErr(err)
	default:
		return failedErr(err)
	}
}

func newDrillStartCmd() *cobra.Command {
	var dir string
	var o drill.StartOptions
	c := &cobra.Command{
		Use:   "start",
		Short: "Build the lab in --dir, start the customers, break it with a hidden scenario, page",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("seed") {
				o.Seed = uint64(time.Now().UnixNano())
			}
			return drillErr(drillSession(cmd, dir).Start(cmd.Context(), o))
		},
	}
	addDirFlag(c, &dir)
	f := c.Flags()
	f.StringVar(&o.Scenario, "scenario", "random", "the hidden cause: random, or one of "+strings.Join(drill.Names(), ", "))
	f.StringVar(&o.KafkaVersion, "kafka-version", lab.KafkaVersion, "Kafka release of the lab (installed with `lab install`), or random among the installed ZooKeeper-mode releases")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the random choices (default: the clock)")
	f.StringVar(&o.Topic, "topic", "orders", "the customers' topic")
	f.IntVar(&o.Net, "net", 0, "second octet of the lab's loopback addresses, as `lab up --net`")
	f.BoolVar(&o.Secure, "secure", false, "a secured lab, as `lab up --secure`: SASL_SSL listeners, ZooKeeper SASL ACLs, SSH as an operator through sudo")
	return c
}

func newDrillStatusCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "status",
		Short: "The drill's clock, hints and the customers' traffic so far",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return drillErr(drillSession(cmd, dir).Status())
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newDrillHintCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "hint",
		Short: "The next hint, from \"look at…\" to the runbook (each one counts in the debrief)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return drillErr(drillSession(cmd, dir).Hint())
		},
	}
	addDirFlag(c, &dir)
	return c
}

func newDrillEndCmd() *cobra.Command {
	var dir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "end",
		Short: "Stop the customers, run the victory check and write the debrief (exit 1 when the drill is not resolved)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := drillSession(cmd, dir).End(cmd.Context())
			if err != nil {
				return drillErr(err)
			}
			return printDebrief(cmd, d, asJSON)
		},
	}
	addDirFlag(c, &dir)
	c.Flags().BoolVar(&asJSON, "json", false, "print the debrief as JSON")
	return c
}

// printDebrief prints the debrief (Markdown, or JSON): exit 1 when the
// drill is not resolved.
func printDebrief(cmd *cobra.Command, d drill.Debrief, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return failedErr(err)
		}
	} else {
		fmt.Fprint(cmd.OutOrStdout(), d.Markdown())
	}
	if !d.Resolved {
		return failedErr(fmt.Errorf("the drill is not resolved: %s", strings.Join(d.Remains, "; ")))
	}
	return nil
}

func newDrillClientsCmd() *cobra.Command {
	var dir, topic string
	c := &cobra.Command{
		Use:       "clients pause|resume",
		Short:     "Detach (pause) or attach again (resume) the customers of a topic: the drill inventory's client stop and start commands",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"pause", "resume"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return drillErr(drillSession(cmd, dir).Clients(args[0], topic))
		},
	}
	addDirFlag(c, &dir)
	c.Flags().StringVar(&topic, "topic", "", "the topic whose customers to detach or attach")
	_ = c.MarkFlagRequired("topic")
	return c
}

// newDrillTrafficCmd is the customers' process (started by drill start).
func newDrillTrafficCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "traffic",
		Short:  "The drill's customers (started by `drill start`)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return drillErr(drillSession(cmd, dir).Customers(cmd.Context()))
		},
	}
	addDirFlag(c, &dir)
	return c
}

// drillHook carries the drill's record of one command from the command
// that says what it acts on (actsOn) to main, which records its end: main
// puts it in the command's context.
type drillHook struct {
	start time.Time
	rec   *drill.Recorder
}

type drillHookKey struct{}

// withDrillHook is ctx carrying a hook for a command started at start.
func withDrillHook(ctx context.Context, start time.Time) (context.Context, *drillHook) {
	h := &drillHook{start: start}
	return context.WithValue(ctx, drillHookKey{}, h), h
}

// actsOn is the drill's recording hook. Every command that acts on an
// inventory or a run calls it first, with what it acts on (Inventory,
// RunDir, Runbook; OfRun for resume); when that is a running drill's
// inventory the command is recorded now — a command killed later
// (SIGPIPE into `| head`, a kill) still counts as run — and again by main
// with its exit code.
func actsOn(cmd *cobra.Command, in drill.Invocation) {
	h, _ := cmd.Context().Value(drillHookKey{}).(*drillHook)
	if h == nil {
		return // not started by main (an in-process test)
	}
	in.Verb, in.Args = strings.TrimPrefix(cmd.CommandPath(), "kremedy "), os.Args[1:]
	h.rec = drill.NewRecorder(in, h.start)
	recordForDrill(h.rec.Started())
}

// recordForDrill says on stderr that a command was not recorded for the
// drill's debrief (a failure to record changes nothing else).
func recordForDrill(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "kremedy: this command was not recorded for the drill's debrief: %v\n", err)
	}
}

// drillHeader is the TUI's drill header when inv is a running drill's.
func drillHeader(inv string) *tui.Drill {
	dir := drill.DirOfInventory(inv)
	if dir == "" {
		return nil
	}
	st, err := drill.Load(dir)
	if err != nil {
		return nil
	}
	return &tui.Drill{Started: st.Started, Hints: func() int {
		if now, err := drill.Load(dir); err == nil {
			return len(now.Hints)
		}
		return len(st.Hints)
	}}
}
