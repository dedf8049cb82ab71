package restart

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/roll"
)

// The KRaft rolling restart: the one roller over the KRaft controllers
// (the quorum's stop rule, the leader last), then over the brokers seen
// through Kafka alone (the partition rule). Every read goes over Kafka's
// APIs: a KRaft cluster has no ZooKeeper.

// Nodes a KRaft roll restarts (kraftRollOpts.Nodes).
const (
	NodesControllers = "controllers"
	NodesBrokers     = "brokers"
)

// kraftRollOpts are the kraft-rolling-restart kind's options.
type kraftRollOpts struct {
	// Nodes is what this step rolls: controllers or brokers.
	Nodes string `opt:"nodes"`
	// Only restricts the roll to these node ids; empty: every one of the
	// inventory.
	Only          []int32       `opt:"only" type:"brokers" default:""`
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthChecks  int           `opt:"health_checks" default:"3"`
	HealthTimeout time.Duration `opt:"health_timeout" default:"5m"`
	// Accept: the topics whose partitions no restart can keep available
	// that the operator accepts (roll.AcceptParam); brokers only.
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
	// Batch: how many brokers stop at once (roll.BatchParam): 1, N or
	// auto; brokers only (controllers roll one at a time).
	Batch int `opt:"batch" type:"batch" default:"1"`
}

// kraftRoll is the kraft-rolling-restart kind.
type kraftRoll struct {
	o kraftRollOpts
	r roll.Roll
}

func newKRaftRoll(o kraftRollOpts) *kraftRoll {
	return &kraftRoll{o: o, r: kraftRollOf(o)}
}

// kraftRollOf is the roll of o's nodes (an unknown Nodes rolls nothing:
// Plan refuses it).
func kraftRollOf(o kraftRollOpts) roll.Roll {
	r := roll.Roll{Only: o.Only, StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout, HealWait: o.HealthTimeout}
	switch o.Nodes {
	case NodesControllers:
		r.Nodes = &roll.Controllers{HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout, Header: true}
	case NodesBrokers:
		r.Nodes = &roll.KafkaBrokers{HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout, SkipCombined: true}
		r.Accept, r.Batch = o.Accept, o.Batch
	}
	return r
}

// kraftOnly refuses a cluster that is not in KRaft mode.
func kraftOnly(env *steps.Env, what string) error {
	if !env.Target.KRaft {
		return fmt.Errorf("%w: %s is for KRaft clusters, and %s is a ZooKeeper-mode cluster (its inventory has no mode: kraft): run rolling-restart instead; nothing was done", steps.ErrRefused, what, env.Target.Name)
	}
	return nil
}

func (k *kraftRoll) check(env *steps.Env) error {
	if err := kraftOnly(env, "kraft-rolling-restart"); err != nil {
		return err
	}
	if k.r.Nodes == nil {
		return fmt.Errorf("kraft-rolling-restart: nodes is %q; it rolls %s or %s", k.o.Nodes, NodesControllers, NodesBrokers)
	}
	if k.o.Nodes == NodesControllers && len(env.Target.Controllers) == 0 {
		return fmt.Errorf("%w: the inventory lists no kraft_controllers: kremedy cannot restart the controllers it does not know (add them with their stop and start commands); nothing was done", steps.ErrRefused)
	}
	return nil
}

func (k *kraftRoll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	if err := k.check(env); err != nil {
		return nil, err
	}
	return k.r.Plan(ctx, env)
}

func (k *kraftRoll) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	return k.r.Apply(ctx, env, p)
}

func (k *kraftRoll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if err := k.check(env); err != nil {
		return nil, err
	}
	var checks []steps.Check
	if k.o.Nodes != NodesControllers || !env.Rechecking() {
		c, err := k.r.Verify(ctx, env)
		if err != nil || k.o.Nodes != NodesControllers {
			return c, err
		}
		checks = c
	}
	// Re-checked on a resume, the controllers' roll is judged by the
	// quorum alone: the brokers' roll after it may hold a broker down by
	// design.
	// The controllers' roll ends on a quorum with its margin back.
	s, err := (&roll.Controllers{}).Snapshot(ctx, env)
	if err != nil {
		return nil, err
	}
	why := s.Broken()
	return append(checks, steps.Check{Name: "the metadata quorum has a leader and every controller a caught-up voter", OK: why == "", Detail: cmp.Or(why, fmt.Sprintf("leader %d, %d of %d voters caught up", s.Quorum.Leader, s.Margin.CaughtUp, s.Margin.Voters))}), nil
}

// kraftPreflightKey is where kraft-preflight saves the cluster it saw.
const kraftPreflightKey = "restart/kraft-facts"

// kraftPreflight looks at a KRaft cluster before anything happens: the
// quorum with its margin, every broker registered and unfenced and known
// to the inventory, every host reachable over SSH, and whether each roll
// could begin now — so that a broker that cannot stop safely refuses the
// run before any controller restarts. A state that is not right is read
// again for a few seconds before it refuses (a voter between two fetches,
// a replica catching up). It changes nothing.
type kraftPreflight struct {
	o      kraftPreflightOpts
	checks []steps.Check
}

type kraftPreflightOpts struct {
	Accept []string `opt:"accept_unavailable" type:"topics" default:""`
}

// preflightSettle is how long kraft-preflight reads a cluster that is not
// whole again before it refuses.
var preflightSettle = 10 * time.Second

func (k *kraftPreflight) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	p, checks, err := k.look(ctx, env)
	k.checks = checks
	return p, err
}

func (k *kraftPreflight) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *kraftPreflight) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	_, checks, err := k.look(ctx, env) // resume: read again, never trusted
	return checks, err
}

type kraftFacts struct {
	ClusterID string `json:"cluster_id"`
}

func (k *kraftPreflight) look(ctx context.Context, env *steps.Env) (*steps.Plan, []steps.Check, error) {
	refuse := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", steps.ErrRefused, fmt.Sprintf(format, a...))
	}
	p := &steps.Plan{NoOp: true, Summary: fmt.Sprintf("read-only look at KRaft cluster %s", env.Target.Name)}
	var checks []steps.Check
	if err := kraftOnly(env, "this runbook"); err != nil {
		return p, nil, err
	}
	if len(env.Target.Controllers) == 0 {
		return p, nil, refuse("the inventory lists no kraft_controllers: a KRaft rolling restart restarts the controllers too, and kremedy cannot restart what it does not know. Add them (id, host, listener, stop, start); nothing was done")
	}
	// The cluster: the one the run began on.
	cv, err := env.Kafka.DescribeCluster(ctx)
	if err != nil {
		return p, nil, fmt.Errorf("describe the cluster over Kafka: %w. Nothing was done", err)
	}
	var prior kraftFacts
	resumed, err := env.Load(kraftPreflightKey, &prior)
	if err != nil {
		return p, nil, err
	} else if resumed && prior.ClusterID != cv.ClusterID {
		return p, nil, refuse("this run began on cluster id %s and the inventory's brokers now answer as %s: it is another cluster (or a reinstall). Start a new run; nothing was done", prior.ClusterID, cv.ClusterID)
	}
	inv := brokers.HostIDs(env.Target)
	var listed []int32
	for _, b := range cv.Brokers {
		listed = append(listed, b.ID)
		if !slices.Contains(inv, b.ID) {
			return p, nil, refuse("broker %d is in the cluster but not in the inventory: kremedy could not restart it. Add it to the inventory; nothing was done", b.ID)
		}
	}
	checks = append(checks, steps.Check{Name: "the cluster is the one the run began on, and every broker it lists is in the inventory", OK: true, Detail: fmt.Sprintf("cluster id %s, brokers %s", cv.ClusterID, fmt.Sprint(listed))})
	// SSH to every node, brokers and controllers.
	ids := slices.Clone(inv)
	for _, c := range env.Target.Controllers {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids) // a combined node is one host
	var unreachable []string
	for i, err := range par.Each(ids, func(id int32) error { return env.Hosts.Check(ctx, id) }) {
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("node %d: %v", ids[i], err))
		}
	}
	if len(unreachable) > 0 {
		return p, checks, refuse("kremedy must reach every controller and broker host over SSH before it stops one: %s. Nothing was changed", strings.Join(unreachable, "; "))
	}
	checks = append(checks, steps.Check{Name: "every controller and broker host reachable over SSH with a verified host key", OK: true, Detail: fmt.Sprintf("%d hosts", len(ids))})
	if resumed {
		// A resume: a node this run stopped may still be down. Each roll
		// judges its remaining nodes with the run's own history, right
		// before each stop; this look proves only cluster and SSH.
		p.Summary = fmt.Sprintf("resuming on KRaft cluster %s: each roll judges its remaining nodes against what this run already did, right before each stop", env.Target.Name)
		checks = append(checks, steps.Check{Name: "resumed: the rolls judge the remaining nodes with this run's history", OK: true, Detail: p.Summary})
		return p, checks, nil
	}
	why, err := k.rollable(ctx, env)
	if err != nil {
		return p, checks, err
	}
	if len(why) > 0 {
		return p, checks, refuse("a rolling restart of this cluster could not keep it available now (read for %s): %s. Nothing was changed", preflightSettle, strings.Join(why, "; "))
	}
	s, err := (&roll.Controllers{Header: true}).Snapshot(ctx, env)
	if err != nil {
		return p, checks, err
	}
	p.Facts = append(p.Facts, fmt.Sprintf("metadata quorum: leader %d, epoch %d, %d of %d voters caught up, a majority is %d", s.Quorum.Leader, s.Quorum.Epoch, s.Margin.CaughtUp, s.Margin.Voters, s.Margin.Majority))
	p.Summary = fmt.Sprintf("KRaft cluster %s can be rolled: the quorum keeps a majority without any one controller, and every broker's stop keeps its partitions online and at min.insync.replicas", env.Target.Name)
	checks = append(checks, steps.Check{Name: "each controller and each broker could stop now without loss", OK: true, Detail: p.Facts[0]})
	// Saved only once the look passed: a resume after a refusal looks
	// again in full.
	if err := env.Save(kraftPreflightKey, kraftFacts{ClusterID: cv.ClusterID}); err != nil {
		return p, checks, err
	}
	return p, checks, nil
}

// rollable says why the controllers' and the brokers' rolls could not
// begin now, read again every 2 s until preflightSettle has passed.
func (k *kraftPreflight) rollable(ctx context.Context, env *steps.Env) ([]string, error) {
	ctrls := roll.Roll{Nodes: &roll.Controllers{}}
	brks := roll.Roll{Nodes: &roll.KafkaBrokers{SkipCombined: true}, Accept: k.o.Accept}
	start := env.Now()
	for {
		var why []string
		for _, r := range []roll.Roll{ctrls, brks} {
			w, err := r.Rollable(ctx, env)
			if err != nil {
				return nil, fmt.Errorf("%w. Nothing was changed", err)
			}
			if w != "" {
				why = append(why, r.Nodes.Noun()+"s: "+w)
			}
		}
		if len(why) == 0 || env.Now().Sub(start) >= preflightSettle {
			return why, nil
		}
		if err := env.Sleep(ctx, 2*time.Second); err != nil {
			return nil, err
		}
	}
}
