package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/runbooks"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

// Shell completion (`kremedy completion bash|zsh|fish|powershell`, cobra's):
// runbook names, --set keys of the runbook named, scenario names, and
// topic names read from the inventory's ZooKeeper when it answers within
// two seconds.

func runbookNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	rbs, err := runbooks.Builtin()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []string
	for _, rb := range rbs {
		out = append(out, rb.Name+"\t"+rb.Summary)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// setValues completes --set: "name=" for the runbook's parameters, and
// "topic=NAME" from the cluster when the inventory is given and reachable.
func setValues(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	rb, err := runbooks.Get(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	name, _, hasValue := strings.Cut(toComplete, "=")
	if !hasValue {
		var out []string
		for _, p := range rb.Params {
			out = append(out, p.Name+"=\t"+p.Type+": "+p.Description)
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	for _, p := range rb.Params {
		if p.Name == name && p.Type == "topic" {
			var out []string
			for _, t := range topicsOf(cmd) {
				out = append(out, name+"="+t)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeScenarios lists the scenarios; when --dir names a lab, only
// those of its kind (ZooKeeper or KRaft).
func completeScenarios(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var mode lab.Modes
	if f := cmd.Flags().Lookup("dir"); f != nil {
		if l, err := lab.Open(f.Value.String()); err == nil {
			mode = lab.ZooKeeperMode
			if l.State.KRaft() {
				mode = lab.KRaftMode
			}
		}
	}
	var out []string
	for _, n := range lab.ScenarioOrder {
		if sc := lab.Scenarios[n]; mode == 0 || sc.Mode == mode {
			out = append(out, n+"\t["+scenarioMode(sc)+" labs] "+sc.Summary)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func topicFlag(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return topicsOf(cmd), cobra.ShellCompDirectiveNoFileComp
}

// topicsOf lists the topics of the --inventory's cluster (none when it is
// not given or does not answer quickly: completion never hangs a shell).
func topicsOf(cmd *cobra.Command) []string {
	f := cmd.Flags().Lookup("inventory")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cl, err := openCluster(ctx, f.Value.String())
	if err != nil {
		return nil
	}
	defer cl.Close()
	var names []string
	if cl.ZK != nil {
		names, err = cl.ZK.Children(ctx, kafkazk.TopicsPath)
	} else {
		names, err = cl.Kafka.ListTopics(ctx) // a KRaft cluster
	}
	if err != nil {
		return nil
	}
	slices.Sort(names)
	return names
}
