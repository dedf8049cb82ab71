package quorum

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// phaseKey keeps the last phase of the rewrite that ended: a resumed run
// plans only the phases after it. Within a phase every action checks what
// is already done before it acts.
const phaseKey = "quorum/phase"

// The rewrite's phases, in order.
const (
	phaseSeed    = "seed"    // the seed started alone and leading
	phaseAside   = "aside"   // brokers whose copies are beyond the seed stopped, their copies moved aside
	phaseRejoin  = "rejoin"  // every other controller back empty, caught up
	phaseRestart = "restart" // the seed restarted with the full voter set
	phaseJoin    = "join"    // the other voters back empty, one at a time, into a serving quorum
	phaseBrokers = "brokers" // the brokers stopped in phaseAside started
)

// The brokers whose copies diverge are stopped once the seed leads, not
// before: a KRaft broker's SIGTERM waits up to 5 minutes for the active
// controller to approve its controlled shutdown (BrokerServer.shutdown),
// and there is none until the seed leads. Leading, it approves at once (or
// the broker, fetching a log that diverges below its high watermark, stops
// by itself).
var phases = []string{phaseSeed, phaseAside, phaseRejoin, phaseRestart, phaseJoin, phaseBrokers}

// rwArgs are every rewrite action's arguments: the phase it belongs to,
// the node it acts on, what it does.
type rwArgs struct {
	Phase string `json:"phase"`
	Node  int32  `json:"node"`
	Do    string `json:"do"`
	// Path, Backup, From, To: a file written (sha256 of what it was and
	// of what it becomes; From "" for a new file).
	Path   string `json:"path,omitempty"`
	Backup string `json:"backup,omitempty"`
	From   string `json:"from_sha256,omitempty"`
	To     string `json:"to_sha256,omitempty"`
	// Content is a file's new content when it holds no secret (a
	// quorum-state, a meta.properties); a config file's is computed again
	// at the action from the file and checked against To.
	Content string `json:"content,omitempty"`
	// Voters: a config edit's new controller.quorum.voters.
	Voters string `json:"voters,omitempty"`
	// Dir, Aside: a copy moved aside.
	Dir   string `json:"dir,omitempty"`
	Aside string `json:"aside,omitempty"`
	// Want: the voters a quorum wait wants caught up with a leader.
	Want []int32 `json:"want,omitempty"`
	// Size, Bytes: records appended to a segment of Size bytes (Bytes
	// base64: KRaftVoters control batches, no secret), To their sha256.
	Size  int64  `json:"size,omitempty"`
	Bytes string `json:"bytes,omitempty"`
}

const (
	doStop     = "stop"
	doGone     = "gone"
	doStart    = "start"
	doBack     = "back"
	doAside    = "aside"
	doFile     = "file"
	doVoters   = "voters"
	doLeads    = "leads"
	doCaughtUp = "caught-up"
	doQuorum   = "quorum"
	doSafe     = "safe"
	doAlone    = "alone"
	doJoinSafe = "join-safe"
	doAppend   = "append-voters"
	doObserve  = "observer-safe"
	doAddVoter = "add-voter"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var votersLine = regexp.MustCompile(`(?m)^([ \t]*controller\.quorum\.voters[ \t]*[=:][ \t]*).*$`)

// withVoters is a config's text with controller.quorum.voters set to
// voters, every other byte as it was.
func withVoters(cfg []byte, voters string) ([]byte, error) {
	m := votersLine.FindAll(cfg, -1)
	if len(m) != 1 {
		return nil, fmt.Errorf("the config sets controller.quorum.voters %d times, not once", len(m))
	}
	if strings.HasSuffix(strings.TrimRight(string(m[0]), " \t\r"), "\\") {
		return nil, fmt.Errorf("its controller.quorum.voters line goes on over the next line (a trailing \\): make it one line, then run again")
	}
	return votersLine.ReplaceAll(cfg, []byte("${1}"+strings.ReplaceAll(voters, "$", "$$"))), nil
}

// rewrite is quorum-rewrite: the one irreversible step.
type rewrite struct{ o opts }

func (k *rewrite) recovery(env *steps.Env) (Recovery, error) {
	var r Recovery
	ok, err := env.Load(stateKey, &r)
	if err != nil {
		return r, err
	}
	if !ok {
		return r, fmt.Errorf("%w: the backup step has not saved the copies it read and the seed (run it first: it is the step before). Nothing was changed", steps.ErrRefused)
	}
	return r, nil
}

func (r Recovery) copyOf(node int32) Copy {
	for _, c := range r.Copies {
		if c.Node == node {
			return c
		}
	}
	return Copy{Node: node}
}

// others are the voters besides the seed that come back (not fenced), in
// id order.
func (r Recovery) others() []int32 {
	var out []int32
	for _, v := range r.Voters {
		if v.ID != r.Seed.Node && !slices.Contains(r.Fenced, v.ID) {
			out = append(out, v.ID)
		}
	}
	slices.Sort(out)
	return out
}

func (r Recovery) seedEntry() string {
	for _, v := range r.Voters {
		if v.ID == r.Seed.Node {
			return v.Entry
		}
	}
	return ""
}

// ledgerLines are what the copies beyond the seed hold past its end.
func (r Recovery) ledgerLines(runDir string) (lines, lost []string) {
	// Copies that hold the same records beyond the seed (every broker
	// fetched the same tail) are listed once, with every node that holds
	// them.
	type group struct {
		roles []string
		head  string
		body  []string
	}
	var groups []*group
	for _, c := range r.Copies {
		if !slices.Contains(r.Beyond, c.Node) {
			continue
		}
		d := ledgerDir(runDir, c.Node)
		l := ReadLedger(c, d, r.Seed.End)
		body := l.Lines()
		if len(body) > 0 {
			body = body[1:] // its first line names the copy: the group's head does
		}
		if b, err := os.ReadFile(filepath.Join(d, "NOT-FETCHED")); err == nil {
			body = append(body, "not decoded: "+strings.TrimSpace(string(b)))
		}
		if l.Err != "" {
			body = append(body, "not decoded: "+l.Err)
		}
		head := fmt.Sprintf("offsets %d to %d beyond the seed's end (last epoch %d)", r.Seed.End, c.End-1, c.Epoch)
		i := slices.IndexFunc(groups, func(g *group) bool { return g.head == head && slices.Equal(g.body, body) })
		if i < 0 {
			groups = append(groups, &group{head: head, body: body})
			i = len(groups) - 1
		}
		groups[i].roles = append(groups[i].roles, c.Role())
		for _, t := range l.TopicsCreated() {
			if !slices.Contains(lost, t) {
				lost = append(lost, t)
			}
		}
	}
	for _, g := range groups {
		lines = append(lines, fmt.Sprintf("%s: %s", strings.Join(g.roles, ", "), g.head))
		for _, b := range g.body {
			lines = append(lines, "  "+b)
		}
	}
	return lines, lost
}

// LostKey keeps the topics the ledger shows created beyond the seed: the
// verification and the report name them for stray-cleanup.
const LostKey = "quorum/lost-topics"

func (k *rewrite) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	r, err := k.recovery(env)
	preview := false
	if errors.Is(err, steps.ErrRefused) && env.Preview() {
		// `kremedy plan`: the backup step has not run; the copies as they
		// stand give the shape of this step, never its ledger.
		rp, perr := (&backup{o: k.o}).read(ctx, env)
		if perr != nil {
			return nil, perr
		}
		r, err, preview = *rp, nil, true
	}
	if err != nil {
		return nil, err
	}
	pl, err := newPlanner(ctx, env, r)
	if err != nil {
		return nil, err
	}
	if err := pl.header(preview); err != nil {
		return nil, err
	}
	if err := pl.seedPhase(); err != nil {
		return nil, err
	}
	pl.asidePhase()
	if r.Dynamic {
		err = planDynamicJoin(pl.add, pl.back, r, pl.seedHost)
	} else {
		err = pl.staticJoin()
	}
	if err != nil {
		return nil, err
	}
	pl.brokersPhase()
	pl.footer()
	return pl.p, nil
}

// metaFor is the seed's meta.properties for node id: its node.id, a new
// directory.id (never the lost disk's: a directory id names one disk).
func metaFor(seed []byte, id int32) ([]byte, error) {
	nodeRe := regexp.MustCompile(`(?m)^node\.id=.*$`)
	if !nodeRe.Match(seed) {
		return nil, fmt.Errorf("the seed's meta.properties has no node.id line: %q", seed)
	}
	out := nodeRe.ReplaceAll(seed, []byte(fmt.Sprintf("node.id=%d", id)))
	dirRe := regexp.MustCompile(`(?m)^directory\.id=.*$`)
	if dirRe.Match(out) {
		raw := make([]byte, 16)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		out = dirRe.ReplaceAll(out, []byte("directory.id="+base64.RawURLEncoding.EncodeToString(raw)))
	}
	return out, nil
}

func (k *rewrite) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	r, err := k.recovery(env)
	if err != nil {
		return err
	}
	var lf ledgerFact
	if _, err := env.Load(ledgerKey, &lf); err != nil {
		return err
	}
	ledger, lost := lf.Lines, lf.Lost
	if len(lost) > 0 {
		if err := env.Save(LostKey, lost); err != nil {
			return err
		}
	}
	if len(ledger) == 0 {
		ledger = []string{fmt.Sprintf("nothing: no copy held a record beyond the seed's end (%s, offset %d, epoch %d)", r.Seed.Role(), r.Seed.End, r.Seed.Epoch)}
	}
	if err := env.Save(steps.ReportKey+"What the quorum recovery discarded", ledger); err != nil {
		return err
	}
	last := ""
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[rwArgs](a)
		if err != nil {
			return err
		}
		if last != "" && args.Phase != last {
			if err := env.Save(phaseKey, last); err != nil {
				return err
			}
		}
		last = args.Phase
		if err := env.CheckLease(ctx); err != nil {
			return err
		}
		if err := k.act(ctx, env, r, a, args); err != nil {
			return err
		}
	}
	if last != "" {
		return env.Save(phaseKey, last)
	}
	return nil
}

func (k *rewrite) act(ctx context.Context, env *steps.Env, r Recovery, a steps.Action, args rwArgs) error {
	h := env.Target.Node(args.Node)
	_, isCtrl := env.Target.Controller(args.Node)
	return env.Do(a, func() error {
		switch args.Do {
		case doStop:
			cctx, cancel := context.WithTimeout(ctx, k.o.StopTimeout)
			defer cancel()
			return roll.RunOn(cctx, env, args.Node, h.Stop)
		case doStart:
			return startOnce(ctx, env, args.Node, h, k.o.StartTimeout)
		case doGone:
			return roll.WaitListening(ctx, env, h, false, k.o.StopTimeout)
		case doBack:
			return roll.WaitListening(ctx, env, h, true, k.o.StartTimeout)
		case doAside:
			if !isCtrl && h.Addr != "" && env.Kafka.Listening(ctx, h.Addr) {
				return fmt.Errorf("%w: broker %d still listens on %s after its stop command: its copy is moved aside only while it is down. Stop it (its stop command, or kill it), then resume", steps.ErrRefused, args.Node, h.Addr)
			}
			running := isCtrl && env.Kafka.Listening(ctx, h.Addr)
			err := env.Hosts.Run(ctx, args.Node, asideScript(args.Dir, args.Aside, running), func(l ports.Line) { env.Output(a.Target, l) })
			if code, ok := brokers.ExitStatus(err); ok && code == 5 {
				return fmt.Errorf("%w: controller %d runs with its old metadata log (%s was never moved aside): started by hand? It must not take part in the new quorum with the old timeline. Stop it, then resume: its copy is moved aside and it comes back empty", steps.ErrRefused, args.Node, args.Dir)
			}
			return err
		case doFile:
			if args.Path == path.Join(r.Seed.Dir, "quorum-state") {
				why, err := seedStarted(ctx, env, r, h, args.From != "")
				if err != nil {
					return err
				}
				if why != "" {
					env.Logf("the seed's quorum-state is not written again: %s", why)
					return nil
				}
			}
			if args.From == "" && args.Dir != "" {
				if err := env.Hosts.Run(ctx, args.Node, mkdirScript(args.Dir), func(l ports.Line) { env.Output(a.Target, l) }); err != nil {
					return err
				}
			}
			return editErr(env.Hosts.RunInput(ctx, args.Node, brokers.EditScript(args.Path, args.Backup, args.From, args.To), []byte(args.Content), func(l ports.Line) { env.Output(a.Target, l) }), args)
		default:
			return k.actQuorum(ctx, env, r, a, args, h)
		}
	})
}

// actQuorum runs the actions that read or rewrite the quorum itself (the
// seed's voters, the rules before a start, the waits for a leader).
func (k *rewrite) actQuorum(ctx context.Context, env *steps.Env, r Recovery, a steps.Action, args rwArgs, h ports.Host) error {
	switch args.Do {
	case doSafe, doAlone, doJoinSafe:
		return k.rule(ctx, env, r, args)
	case doVoters:
		cfg, err := brokers.ReadFile(ctx, env.Hosts, args.Node, args.Path)
		if err != nil {
			return err
		}
		if digest(cfg) == args.To {
			env.Logf("%s already sets controller.quorum.voters=%s", args.Path, args.Voters)
			return nil
		}
		text, err := withVoters(cfg, args.Voters)
		if err != nil {
			return err
		}
		if digest(text) != args.To {
			return fmt.Errorf("%w: %s on controller %d changed since the plan (more than its voters): nothing was written", steps.ErrStalePlan, args.Path, args.Node)
		}
		return editErr(env.Hosts.RunInput(ctx, args.Node, brokers.EditScript(args.Path, args.Backup, args.From, args.To), text, func(l ports.Line) { env.Output(a.Target, l) }), args)
	case doLeads:
		return roll.WaitFor(ctx, env, k.o.StartTimeout, fmt.Sprintf("controller %d to lead", args.Node), func() (bool, string) {
			q, err := env.Kafka.Quorum(ctx, []string{h.Addr})
			if err != nil {
				return false, err.Error()
			}
			return q.Leader == args.Node, fmt.Sprintf("leader %d, epoch %d, high watermark %d", q.Leader, q.Epoch, q.HighWatermark)
		})
	case doCaughtUp:
		seed, _ := env.Target.Controller(r.Seed.Node)
		return roll.WaitFor(ctx, env, k.o.StartTimeout, fmt.Sprintf("controller %d to fetch the seed's log", args.Node), func() (bool, string) {
			q, err := env.Kafka.Quorum(ctx, []string{seed.Addr})
			if err != nil {
				return false, err.Error()
			}
			for _, v := range append(slices.Clone(q.Voters), q.Observers...) {
				if v.ID == args.Node {
					return v.LogEndOffset >= r.Seed.End && v.LogEndOffset >= q.HighWatermark, fmt.Sprintf("its log end %d, the seed's high watermark %d", v.LogEndOffset, q.HighWatermark)
				}
			}
			return false, fmt.Sprintf("not fetching yet (high watermark %d)", q.HighWatermark)
		})
	case doQuorum:
		want := args.Want
		if len(want) == 0 {
			want = append([]int32{r.Seed.Node}, r.others()...)
		}
		return roll.WaitFor(ctx, env, k.o.StartTimeout, "the KRaft quorum", func() (bool, string) { return quorumBack(ctx, env, want) })
	case doAppend, doObserve, doAddVoter:
		return actDynamic(ctx, env, r, a, args)
	}
	return fmt.Errorf("action %s: nothing to do for %q", a.ID, args.Do)
}

// rule checks, right before a start, the rule it names: the seed alone
// (doAlone), an empty voter's start or the seed's restart (doSafe), an
// empty voter joining a serving quorum (doJoinSafe).
func (k *rewrite) rule(ctx context.Context, env *steps.Env, r Recovery, args rwArgs) error {
	switch args.Do {
	case doSafe:
		if args.Node == r.Seed.Node {
			// The seed's restart: only who runs counts.
			rj := Rejoin{Voters: voterIDs(r.Voters), Seed: r.Seed.Node, Running: listening(ctx, env)}
			if why := rj.StopSeedRisk(); why != "" {
				return fmt.Errorf("%w: %s. The seed was not restarted: resume once it holds", steps.ErrRefused, why)
			}
			env.Logf("safe: running %v, fewer than a majority of the voters besides the seed", rj.Running)
			return nil
		}
		rj, err := liveRejoin(ctx, env, r)
		if err != nil {
			return err
		}
		why := rj.StartRisk(args.Node)
		if why != "" {
			return fmt.Errorf("%w: %s. Nothing was started; the quorum is as it was: resume once it holds", steps.ErrRefused, why)
		}
		env.Logf("safe: the seed leads; running %v, holding the seed's log %v", rj.Running, rj.Holding)
		return nil
	case doAlone:
		var others []int32
		for _, id := range listening(ctx, env) {
			if id != r.Seed.Node {
				others = append(others, id)
			}
		}
		if len(others) > 0 {
			return fmt.Errorf("%w: controllers %v run: the seed starts alone only while no other voter runs (one brought back by its service manager or by hand could lead the old timeline beside it). Stop them (and disable what restarts them), then resume. Nothing was changed", steps.ErrRefused, others)
		}
		return nil
	case doJoinSafe:
		// The quorum serves: a leader and a majority of the full voter
		// set caught up. An empty voter started now joins as a
		// follower; it cannot help elect a leader without the log.
		q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
		if err != nil || q.Leader < 0 {
			return fmt.Errorf("%w: the quorum has no leader now (%v): controller %d is not started empty without one. Resume once it has", steps.ErrRefused, err, args.Node)
		}
		lag := brokers.Lagging(q, 2*time.Second)
		up := 0
		for _, v := range q.Voters {
			if lag[v.ID] == "" && v.ID != args.Node {
				up++
			}
		}
		if up < len(r.Voters)/2+1 {
			return fmt.Errorf("%w: %d of the %d voters are caught up with leader %d, fewer than a majority: controller %d is not started empty now. Resume once they are", steps.ErrRefused, up, len(r.Voters), q.Leader, args.Node)
		}
		env.Logf("safe: leader %d, %d of %d voters caught up", q.Leader, up, len(r.Voters))
		return nil
	}
	return fmt.Errorf("no rule %q", args.Do)
}

// quorumBack: a leader, and every voter of want caught up with it.
func quorumBack(ctx context.Context, env *steps.Env, want []int32) (bool, string) {
	q, err := env.Kafka.Quorum(ctx, roll.ControllerAddrs(env.Target))
	if err != nil {
		return false, err.Error()
	}
	if q.Leader < 0 {
		return false, "no leader"
	}
	lag := brokers.Lagging(q, 2*time.Second)
	var missing []string
	for _, id := range want {
		in := false
		for _, v := range q.Voters {
			in = in || v.ID == id
		}
		switch {
		case !in:
			missing = append(missing, fmt.Sprintf("%d not a voter", id))
		case lag[id] != "":
			missing = append(missing, fmt.Sprintf("%d %s", id, lag[id]))
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("leader %d, epoch %d: %s", q.Leader, q.Epoch, strings.Join(missing, "; "))
	}
	return true, fmt.Sprintf("leader %d, epoch %d, %d voters caught up", q.Leader, q.Epoch, len(q.Voters))
}

// seedStarted says why the seed's quorum-state must not be written again:
// it runs, or its quorum-state is past the epoch the plan writes (it has
// led since).
// A quorum-state that the plan saw (existed) but that cannot be read now
// is an error, never a write at a possibly lower epoch.
func seedStarted(ctx context.Context, env *steps.Env, r Recovery, h ports.Host, existed bool) (string, error) {
	if env.Kafka.Listening(ctx, h.Addr) {
		return fmt.Sprintf("controller %d runs", h.ID), nil
	}
	f := path.Join(r.Seed.Dir, "quorum-state")
	b, err := brokers.ReadFile(ctx, env.Hosts, h.ID, f)
	if err != nil {
		if !existed {
			return "", nil
		}
		return "", fmt.Errorf("the seed's %s cannot be read (%v): it is not written blind (it may hold a later epoch). Resume once it can be read", f, err)
	}
	e, err := StateEpoch(b)
	if err != nil {
		return "", fmt.Errorf("the seed's %s: %w; not written blind", f, err)
	}
	if e > r.StateEpoch {
		return fmt.Sprintf("its quorum-state holds epoch %d, past the %d written: it has led since", e, r.StateEpoch), nil
	}
	return "", nil
}

// liveRejoin is quorum.Rejoin as the cluster stands: which voters listen,
// whether the seed leads (asked at the seed), which hold its log.
func liveRejoin(ctx context.Context, env *steps.Env, r Recovery) (Rejoin, error) {
	rj := Rejoin{Voters: voterIDs(r.Voters), Seed: r.Seed.Node, Running: listening(ctx, env)}
	seed, _ := env.Target.Controller(r.Seed.Node)
	q, err := env.Kafka.Quorum(ctx, []string{seed.Addr})
	if err != nil {
		return rj, fmt.Errorf("%w: the seed (controller %d) does not answer DescribeQuorum: %v. Nothing was started; resume once it leads", steps.ErrRefused, r.Seed.Node, err)
	}
	rj.SeedLeads = q.Leader == r.Seed.Node
	// Holding the seed's log is holding it up to the seed's end: what the
	// lost quorum committed. Not up to the high watermark of this read: the
	// seed leading alone commits a NoOp every 500 ms, and an observer that
	// fetched to the end a moment ago is a few records behind it again
	// (seen on the lab: a voter that had caught up counted as lacking).
	for _, v := range append(slices.Clone(q.Voters), q.Observers...) {
		if v.ID == r.Seed.Node || v.LogEndOffset >= r.Seed.End {
			rj.Holding = append(rj.Holding, v.ID)
		}
	}
	return rj, nil
}

// listening are the controllers whose port is open.
func listening(ctx context.Context, env *steps.Env) []int32 {
	var out []int32
	for _, c := range env.Target.Controllers {
		if env.Kafka.Listening(ctx, c.Addr) {
			out = append(out, c.ID)
		}
	}
	return out
}

// startOnce runs node id's start command unless it listens already (an
// earlier attempt started it), bounded by timeout.
func startOnce(ctx context.Context, env *steps.Env, id int32, h ports.Host, timeout time.Duration) error {
	if h.Addr != "" && env.Kafka.Listening(ctx, h.Addr) {
		env.Logf("node %d listens already (an earlier attempt started it): not started again", id)
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return roll.RunOn(cctx, env, id, h.Start)
}

// mkdirScript makes dir (a lost disk's metadata dir) owned as its parent.
func mkdirScript(dir string) string {
	return shell.Script(fmt.Sprintf(`set -eu
d=%s
if [ ! -d "$d" ]; then mkdir -p -- "$d"; chown --reference="$(dirname -- "$d")" -- "$d" 2>/dev/null || true; echo "made $d"; fi`, shell.Quote(dir)))
}

// asideScript moves a copy aside unless it was already; on a node that
// runs (a resumed run that started it) it only checks that it was: exit 5
// when it was not (the node runs its old log).
func asideScript(dir, aside string, running bool) string {
	return shell.Script(fmt.Sprintf(`set -eu
d=%s; a=%s; running=%t
if [ -e "$a" ]; then echo "$a is there already: $d was moved aside before"; exit 0; fi
if [ ! -e "$d" ]; then echo "no $d: nothing to move aside"; exit 0; fi
if [ "$running" = true ]; then echo "$d is in use by a running node and was never moved aside" >&2; exit 5; fi
mv -- "$d" "$a"
echo "moved $d aside to $a"`, shell.Quote(dir), shell.Quote(aside), running))
}

// editErr names EditScript's exits.
func editErr(err error, a rwArgs) error {
	if code, ok := brokers.ExitStatus(err); ok && code == 3 {
		return fmt.Errorf("%w: %s on node %d changed since the plan; nothing was written", steps.ErrStalePlan, a.Path, a.Node)
	}
	if code, ok := brokers.ExitStatus(err); ok && code == 4 {
		return fmt.Errorf("the new %s did not reach node %d whole; nothing was written: resume: %w", a.Path, a.Node, err)
	}
	return err
}

func (k *rewrite) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	r, err := k.recovery(env)
	if err != nil {
		return nil, err
	}
	want := append([]int32{r.Seed.Node}, r.others()...)
	ok, detail := quorumBack(ctx, env, want)
	return []steps.Check{{Name: "the quorum has a leader and every voter back, caught up", OK: ok, Detail: detail}}, nil
}
