package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/steps/diagnose"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

func newDiagnoseCmd() *cobra.Command {
	var inv, topic string
	var asJSON, noDisk bool
	c := &cobra.Command{
		Use:   "diagnose",
		Short: "Read-only: find stuck deletions, ghost topics, stale broker caches, foreign or orphaned segments (exit 0 healthy, 1 findings, 2 error)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic != "" {
				if err := kafkazk.ValidateTopic(topic); err != nil {
					return usageErr(err)
				}
			}
			cl, err := connect(cmd.Context(), inv)
			if err != nil {
				return err
			}
			defer cl.Close()
			d, err := diagnose.Run(cmd.Context(), cl.ports, diagnose.Options{Topic: topic, Disk: !noDisk})
			if err != nil {
				return usageErr(fmt.Errorf("diagnosis failed: %w; nothing was changed", err))
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(d); err != nil {
					return err
				}
			} else {
				printDiagnosis(w, d)
			}
			if !d.Healthy {
				return &exitError{exitFailed, fmt.Errorf("%d findings", len(d.Findings))}
			}
			return nil
		},
	}
	c.Flags().StringVar(&inv, "inventory", "", "inventory file describing the cluster (required)")
	c.Flags().StringVar(&topic, "topic", "", "diagnose one topic (deeper checks: leaders asked to serve, old records)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the diagnosis as JSON (stable: fields are only added)")
	c.Flags().BoolVar(&noDisk, "no-disk", false, "do not list log dirs over SSH")
	_ = c.MarkFlagRequired("inventory")
	return c
}

func printDiagnosis(w io.Writer, d *diagnose.Diagnosis) {
	scope := "the whole cluster"
	if d.Topic != "" {
		scope = fmt.Sprintf("topic %q", d.Topic)
	}
	fmt.Fprintf(w, "diagnosis of %s on %s: brokers %v, controller %d, %d topics, disks checked: %v (%s)\n",
		scope, d.Cluster, d.Brokers, d.Controller, d.Topics, d.Disk, d.Took)
	if len(d.Releases) > 0 {
		fmt.Fprintf(w, "releases: %s\n", d.Releases)
		for _, m := range d.Methods {
			fmt.Fprintf(w, "  method: %s\n", m)
		}
	}
	if d.Healthy {
		fmt.Fprintln(w, "no findings: ZooKeeper, every broker's metadata and every disk agree")
		return
	}
	for i, f := range d.Findings {
		fmt.Fprintf(w, "\n%d. [%s] %s", i+1, strings.ToUpper(string(f.Severity)), f.Kind)
		if f.Topic != "" {
			fmt.Fprintf(w, "  topic %s", f.Topic)
		}
		if len(f.Brokers) > 0 {
			fmt.Fprintf(w, "  brokers %v", f.Brokers)
		}
		if len(f.Partitions) > 0 {
			fmt.Fprintf(w, "  partitions %v", f.Partitions)
		}
		fmt.Fprintf(w, "\n   %s\n", f.Summary)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "   · %s\n", e)
		}
		fmt.Fprintf(w, "   fix: %s\n", f.Fix)
		if f.DoNot != "" {
			fmt.Fprintf(w, "   do NOT: %s\n", f.DoNot)
		}
	}
}
