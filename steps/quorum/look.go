package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/inventory/live"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// opts are every quorum-recovery kind's options.
type opts struct {
	// Fenced are lost controllers whose host does not answer, which the
	// operator says cannot come back (powered off, unit disabled).
	Fenced []int32 `opt:"fenced" type:"brokers" default:""`
	// Seed is the controller the operator chose to restart from when a
	// broker's copy is ahead of every controller's (-1: the newest copy;
	// a node id may be 0).
	Seed int `opt:"seed" default:"-1"`
	// CopyFrom is a broker whose copy, ahead of every controller's, the
	// operator chose to seed from: copied over a controller's (-1: none).
	CopyFrom     int           `opt:"copy_from" default:"-1"`
	StopTimeout  time.Duration `opt:"stop_timeout" default:"3m"`
	StartTimeout time.Duration `opt:"start_timeout" default:"3m"`
}

// voter is one entry of a static controller.quorum.voters.
type voter struct {
	ID    int32  `json:"id"`
	Entry string `json:"entry"` // id@host:port, as the config writes it
}

// ctrlView is one controller as the survey saw it.
type ctrlView struct {
	Host      ports.Host
	Reachable bool
	Err       string
	Listening bool
	Voters    string // controller.quorum.voters, as written
	// Dynamic: no controller.quorum.voters, controller.quorum.bootstrap.servers
	// set (KIP-853, kraft.version 1: the voter set is in the metadata log).
	Dynamic bool
}

// view is what every quorum-recovery kind reads first: the controllers,
// their static voter set, the quorum if one answers.
type view struct {
	Ctrls  []ctrlView
	Voters []voter
	// VotersLine is controller.quorum.voters as the controllers share it.
	VotersLine string
	// Dynamic: the quorum is dynamic; Voters are then the inventory's
	// controllers, and the backup step reads the voter set from the seed's
	// log.
	Dynamic   bool
	Quorum    *ports.Quorum
	QuorumErr string
}

// ParseVoters reads a static controller.quorum.voters (live.ParseVoters),
// keeping each entry as the config writes it (the seed's own, for its
// voter set of one).
func ParseVoters(s string) ([]voter, error) {
	vs, err := live.ParseVoters(s)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("controller.quorum.voters is empty")
	}
	out := make([]voter, len(vs))
	for i, v := range vs {
		out[i] = voter{ID: v.ID, Entry: fmt.Sprintf("%d@%s", v.ID, v.Addr)}
	}
	return out, nil
}

func voterIDs(vs []voter) []int32 {
	var ids []int32
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	return ids
}

// lookAt reads the controllers' configs over SSH, which of them listen, and
// the quorum. A refusal names the way forward.
func lookAt(ctx context.Context, env *steps.Env, o opts) (*view, error) {
	t := env.Target
	if !t.KRaft || len(t.Controllers) == 0 {
		return nil, fmt.Errorf("%w: quorum-recovery is for a KRaft cluster whose inventory names its controllers (kraft_controllers); nothing was changed", steps.ErrRefused)
	}
	for _, f := range o.Fenced {
		if _, ok := t.Controller(f); !ok {
			return nil, fmt.Errorf("%w: --set fenced=%d: the inventory has no controller %d; nothing was changed", steps.ErrRefused, f, f)
		}
	}
	v := &view{}
	for _, c := range t.Controllers {
		cv, err := readCtrl(ctx, env, c)
		if err != nil {
			return nil, err
		}
		v.Ctrls = append(v.Ctrls, cv)
	}
	for _, cv := range v.Ctrls {
		if cv.Reachable {
			continue
		}
		if !slices.Contains(o.Fenced, cv.Host.ID) {
			return nil, fmt.Errorf("%w: controller %d's host (%s) does not answer: %s. If it is gone for good, make sure it cannot start again with its old log (power it off, disable its unit) and run again with --set fenced=%d; otherwise fix SSH to it first. Nothing was changed", steps.ErrRefused, cv.Host.ID, cv.Host.On(), cv.Err, cv.Host.ID)
		}
	}
	if dyn, err := dynamicQuorum(v.Ctrls); err != nil {
		return nil, err
	} else if dyn {
		v.Dynamic = true
		for _, c := range t.Controllers {
			v.Voters = append(v.Voters, voter{ID: c.ID})
		}
		v.readQuorum(ctx, env)
		return v, nil
	}
	for _, cv := range v.Ctrls {
		if !cv.Reachable {
			continue
		}
		if v.VotersLine == "" {
			v.VotersLine = cv.Voters
		} else if cv.Voters != v.VotersLine && !slices.Contains(fenced(v, o), cv.Host.ID) {
			return nil, fmt.Errorf("%w: the controllers disagree on controller.quorum.voters (%q and %q): a recovery half-done by hand? Make them equal to the cluster's voter set and run again. Nothing was changed", steps.ErrRefused, v.VotersLine, cv.Voters)
		}
	}
	vs, err := ParseVoters(v.VotersLine)
	if err != nil {
		return nil, fmt.Errorf("%w: %v; nothing was changed", steps.ErrRefused, err)
	}
	v.Voters = vs
	var inv []int32
	for _, c := range t.Controllers {
		inv = append(inv, c.ID)
	}
	ids := voterIDs(vs)
	slices.Sort(ids)
	slices.Sort(inv)
	if !slices.Equal(ids, inv) {
		return nil, fmt.Errorf("%w: controller.quorum.voters names %v, the inventory controllers %v: make the inventory list every voter, and run again. Nothing was changed", steps.ErrRefused, ids, inv)
	}
	v.readQuorum(ctx, env)
	return v, nil
}

func (v *view) readQuorum(ctx context.Context, env *steps.Env) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if q, err := env.Kafka.Quorum(qctx, roll.ControllerAddrs(env.Target)); err != nil {
		v.QuorumErr = err.Error()
	} else {
		v.Quorum = &q
	}
}

// errHalfDone: the controllers' configs mix a static and a dynamic quorum.
var errHalfDone = errors.New("a conversion to a dynamic quorum half-done")

// dynamicQuorum reports whether the controllers that answered run a
// dynamic quorum; a mix of static and dynamic configs is refused.
func dynamicQuorum(cs []ctrlView) (bool, error) {
	var dyn, static []int32
	for _, cv := range cs {
		switch {
		case !cv.Reachable:
		case cv.Dynamic:
			dyn = append(dyn, cv.Host.ID)
		default:
			static = append(static, cv.Host.ID)
		}
	}
	if len(dyn) > 0 && len(static) > 0 {
		return false, fmt.Errorf("%w: %w: controllers %v set controller.quorum.voters (a static quorum) and %v controller.quorum.bootstrap.servers alone (a dynamic one). Make their configs agree with the quorum's kraft.version (kremedy resume of a quorum-to-dynamic run finishes it), and run again. Nothing was changed", steps.ErrRefused, errHalfDone, static, dyn)
	}
	return len(dyn) > 0, nil
}

// readCtrl reads one controller's config over SSH: whether its host
// answers, its static voter set or that it is dynamic, whether it listens.
func readCtrl(ctx context.Context, env *steps.Env, c ports.Host) (ctrlView, error) {
	cv := ctrlView{Host: c}
	if env.Target.Combined(c.ID) {
		return cv, fmt.Errorf("%w: controller %d is a combined node (process.roles=broker,controller): quorum-recovery does not yet recover a combined quorum. The manual procedure is in docs/quorum-recovery.md; nothing was changed", steps.ErrRefused, c.ID)
	}
	if c.Config == "" {
		return cv, fmt.Errorf("%w: the inventory names no config file for controller %d (config:): quorum-recovery reads its controller.quorum.voters and metadata dir there; add it and run again. Nothing was changed", steps.ErrRefused, c.ID)
	}
	b, err := brokers.ReadFile(ctx, env.Hosts, c.ID, c.Config)
	if err != nil {
		cv.Err = err.Error()
		return cv, nil
	}
	cv.Reachable = true
	p, err := javaprops.Parse(b)
	if err != nil {
		return cv, fmt.Errorf("%w: controller %d's %s: %v; nothing was changed", steps.ErrRefused, c.ID, c.Config, err)
	}
	line, _ := p.Get("controller.quorum.voters")
	cv.Voters = strings.TrimSpace(line)
	if cv.Voters == "" {
		bs, ok := p.Get("controller.quorum.bootstrap.servers")
		if !ok || strings.TrimSpace(bs) == "" {
			return cv, fmt.Errorf("%w: controller %d's %s sets neither controller.quorum.voters nor controller.quorum.bootstrap.servers; nothing was changed", steps.ErrRefused, c.ID, c.Config)
		}
		cv.Dynamic = true
	}
	cv.Listening = env.Kafka.Listening(ctx, c.Addr)
	return cv, nil
}

// fenced are the controllers the run leaves out: those the operator named
// fenced whose host does not answer.
func fenced(v *view, o opts) []int32 {
	var out []int32
	for _, c := range v.Ctrls {
		if !c.Reachable && slices.Contains(o.Fenced, c.Host.ID) {
			out = append(out, c.Host.ID)
		}
	}
	return out
}

// serving reports whether the quorum has a leader with a majority of its
// voters caught up: nothing to recover.
func (v *view) serving() (bool, string) {
	if v.Quorum == nil {
		return false, "no controller answered DescribeQuorum: " + v.QuorumErr
	}
	q := *v.Quorum
	if q.Leader < 0 {
		return false, "the quorum has no leader"
	}
	lag := brokers.Lagging(q, 2*time.Second)
	up := len(q.Voters) - len(lag)
	if up >= len(v.Voters)/2+1 {
		return true, fmt.Sprintf("controller %d leads epoch %d with %d of %d voters caught up", q.Leader, q.Epoch, up, len(v.Voters))
	}
	return false, fmt.Sprintf("controller %d keeps the title of leader (epoch %d) with %d of %d voters caught up, fewer than a majority", q.Leader, q.Epoch, up, len(v.Voters))
}
