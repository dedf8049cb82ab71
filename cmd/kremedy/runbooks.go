package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps"
)

func newRunbooksCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "runbooks",
		Short: "List the built-in runbooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rbs, err := runbooks.Builtin(steps.KindNames())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, rb := range rbs {
				fmt.Fprintf(w, "%s\t%s\n", rb.Name, rb.Summary)
			}
			return w.Flush()
		},
	}
}

// buildSteps turns a runbook's step specs into engine steps.
func buildSteps(rb *runbooks.Runbook) ([]steps.Step, error) {
	var out []steps.Step
	for _, s := range rb.Steps {
		risk, err := steps.ParseRisk(s.Risk)
		if err != nil {
			return nil, err
		}
		conf, err := steps.ParseConfirm(s.Confirm)
		if err != nil {
			return nil, err
		}
		st, err := steps.NewStep(steps.Info{ID: s.ID, Kind: s.Kind, Title: s.Title, Why: s.Why, Risk: risk,
			Confirm: conf, Rollback: s.Rollback, Timeout: s.Timeout})
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
