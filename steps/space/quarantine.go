package space

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/logdir"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// quarantine is space-quarantine: while the broker is down, move whole
// partition directories whose data an in-sync replica elsewhere holds to
// a quarantine on another filesystem, until the dir's filesystem will
// keep Headroom percent free once the broker fetched them again.
type quarantine struct{ o quarantineOpts }

type quarantineOpts struct {
	brokerOpts
	// Dir is the quarantine on the broker's host ("" refuses when a move
	// is needed); the run's id is a directory under it.
	Dir string `opt:"quarantine" default:""`
	// Headroom is the share of the filesystem to have free (percent).
	Headroom int `opt:"headroom" default:"20"`
	// StopTimeout bounds the stop of a running broker whose full dir is
	// offline.
	StopTimeout time.Duration `opt:"stop_timeout" default:"5m"`
}

// moveArgs are one move's: the partition directory and where it goes;
// or, with Phase, the broker's stop before the moves.
type moveArgs struct {
	Phase phase  `json:"phase,omitempty"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
}

// stopFirst decides the running broker's case: nothing to move (NoOp set)
// unless a full dir of it is offline. Kafka then keeps it offline until a
// restart, and a restart on the full dir crashes the broker (3.9.2 on
// the lab: InternalError rebuilding an index during log loading): the
// broker is stopped first. It returns the offline full dirs.
func (k *quarantine) stopFirst(ctx context.Context, env *steps.Env, l *look, p *steps.Plan) ([]string, error) {
	if !l.up {
		return nil, nil
	}
	states, err := env.Kafka.(ports.Records).DescribeLogDirs(ctx, l.id)
	if err != nil {
		return nil, fmt.Errorf("%w; nothing was stopped or moved", err)
	}
	var stop []string
	for _, s := range l.space {
		for _, st := range states {
			if st.Dir == s.Dir && st.Err != "" && s.Full() {
				stop = append(stop, s.Dir)
			}
		}
	}
	if len(stop) == 0 {
		p.NoOp, p.Summary = true, fmt.Sprintf("broker %d is running with no full dir offline: Kafka deletes the segments below the new log start offsets itself (retention check); nothing is moved aside", l.id)
		return nil, nil
	}
	// The stop-safety rule before the plan offers the stop (and again
	// right before it, in Apply).
	if err := safeToStop(ctx, env, l.id); err != nil {
		return nil, err
	}
	return stop, nil
}

// candidate is a partition directory that may be moved aside, with what
// its move frees for good: the segments below the leader's log start
// (the rest is fetched again).
type candidate struct {
	dir  string
	ps   brokers.PartitionSpace
	gain int64
}

func (k *quarantine) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{Facts: l.dfFacts()}
	stop, err := k.stopFirst(ctx, env, l, p)
	if err != nil {
		return nil, err
	}
	if p.NoOp {
		return p, nil
	}
	for _, s := range l.space {
		if err := k.planDir(ctx, env, l, s, p); err != nil {
			return nil, err
		}
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
		p.Summary = fmt.Sprintf("broker %d's dirs have %d%% free or more: nothing is moved aside", l.id, k.o.Headroom)
		return p, nil
	}
	p.Summary = fmt.Sprintf("move %d whole partition directories of broker %d (down) to %s, on another filesystem: each has an in-sync replica on a live broker, and broker %d fetches it again from the leader's log start when it starts", len(p.Actions), l.id, k.o.Dir, l.id)
	if len(stop) > 0 {
		p.Summary = fmt.Sprintf("stop broker %d (its full dir %s is offline, and Kafka crashes starting on it), then move %d whole partition directories to %s, on another filesystem: each has an in-sync replica on a live broker, and broker %d fetches it again from the leader's log start when it starts", l.id, strings.Join(stop, ", "), len(p.Actions), k.o.Dir, l.id)
		h := l.host
		p.Actions = append([]steps.Action{
			{ID: fmt.Sprintf("broker-%d/stop", l.id), Op: steps.OpSSH, Broker: l.id, Target: fmt.Sprintf("broker %d", l.id), Detail: h.Stop + " on " + h.On(), Args: moveArgs{Phase: phaseStop}},
			{ID: fmt.Sprintf("broker-%d/gone", l.id), Op: steps.OpWait, Broker: l.id, Target: fmt.Sprintf("broker %d", l.id), Detail: fmt.Sprintf("broker %d stops serving (at most %s)", l.id, k.o.StopTimeout), Args: moveArgs{Phase: phaseGone}},
		}, p.Actions...)
	}
	p.Notes = append(p.Notes, "nothing is deleted: each directory is moved (mv) to the quarantine, which kremedy never deletes; remove it yourself once the broker is back in every ISR")
	p.Rollback = fmt.Sprintf("to put a directory back: stop broker %d, move the directory Kafka made again for it aside, move the quarantined one back from %s into its log dir, start broker %d", l.id, k.dest(env, ""), l.id)
	return p, nil
}

// planDir plans the moves for one log dir.
func (k *quarantine) planDir(ctx context.Context, env *steps.Env, l *look, s brokers.Space, p *steps.Plan) error {
	want := s.Size * int64(k.o.Headroom) / 100
	if s.Avail >= want {
		return nil
	}
	var cands []candidate
	var only []string
	for _, ps := range s.Partitions {
		pv, ok := l.partition(ps)
		if !ok || !l.elsewhere(pv) {
			only = append(only, ps.Name)
			continue
		}
		start, err := logStart(ctx, env, ps.Topic, ps.Partition)
		if err != nil {
			return fmt.Errorf("%w; nothing was moved", err)
		}
		gain, _ := ps.FreedBelow(start)
		cands = append(cands, candidate{dir: s.Dir, ps: ps, gain: gain})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return int(b.gain - a.gain) })
	free := s.Avail
	for _, c := range cands {
		if free >= want {
			break
		}
		if c.gain == 0 {
			continue
		}
		free += c.gain
		p.Actions = append(p.Actions, steps.Action{ID: "quarantine/" + c.ps.Name, Op: steps.OpMove, Broker: l.id,
			Target: path.Join(s.Dir, c.ps.Name), Detail: fmt.Sprintf("→ %s (%s; fetched again from the leader's log start, %s less)", k.dest(env, c.ps.Name), brokers.Bytes(c.ps.Bytes), brokers.Bytes(c.gain)),
			Args: moveArgs{From: path.Join(s.Dir, c.ps.Name), To: k.dest(env, c.ps.Name), Bytes: c.ps.Bytes}})
	}
	if free < want {
		return fmt.Errorf("%w: moving aside every partition of %s that another in-sync replica holds frees %s once they are fetched again: %s free of the %s wanted (%d%%). The only copies (%s) are never moved, and records no group committed past are not deleted; nothing was moved. Grow the filesystem, free space on it another way, or lower --set headroom",
			steps.ErrRefused, s.Dir, brokers.Bytes(free-s.Avail), brokers.Bytes(free), brokers.Bytes(want), k.o.Headroom, orNoneList(only))
	}
	if len(p.Actions) > 0 {
		if err := k.checkDest(ctx, env, l, s, p); err != nil {
			return err
		}
	}
	return nil
}

// dest is where a partition directory goes: DIR/RUN/NAME.
func (k *quarantine) dest(env *steps.Env, name string) string {
	return path.Join(k.o.Dir, "kremedy-"+env.RunID(), name)
}

// checkDest refuses a quarantine that is missing, unsafe, inside a log
// dir or on the log dir's own filesystem, or too small.
func (k *quarantine) checkDest(ctx context.Context, env *steps.Env, l *look, s brokers.Space, p *steps.Plan) error {
	if k.o.Dir == "" {
		return fmt.Errorf("%w: broker %d's log dir %s must have room before it can start, and moving partition directories aside needs a quarantine on another filesystem of its host; nothing was moved. Run again with --set quarantine=DIR", steps.ErrRefused, l.id, s.Dir)
	}
	if err := logdir.Check(k.o.Dir); err != nil {
		return fmt.Errorf("%w: quarantine %q: %w; nothing was moved", steps.ErrRefused, k.o.Dir, err)
	}
	for _, d := range l.host.LogDirs {
		if k.o.Dir == d || strings.HasPrefix(k.o.Dir, d+"/") {
			return fmt.Errorf("%w: quarantine %s is inside log dir %s: a move there frees nothing; nothing was moved. Name a directory on another filesystem", steps.ErrRefused, k.o.Dir, d)
		}
	}
	q, err := brokers.ReadSpace(ctx, env.Hosts, l.id, []string{k.o.Dir})
	if err != nil || len(q) != 1 || q[0].Mount == "" {
		return fmt.Errorf("%w: quarantine %s on broker %d's host could not be read (%v); nothing was moved. Name an existing directory on another filesystem of that host", steps.ErrRefused, k.o.Dir, l.id, err)
	}
	var need int64
	for _, a := range p.Actions {
		need += a.Args.(moveArgs).Bytes // a stop has none
	}
	switch {
	case q[0].Mount == s.Mount:
		return fmt.Errorf("%w: quarantine %s is on the log dir's own filesystem (%s): a move there frees nothing; nothing was moved. Name a directory on another filesystem", steps.ErrRefused, k.o.Dir, s.Mount)
	case q[0].Avail < need:
		return fmt.Errorf("%w: quarantine %s has %s free, the moves need %s; nothing was moved", steps.ErrRefused, k.o.Dir, brokers.Bytes(q[0].Avail), brokers.Bytes(need))
	}
	p.Facts = append(p.Facts, fmt.Sprintf("quarantine %s: filesystem %s, %s free, the moves need %s", k.o.Dir, q[0].Mount, brokers.Bytes(q[0].Avail), brokers.Bytes(need)))
	return nil
}

func orNoneList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (k *quarantine) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[moveArgs](a)
		if err != nil {
			return err
		}
		do := func() error { return k.move(ctx, env, a.Broker, args) }
		switch args.Phase {
		case phaseStop:
			h, _ := env.Target.Host(a.Broker)
			do = func() error {
				if err := safeToStop(ctx, env, a.Broker); err != nil { // read again right before the stop
					return err
				}
				return roll.RunOn(ctx, env, a.Broker, h.Stop)
			}
		case phaseGone:
			do = func() error { return waitLive(ctx, env, a.Broker, false, k.o.StopTimeout) }
		}
		if err := env.Do(a, do); err != nil {
			return err
		}
	}
	return nil
}

// move moves one directory, refusing while the broker runs; a move done
// already succeeds, a destination that exists beside its source (an
// interrupted copy across filesystems) stops the run.
func (k *quarantine) move(ctx context.Context, env *steps.Env, id int32, a moveArgs) error {
	reg, err := live(ctx, env)
	if err != nil {
		return err
	}
	if slices.Contains(reg, id) {
		return fmt.Errorf("%w: broker %d serves again: kremedy moves a partition directory only while its broker is down; %s was not moved", steps.ErrRefused, id, a.From)
	}
	switch addr := roll.BrokerAddr(ctx, env, id); {
	case addr == "":
		return fmt.Errorf("%w: the inventory gives no Kafka address for broker %d, so kremedy cannot check that its port is closed (a broker starting); %s was not moved. Add addr: HOST:PORT to broker %d in the inventory, then resume", steps.ErrRefused, id, a.From, id)
	case env.Kafka.Listening(ctx, addr):
		return fmt.Errorf("%w: broker %d's Kafka port %s accepts connections: a broker starts or runs on that host though it is not registered; %s was not moved. Stop it (its stop command), then resume", steps.ErrRefused, id, addr, a.From)
	}
	script := moveFunc + fmt.Sprintf("kremedy_quarantine %s %s || exit $?\n", shell.Quote(a.From), shell.Quote(a.To))
	host := fmt.Sprintf("broker %d", id)
	return env.Hosts.Run(ctx, id, shell.Script(script), func(l ports.Line) { env.Output(host, l) })
}

// moveFunc moves one partition directory to the quarantine, on another
// filesystem (mv copies, then removes the source): refused while a
// process holds the log dir's .lock (a broker starting or running on it),
// and refused when the check cannot see every process's open files (a
// /proc/PID/fd it may not read: a login that is not root, /proc mounted
// with hidepid), since the check would then pass blind; a move done
// already is success; a destination beside its source (a copy
// interrupted) is refused for a person to compare.
const moveFunc = `kremedy_quarantine() {
  src=$1; dst=$2; lock=$(dirname -- "$src")/.lock; proc=/proc
  blind="kremedy cannot tell whether a process holds $lock (a login that is not root, or /proc mounted with hidepid); $src was not moved. Set become: sudo for this host in the inventory (or log in as root), then resume"
  if [ ! -e "$proc/1" ]; then echo "refusing: $proc/1 is hidden: $blind" >&2; return 6; fi
  for d in "$proc"/[0-9]*; do
    set -- "$d"/fd/*
    if [ ! -e "$1" ] && [ ! -L "$1" ] && ! ls -- "$d/fd/" >/dev/null 2>&1 && [ -e "$d" ]; then
      echo "refusing: cannot read $d/fd: $blind" >&2; return 6
    fi
    for h in "$@"; do
      if [ "$(readlink "$h" 2>/dev/null)" = "$lock" ]; then
        h=${h#"$proc"/}; echo "refusing: process ${h%%/*} holds $lock: a broker runs on this log dir; $src was not moved" >&2; return 5
      fi
    done
  done
  if [ ! -e "$src" ] && [ -d "$dst" ]; then echo "already moved: $src -> $dst"; return 0; fi
  if [ -e "$dst" ]; then echo "refusing: $dst exists beside $src: an earlier move was interrupted; compare them, move the partial copy aside, and resume" >&2; return 3; fi
  mkdir -p -- "$(dirname -- "$dst")" || return 1
  mv -- "$src" "$dst" || return 1
  echo "moved $src -> $dst"
}
`

// Verify: the broker's dirs have room (or it runs, and Kafka frees the
// rest itself).
func (k *quarantine) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	l, err := k.o.look(ctx, env)
	if err != nil {
		return nil, err
	}
	var checks []steps.Check
	for _, s := range l.space {
		checks = append(checks, steps.Check{Name: fmt.Sprintf("broker %d's %s has room to start", l.id, s.Dir), OK: l.up || !s.Full(),
			Detail: fmt.Sprintf("%d%% used, %s free", s.UsedPercent(), brokers.Bytes(s.Avail))})
	}
	return checks, nil
}
