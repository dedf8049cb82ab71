package restart

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/roll"
)

// preflight looks at the whole cluster before anything happens: it refuses
// a chroot that is not a Kafka cluster's, a cluster migrating to KRaft, a
// registered broker the inventory does not know (kremedy could not restart
// it) and, on resume, another cluster than the one the run started on; it
// proves every broker host reachable over SSH with a verified host key and
// says how healthy the cluster is now. It changes nothing.
type preflight struct {
	o      preflightOpts
	checks []steps.Check
}

type preflightOpts struct{}

func (k *preflight) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p, checks, err := k.look(ctx, env)
	k.checks = checks
	return p, err
}

func (k *preflight) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *preflight) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	_, checks, err := k.look(ctx, env) // resume: read again, never trusted
	return checks, err
}

// looking is one preflight's reading of the cluster.
type looking struct {
	env    *steps.Env
	p      *steps.Plan
	checks []steps.Check
	prior  *Facts
	f      Facts
}

func (g *looking) refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s", steps.ErrRefused, fmt.Sprintf(format, a...))
}

func (k *preflight) look(ctx context.Context, env *steps.Env) (*steps.Plan, []steps.Check, error) {
	g := &looking{env: env, p: &steps.Plan{NoOp: true, Summary: fmt.Sprintf("read-only look at cluster %s", env.Target.Name)}}
	var pf Facts
	if ok, err := env.Load(factsKey, &pf); err != nil {
		return g.p, nil, err
	} else if ok {
		g.prior = &pf
	}
	for _, phase := range []func(context.Context) error{g.chroot, g.brokers, g.reachable, g.health} {
		if err := phase(ctx); err != nil {
			return g.p, g.checks, err
		}
	}
	if err := env.Save(factsKey, g.f); err != nil {
		return g.p, g.checks, err
	}
	return g.p, g.checks, nil
}

// chroot refuses a chroot that is not a Kafka cluster's, a migration to
// KRaft under way, and another cluster than the one the run started on.
func (g *looking) chroot(ctx context.Context) error {
	var prior string
	if g.prior != nil {
		prior = g.prior.ClusterID
	}
	id, check, err := roll.CheckCluster(ctx, g.env, prior, "its brokers are rolled by the migration's own phases")
	g.f.ClusterID = id
	if check.OK { // passed, even when the resume is refused after it
		g.checks = append(g.checks, check)
	}
	return err
}

// brokers records the registrations and their sessions, and refuses a
// registered broker the inventory does not know.
func (g *looking) brokers(ctx context.Context) error {
	zk := g.env.ZK
	reg, err := brokers.Registered(ctx, zk)
	if err != nil {
		return err
	}
	ctrl, err := brokers.Controller(ctx, zk)
	if err != nil {
		return err
	}
	g.f.Registered, g.f.Controller = reg, ctrl
	inv := brokers.HostIDs(g.env.Target)
	for _, id := range reg {
		if !slices.Contains(inv, id) {
			return g.refuse("broker %d is registered in ZooKeeper but not in the inventory: kremedy could not restart it, and it would keep its stale metadata. Add it to the inventory; nothing was changed", id)
		}
	}
	g.p.Facts = append(g.p.Facts, fmt.Sprintf("brokers registered %s of inventory %s; controller %d", fmt.Sprint(reg), fmt.Sprint(inv), ctrl))
	for _, id := range inv {
		if !slices.Contains(reg, id) {
			g.p.Notes = append(g.p.Notes, fmt.Sprintf("broker %d is in the inventory but not registered in ZooKeeper (stopped or crashed): a rolling restart starts from a cluster with every broker up", id))
		}
	}
	return nil
}

// reachable proves every broker host answers over SSH with a verified key.
func (g *looking) reachable(ctx context.Context) error {
	inv := brokers.HostIDs(g.env.Target)
	var unreachable []string
	for i, err := range par.Each(inv, func(id int32) error { return g.env.Hosts.Check(ctx, id) }) {
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("broker %d: %v", inv[i], err))
		}
	}
	if len(unreachable) > 0 {
		return g.refuse("kremedy must reach every broker host over SSH before it stops one: %s. Nothing was changed", strings.Join(unreachable, "; "))
	}
	g.checks = append(g.checks, steps.Check{Name: "every broker host reachable over SSH with a verified host key", OK: true, Detail: fmt.Sprintf("%d hosts", len(inv))})
	return nil
}

// health says how healthy the cluster is now.
func (g *looking) health(ctx context.Context) error {
	inv := brokers.HostIDs(g.env.Target)
	healthy := true
	for _, c := range (roll.Gate{Want: inv, Rolling: true, Pending: inv}).Check(ctx, g.env.Cluster) {
		g.p.Facts = append(g.p.Facts, fmt.Sprintf("now: %s: %s", c.Name, okWord(c.OK, c.Detail)))
		healthy = healthy && c.OK
	}
	name := g.env.Target.Name
	if healthy {
		g.p.Summary = fmt.Sprintf("cluster %s is healthy: every broker registered, a controller, no offline or under-replicated partition", name)
	} else {
		g.p.Summary = fmt.Sprintf("cluster %s is not healthy now: the roll refuses any broker whose stop would leave a partition offline or below min.insync.replicas, and waits for health between brokers", name)
	}
	g.checks = append(g.checks, steps.Check{Name: "cluster state recorded", OK: true, Detail: g.p.Summary})
	return nil
}

func okWord(ok bool, detail string) string {
	if ok {
		return "yes (" + detail + ")"
	}
	return "NO (" + detail + ")"
}
