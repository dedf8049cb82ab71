package diagnose

import (
	"context"
	"fmt"

	"github.com/kremedy/kremedy/steps/ports"
)

// lease reports the cluster's lease when a run holds it: not a problem,
// but whoever reads the diagnosis should know that another run is
// changing the cluster (and that a run of theirs would be refused). A
// lease that cannot be read is said in the methods, not as a finding.
func lease(ctx context.Context, c ports.Cluster, o Options, add func(Finding)) (method string) {
	if !o.Lease || c.Lease == nil {
		return ""
	}
	h, err := c.Lease.Read(ctx)
	if err != nil {
		return fmt.Sprintf("the cluster's lease (one kremedy run at a time) could not be read: %v", err)
	}
	if h == nil {
		return ""
	}
	f := Finding{Kind: FindLeaseHeld, Severity: Info,
		Summary:  fmt.Sprintf("a kremedy run holds this cluster: run %s (%s) by %s since %s", h.RunID, h.Runbook, h.Operator, h.Since.UTC().Format("2006-01-02 15:04:05 UTC")),
		Evidence: []string{fmt.Sprintf("the cluster's lease names %s", *h)},
		Fix:      fmt.Sprintf("nothing to repair: another `kremedy run` on this cluster is refused until that run ends. If that run is dead, its lease lapses by itself %s; `--break-lease` on `kremedy run` or `kremedy resume` breaks it once you have made sure", c.Lease.Expiry()),
		DoNot:    "do not change the cluster by hand while that run goes on: it judges availability from what it saw"}
	if h.Expired {
		f.Summary += " (its heartbeat EXPIRED: the run is dead, and the next run takes the lease over)"
	}
	add(f)
	return ""
}
