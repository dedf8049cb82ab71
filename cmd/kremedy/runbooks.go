package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/runbooks"
)

func newRunbooksCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "runbooks",
		Short: "List the built-in runbooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rbs, err := runbooks.Builtin()
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
