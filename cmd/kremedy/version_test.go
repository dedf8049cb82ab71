package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	info := func(v string, kv ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: v}}
			for i := 0; i+1 < len(kv); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
			}
			return bi, true
		}
	}
	for _, c := range []struct {
		read func() (*debug.BuildInfo, bool)
		want string
	}{
		{info("v1.4.0"), "v1.4.0"},
		{info("(devel)", "vcs.revision", "579a4ef0123456789abcdef", "vcs.time", "2026-12-01T13:00:00Z", "vcs.modified", "true"), "(devel) 579a4ef01234 2026-12-01T13:00:00Z +dirty"},
		{info("(devel)", "vcs.revision", "579a4ef0123456789abcdef", "vcs.modified", "false"), "(devel) 579a4ef01234"},
		{info(""), "(devel)"},
		{func() (*debug.BuildInfo, bool) { return nil, false }, "unknown (no build info)"},
	} {
		if got := buildVersion(c.read); got != c.want {
			t.Errorf("buildVersion = %q, want %q", got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := kremedy(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.out, "kremedy ") || strings.Contains(r.out, " dev") {
			t.Errorf("kremedy %v: exit %d %q", args, r.code, r.out)
		}
	}
}
