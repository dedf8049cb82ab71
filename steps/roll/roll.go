package roll

// This file holds the Roll and the seams it is built from (Nodes and Look;
// While, Skipper and Racker), and what a roll says of the cluster before it
// begins (Rollable) and after it (Verify). The Guard is in snapshot.go.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// Look is how a node looks now.
type Look struct {
	// Up: it serves (registered in ZooKeeper; listening).
	Up bool
	// New: it is a new process since the roll began, as far as the kind
	// can tell (a new ZooKeeper session); a kind that cannot tell says Up.
	// Only a node this run started counts as restarted, whatever New says.
	New bool
	// Addr is where its waits watch it (its listener).
	Addr string
}

// Nodes is what differs between rolls — what is rolled and how a node is
// seen: ZooKeeperBrokers (brokers registered in ZooKeeper), KafkaBrokers
// (brokers seen only through Kafka's Metadata, as in a migration) and
// Controllers (KRaft controllers). A new kind of roll is a new Nodes.
type Nodes interface {
	// Noun names a node in messages: "broker", "controller".
	Noun() string
	// Hosts are the inventory's nodes of this kind (their stop and start
	// commands, hosts, addresses).
	Hosts(env *steps.Env) []ports.Host
	// Begin reads, the first time the roll plans, what later looks are
	// measured against (the ZooKeeper sessions), and loads it from the
	// run's history afterwards.
	Begin(ctx context.Context, env *steps.Env) error
	// Last is the node that goes last (the active controller, the quorum
	// leader) and what it is ("the controller"); -1 for none.
	Last(ctx context.Context, env *steps.Env) (int32, string)
	Look(ctx context.Context, env *steps.Env, id int32) (Look, error)
	// Wait waits for a's node to be gone (PhaseGone), back (PhaseBack,
	// within timeout) or for the health gate after it (PhaseGate).
	Wait(ctx context.Context, env *steps.Env, a Args, timeout time.Duration) error
	// Plain is what an action of phase ph (Safe, Gone, Back, Gate) says
	// in the plan: its target and detail.
	Plain(env *steps.Env, ph Phase, a Args, timeout time.Duration) (target, detail string)
	// Verify is the cluster after the roll: the health gate held (once,
	// when the engine is only re-checking).
	Verify(ctx context.Context, env *steps.Env) []steps.Check
}

// While is work a roll does on a node's host while the node is stopped
// (moving a topic's directories out of its log dirs, editing its config).
// Its actions carry its own typed args, never roll.Args; their IDs are
// WhileID's.
type While interface {
	// Plan lists node id's actions, read now (the node may run), and a
	// fact for the plan ("" for none).
	Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, string, error)
	// Apply performs them; the node is stopped (gone). A plan no longer
	// true is steps.ErrStalePlan: the roll is planned and confirmed again,
	// that node still stopped.
	Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error
}

// Skipper is a While that can tell a node needs no restart at all (its
// config is already what the roll makes it), or a Nodes that can tell a
// node restarts elsewhere (a combined node, with the controllers): it says
// why, "" when the node must roll. It is asked only about nodes this run
// did not stop yet.
type Skipper interface {
	Skip(ctx context.Context, env *steps.Env, id int32) (string, error)
}

// WhileID is the ID of a While action of node id.
func WhileID(id int32, name string) string { return fmt.Sprintf("while-%d-%s", id, name) }

// Roll restarts nodes one at a time, the last one (the controller) last:
// for each, a safety check read right before its stop (a Guard's nodes), its
// own stop command over SSH, its wait until it is gone, what While does on
// its host while it is stopped, its start command, its wait until it is
// back, and the health gate before the next node. A node this run already
// touched goes first on resume, and no node is restarted twice in a run.
// Kinds embed it and may change its plan's summary and notes.
type Roll struct {
	Nodes Nodes
	// Only restricts the roll to these nodes; empty: every node Nodes lists.
	Only []int32
	// StopTimeout bounds a node's stop command and the wait until it is
	// gone; StartTimeout its start command and the wait until it is back.
	StopTimeout, StartTimeout time.Duration
	While                     While
	// Accept is the operator's acceptance (AcceptParam) of the partitions
	// no restart can keep available: they do not hold the roll back, and
	// the plan says what happens to them.
	Accept brokers.Accept
	// HealWait bounds how long a node's safety check, right before its
	// stop, waits for a cluster that is not whole or a stop that is not
	// safe yet (a replica fell behind) to heal, reading it again every
	// healEvery; 0 refuses at once. Past it the roll stops resumable.
	HealWait time.Duration
	// Batch is how many nodes stop at once: 0 or 1, one at a time;
	// BatchAuto, the largest batches the one stop-safety rule allows
	// (brokers.Batches, from the live ISR); N, at most N. Only a Guard's
	// rolls of brokers batch; controllers always roll one at a time.
	Batch int
	// First are nodes restarted before the others, in this order; the
	// last-one rule (Nodes.Last) then holds only among the others. The
	// zk-to-kraft revert's back-to-zookeeper roll sets it (steps/migrate).
	First []int32
}

// BatchAuto is Roll.Batch's "auto": the largest safe batches (a batch
// option's "auto" reads as it, TypeBatch).
const BatchAuto = -1

// BatchParam is the runbook parameter that sets Roll.Batch.
const BatchParam = "batch"

// batching reports whether the roll stops several nodes at once.
func (r *Roll) batching(snap *Snapshot) bool {
	return (r.Batch == BatchAuto || r.Batch > 1) && snap != nil && snap.Quorum == nil
}

// Racker is a Nodes that knows its nodes' broker.rack: a batch roll
// prefers the brokers of one rack in a batch (the rule decides, never the
// rack).
type Racker interface {
	Racks(ctx context.Context, env *steps.Env) map[int32]string
}

// host is node id's inventory entry among Nodes.Hosts (its stop and start
// commands), else the inventory's entry for it (Target.Node).
func (r *Roll) host(env *steps.Env, id int32) ports.Host {
	for _, h := range r.Nodes.Hosts(env) {
		if h.ID == id {
			return h
		}
	}
	return env.Target.Node(id)
}

// Verify: every node of the roll that had to restart was started by this
// run and runs as a new process, and the cluster is healthy (Nodes.Verify).
func (r *Roll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if err := r.Nodes.Begin(ctx, env); err != nil {
		return nil, err
	}
	prog, err := r.history(env)
	if err != nil {
		return nil, err
	}
	ids, _, _, err := r.order(ctx, env)
	if err != nil {
		return nil, err
	}
	var same []string
	for _, id := range ids {
		if !prog[id].stopped {
			why, err := r.skip(ctx, env, id)
			if err != nil {
				return nil, err
			}
			if why != "" {
				continue
			}
		}
		l, err := r.Nodes.Look(ctx, env, id)
		if err != nil {
			return nil, err
		}
		if !prog[id].startOK || !l.New {
			same = append(same, fmt.Sprintf("%s %d", r.Nodes.Noun(), id))
		}
	}
	restarted := steps.Check{Name: fmt.Sprintf("every %s of the roll was started by this run and runs as a new process", r.Nodes.Noun()), OK: len(same) == 0, Detail: "not restarted: " + text.Summarize(same)}
	return append([]steps.Check{restarted}, r.Nodes.Verify(ctx, env)...), nil
}

// skip says why node id needs no restart in this roll (a Skipper Nodes
// or While says so), "" when it must roll.
func (r *Roll) skip(ctx context.Context, env *steps.Env, id int32) (string, error) {
	for _, x := range []any{r.Nodes, r.While} {
		if s, ok := x.(Skipper); ok {
			if why, err := s.Skip(ctx, env, id); err != nil || why != "" {
				return why, err
			}
		}
	}
	return "", nil
}

// Rollable says why a roll of every node could not begin now, "" when it
// could, leaving out the topics of skip (about to be deleted: their own
// partitions do not count). A runbook that rolls asks it before it changes anything, so
// that a roll is refused up front, not half-way.
func (r *Roll) Rollable(ctx context.Context, env *steps.Env, skip ...string) (string, error) {
	g, ok := r.Nodes.(Guard)
	if !ok {
		return "", nil
	}
	s, err := g.Snapshot(ctx, env)
	if err != nil {
		return "", err
	}
	if len(skip) > 0 {
		s = s.Without(skip...)
	}
	var why []string
	if w := s.Broken(); w != "" {
		why = append(why, "the cluster is not whole: "+w)
	}
	var ids []int32
	for _, h := range r.Nodes.Hosts(env) {
		ids = append(ids, h.ID)
		if rs := s.Risks(h.ID, r.Accept); len(rs) > 0 {
			why = append(why, fmt.Sprintf("stopping %s %d would not be safe: %s", r.Nodes.Noun(), h.ID, text.Summarize(rs)))
		}
	}
	refusal, unaccepted := checkAccept(r.Accept, s.Unavailable(ids))
	if refusal != "" {
		why = append(why, refusal)
	}
	if len(unaccepted) > 0 {
		why = append(why, brokers.WayOut(unaccepted))
	}
	return strings.Join(why, "; "), nil
}
