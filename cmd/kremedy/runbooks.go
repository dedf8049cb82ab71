package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/runbooks"
)

func newRunbooksCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "runbooks",
		Short: "List the built-in runbooks (`runbooks show NAME` for one's parameters, steps and risks)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listRunbooks(cmd)
		},
	}
	c.AddCommand(newRunbooksShowCmd())
	c.Args = noUnknownSubcommand
	return c
}

func newRunbooksShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:               "show RUNBOOK",
		Short:             "A runbook's parameters (types, defaults), steps (risk, confirmation, timeout) and what it writes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: runbookNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return showRunbook(cmd, args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the runbook as JSON")
	return c
}

// showRunbook is `runbooks show`: a runbook's parameters, steps and artifacts, or the runbook as JSON.
func showRunbook(cmd *cobra.Command, name string, asJSON bool) error {
	rb, err := runbooks.Get(name)
	if err != nil {
		return usageErr(err)
	}
	w := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rb)
	}
	fmt.Fprintf(w, "%s — %s\n(%s)\n", rb.Name, rb.Summary, rb.File)
	if d := strings.TrimSpace(rb.Description); d != "" {
		fmt.Fprintf(w, "\n%s\n", d)
	}
	fmt.Fprintf(w, "\nparameters (--set name=value):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range rb.Params {
		def := "(required)"
		if p.HasDefault {
			def = "default " + p.Default
		} else if !p.Required {
			def = "optional"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Name, p.Type, def, p.Description)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsteps (destructive steps need the %s name typed):\n", rb.ConfirmNoun)
	for i, s := range rb.Steps {
		to := ""
		if s.Timeout > 0 {
			to = ", timeout " + s.Timeout.String()
		}
		fmt.Fprintf(w, "  %d. %s [%s: %s, confirm %s%s]\n", i, s.Title, s.ID, s.Risk, s.Confirm, to)
	}
	if len(rb.Artifacts) > 0 {
		fmt.Fprintf(w, "\nwrites, in the run directory:\n")
		for _, a := range rb.Artifacts {
			fmt.Fprintf(w, "  %s: %s\n", a.Path, a.What)
		}
	}
	return nil
}

// listRunbooks is `runbooks`: every built-in runbook with its summary.
func listRunbooks(cmd *cobra.Command) error {
	rbs, err := runbooks.Builtin()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	for _, rb := range rbs {
		fmt.Fprintf(w, "%s\t%s\n", rb.Name, rb.Summary)
	}
	return w.Flush()
}
