package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// ldflagsVersion may be set at link time (-X main.ldflagsVersion=v1.2.3);
// otherwise the module version and VCS revision come from the build info.
var ldflagsVersion string

// version is kremedy's version as every journal, report and `kremedy
// version` says it: "v1.2.3", or "(devel)" with the VCS revision, its time
// and "+dirty" for a build from a modified tree.
var version = buildVersion(debug.ReadBuildInfo)

func buildVersion(read func() (*debug.BuildInfo, bool)) string {
	if ldflagsVersion != "" {
		return ldflagsVersion
	}
	bi, ok := read()
	if !ok {
		return "unknown (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && v == "(devel)" { // a pseudo-version already names the revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if at != "" {
			v += " " + at
		}
		if dirty {
			v += " +dirty"
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kremedy's version (module version, VCS revision) and its Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "kremedy %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
