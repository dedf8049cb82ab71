package quorum

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
)

// quorum-to-dynamic: a static quorum made dynamic (KIP-853) on Kafka 4.1+.
// kraft.version is raised to 1 — the leader writes the voter set, each
// voter named by the directory id it fetches with, into the log — and
// every node's controller.quorum.voters becomes
// controller.quorum.bootstrap.servers; the runbook then rolls the
// controllers and the brokers (kraft-rolling-restart's kind) so that each
// has started on its new config before the run ends. The upgrade cannot
// be undone (Kafka has no kraft.version downgrade): its gate is typed.

// kraftVersion is the feature whose level 1 is a dynamic quorum.
const kraftVersion = "kraft.version"

// metadataVersion41 is metadata.version 4.1-IV0's feature level: a
// release that supports it is 4.1 or later.
const metadataVersion41 = 26

// convertArgs: a config's controller.quorum.voters line turned into
// controller.quorum.bootstrap.servers (sha256 of the file before and
// after: a config may hold secrets, its text is never in the plan).
type convertArgs struct {
	Node      int32  `json:"node"`
	Path      string `json:"path"`
	Backup    string `json:"backup"`
	From      string `json:"from_sha256"`
	To        string `json:"to_sha256"`
	Bootstrap string `json:"bootstrap"`
}

// RegisterConvert adds quorum-to-dynamic's own kinds to r.
func RegisterConvert(r *steps.Registry) {
	steps.Register(r, "quorum-dynamic-survey", nil, func(o replaceOpts) steps.Kind { return &convertSurvey{} })
	steps.Register(r, "quorum-dynamic-upgrade", nil, func(o replaceOpts) steps.Kind { return &convertUpgrade{} })
	steps.Register(r, "quorum-dynamic-configs", nil, func(o replaceOpts) steps.Kind { return &convertConfigs{} })
}

// bootstrapOf is controller.quorum.bootstrap.servers for a static voter
// set: each voter's host:port, in its order.
func bootstrapOf(vs []voter) string {
	var hp []string
	for _, v := range vs {
		_, addr, _ := strings.Cut(v.Entry, "@")
		hp = append(hp, addr)
	}
	return strings.Join(hp, ",")
}

// kraftLevel is the finalized kraft.version the brokers report, and
// whether every broker that answered supports level 1.
func kraftLevel(ctx context.Context, env *steps.Env) (level int16, supported bool, err error) {
	var ids []int32
	for _, h := range env.Target.Hosts {
		ids = append(ids, h.ID)
	}
	f, err := env.Kafka.Features(ctx, ids)
	if err != nil {
		return 0, false, err
	}
	supported = len(f.Supported) > 0
	for _, sup := range f.Supported {
		// 3.9 supports kraft.version 1 for a quorum formatted dynamic,
		// but upgrades a static one only from 4.1 (KAFKA-16538): a
		// release that supports metadata.version 4.1-IV0 (level 26,
		// server-common MetadataVersion) or later.
		if r, ok := sup[kraftVersion]; !ok || r[1] < 1 || sup["metadata.version"][1] < metadataVersion41 {
			supported = false
		}
	}
	return f.Finalized[kraftVersion], supported, nil
}

// convertSurvey is quorum-dynamic-survey: read-only.
type convertSurvey struct{}

func (k *convertSurvey) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	v, err := lookAt(ctx, env, opts{})
	if err != nil {
		return nil, err
	}
	level, supported, err := kraftLevel(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("%w: the features could not be read from the brokers (%v); nothing was changed", steps.ErrRefused, err)
	}
	p := &steps.Plan{Summary: "survey the quorum, its kind and the release's support for a dynamic quorum (changes nothing)"}
	if v.Dynamic || level >= 1 {
		if v.Dynamic {
			p.NoOp, p.EndsRun = true, true
			p.Summary = fmt.Sprintf("the quorum is dynamic already (kraft.version %d, controller.quorum.bootstrap.servers): nothing to convert", level)
			return p, nil
		}
		p.Facts = append(p.Facts, fmt.Sprintf("kraft.version is %d already: the upgrade is done; the configs and the rolls are left", level))
	}
	if !supported && level < 1 {
		return nil, fmt.Errorf("%w: not every broker runs Kafka 4.1 or later, the first release that turns a static quorum dynamic (kraft.version 1; kafka-features.sh describe shows each node's ranges): upgrade every node's release first. Nothing was changed", steps.ErrRefused)
	}
	if ok, why := quorumBack(ctx, env, voterIDs(v.Voters)); !ok {
		return nil, fmt.Errorf("%w: the quorum is not whole (%s): every voter must be caught up with a leader before its voter set is written into the log. Nothing was changed", steps.ErrRefused, why)
	}
	if _, _, problems := configEdits(ctx, env, bootstrapOf(v.Voters)); len(problems) > 0 {
		return nil, fmt.Errorf("%w: every node's config is converted after the upgrade, which cannot be undone, so each is read now: %s. Fix each file (one controller.quorum.voters line, not continued with a backslash, and no controller.quorum.bootstrap.servers beside it) or SSH to its host, and run again. Nothing was changed", steps.ErrRefused, strings.Join(problems, "; "))
	}
	q, _ := leaderQuorum(ctx, env)
	for _, vo := range q.Voters {
		p.Facts = append(p.Facts, fmt.Sprintf("voter %d: directory %s, log end %d", vo.ID, cmpOr(vo.DirID, "not reported (a static quorum names none; the upgrade writes each voter's)"), vo.LogEndOffset))
	}
	p.Facts = append(p.Facts, "static voter set: "+v.VotersLine, "controller.quorum.bootstrap.servers will be: "+bootstrapOf(v.Voters))
	return p, nil
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func (k *convertSurvey) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *convertSurvey) Verify(context.Context, *steps.Env) ([]steps.Check, error) {
	return []steps.Check{{Name: "surveyed", OK: true}}, nil
}

// convertUpgrade is quorum-dynamic-upgrade: kraft.version raised to 1.
type convertUpgrade struct{}

func (k *convertUpgrade) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	level, _, err := kraftLevel(ctx, env)
	if err != nil {
		return nil, err
	}
	if level >= 1 {
		return &steps.Plan{NoOp: true, Summary: fmt.Sprintf("kraft.version is %d: the quorum's voter set is in the log already", level)}, nil
	}
	p := &steps.Plan{Summary: "raise kraft.version to 1: the leader writes the voter set, with each voter's directory id, into the metadata log — the quorum is dynamic from then on, for good"}
	p.Notes = append(p.Notes, "WHAT THIS CANNOT UNDO: Kafka has no kraft.version downgrade. From now on the voter set lives in the metadata log: controller.quorum.voters no longer decides it, voters are added and removed with kafka-metadata-quorum.sh add-controller / remove-controller (kremedy run controller-replace), and a lost quorum's recovery writes records into the log (kremedy run quorum-recovery handles both kinds)")
	p.Actions = []steps.Action{
		{ID: "upgrade", Op: steps.OpKafka, Target: "the quorum's leader", Detail: "UpdateFeatures kraft.version=1 (what kafka-features.sh upgrade --feature kraft.version=1 sends)"},
		{ID: "written", Op: steps.OpWait, Target: "the KRaft quorum", Detail: "kraft.version 1 finalized, and every voter named with its directory id"},
	}
	return p, nil
}

func (k *convertUpgrade) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	if err := env.Do(p.Actions[0], func() error {
		q, err := leaderQuorum(ctx, env)
		if err != nil {
			return fmt.Errorf("%w: the quorum has no leader now (%v): nothing was changed. Resume once it has", steps.ErrRefused, err)
		}
		if ok, why := quorumBack(ctx, env, voterIDsOf(q.Voters)); !ok {
			return fmt.Errorf("%w: read right before the upgrade, the quorum is not whole (%s): nothing was changed. Resume once every voter is caught up", steps.ErrRefused, why)
		}
		lh, _ := env.Target.Controller(q.Leader)
		return upgradeWhenVotersReported(ctx, env, lh.Addr)
	}); err != nil {
		return err
	}
	return env.Do(p.Actions[1], func() error {
		return roll.WaitFor(ctx, env, 2*time.Minute, "kraft.version 1 and every voter's directory id", func() (bool, string) {
			level, _, err := kraftLevel(ctx, env)
			if err != nil {
				return false, err.Error()
			}
			q, err := leaderQuorum(ctx, env)
			if err != nil {
				return false, err.Error()
			}
			missing := slices.ContainsFunc(q.Voters, func(v ports.Voter) bool { return v.DirID == "" })
			return level >= 1 && !missing, fmt.Sprintf("kraft.version %d; voters %+v", level, q.Voters)
		})
	})
}

// votersReportWait bounds how long the upgrade waits for the leader to
// have heard every voter's supported kraft.version.
const votersReportWait = 2 * time.Minute

// upgradeWhenVotersReported sends the upgrade, again while the leader
// answers that not every voter supports it: a voter of a static quorum
// reports its supported kraft.version to the leader (UpdateRaftVoter) a
// while after it starts following — on the 4.1.2 lab, an upgrade sent
// seconds after the quorum formed was refused, one sent half a minute
// later accepted. Any other error ends it.
func upgradeWhenVotersReported(ctx context.Context, env *steps.Env, addr string) error {
	deadline := env.Now().Add(votersReportWait)
	for {
		err := env.Kafka.UpgradeFeature(ctx, addr, kraftVersion, 1)
		if err == nil || !strings.Contains(err.Error(), "not all of the voters support it") {
			return err
		}
		if env.Now().After(deadline) {
			return fmt.Errorf("%w: for %s the leader has answered that not every voter supports kraft.version 1 (%v): is every controller on Kafka 4.1 or later? kafka-features.sh --bootstrap-controller %s describe shows each one's range. Nothing was changed; resume once they are", steps.ErrRefused, votersReportWait, err, addr)
		}
		env.Logf("the leader has not heard every voter's supported kraft.version yet (each voter reports it with UpdateRaftVoter a while after it follows): asking again in 5s")
		if err := env.Sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

func (k *convertUpgrade) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	level, _, err := kraftLevel(ctx, env)
	if err != nil {
		return nil, err
	}
	return []steps.Check{{Name: "kraft.version 1 finalized", OK: level >= 1, Detail: fmt.Sprintf("kraft.version %d", level)}}, nil
}

// convertConfigs is quorum-dynamic-configs: every node's
// controller.quorum.voters turned into controller.quorum.bootstrap.servers.
type convertConfigs struct{}

var bootstrapLine = regexp.MustCompile(`(?m)^[ \t]*controller\.quorum\.bootstrap\.servers[ \t]*[=:]`)

// withBootstrap is cfg with its controller.quorum.voters line replaced by
// controller.quorum.bootstrap.servers=bootstrap, whatever separator and
// spaces the line had. Refused: a line continued with a backslash (as
// withVoters refuses), the key set twice, or the bootstrap servers set
// beside it already.
func withBootstrap(cfg []byte, bootstrap string) ([]byte, error) {
	if bootstrapLine.Match(cfg) {
		return nil, fmt.Errorf("it sets controller.quorum.bootstrap.servers already beside controller.quorum.voters: make it set one of them")
	}
	if _, err := withVoters(cfg, "x"); err != nil {
		return nil, err
	}
	if n := len(votersLine.FindAllIndex(cfg, -1)); n != 1 {
		return nil, fmt.Errorf("it sets controller.quorum.voters %d times: make it set it once", n)
	}
	return votersWhole.ReplaceAllLiteral(cfg, []byte("controller.quorum.bootstrap.servers="+bootstrap)), nil
}

// votersWhole is a controller.quorum.voters line, indentation included.
var votersWhole = regexp.MustCompile(`(?m)^[ \t]*controller\.quorum\.voters[ \t]*[=:].*$`)

func (k *convertConfigs) nodes(env *steps.Env) []ports.Host {
	nodes := slices.Clone(env.Target.Controllers)
	for _, h := range env.Target.Hosts {
		if _, ctrl := env.Target.Controller(h.ID); !ctrl {
			nodes = append(nodes, h)
		}
	}
	return nodes
}

func (k *convertConfigs) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	v, err := lookAt(ctx, env, opts{})
	if err != nil && !errors.Is(err, errHalfDone) {
		return nil, err
	}
	boot := ""
	if v != nil && !v.Dynamic {
		boot = bootstrapOf(v.Voters)
	}
	var f convertFact
	if ok, _ := env.Load(convertKey, &f); ok && f.Bootstrap != "" {
		boot = f.Bootstrap
	}
	if boot == "" {
		return nil, fmt.Errorf("%w: the controllers' configs name no static voter set to take the bootstrap servers from, and this run read none before. Nothing was changed", steps.ErrRefused)
	}
	p := &steps.Plan{Summary: "every node's controller.quorum.voters becomes controller.quorum.bootstrap.servers=" + boot + " (read at each node's next start: the rolls after this step)"}
	run := env.RunID()
	edits, done, problems := configEdits(ctx, env, boot)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s. Fix each file (one controller.quorum.voters line, not continued with a backslash, and no controller.quorum.bootstrap.servers beside it) or SSH to its host, then resume. Nothing was changed", steps.ErrRefused, strings.Join(problems, "; "))
	}
	for _, id := range done {
		p.Facts = append(p.Facts, fmt.Sprintf("node %d: its config sets no controller.quorum.voters (done already)", id))
	}
	for _, e := range edits {
		h := e.host
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("config-%d", h.ID), Op: steps.OpSSH, Target: fmt.Sprintf("node %d on %s", h.ID, h.On()),
			Detail: fmt.Sprintf("in %s: - controller.quorum.voters; + controller.quorum.bootstrap.servers=%s (the file before it kept as %s)", h.Config, boot, h.Config+".kremedy-"+run), Broker: h.ID,
			Args: convertArgs{Node: h.ID, Path: h.Config, Backup: h.Config + ".kremedy-" + run, From: digest(e.from), To: digest(e.to), Bootstrap: boot}})
	}
	if len(p.Actions) == 0 {
		p.NoOp = true
	}
	p.Rollback = fmt.Sprintf("Each config as it was is beside it (<config>.kremedy-%s): with kraft.version 1 the voter set is the log's either way; put a file back only with its node stopped.", run)
	return p, nil
}

// configEdit is one node's config before and after the conversion.
type configEdit struct {
	host     ports.Host
	from, to []byte
}

// configEdits reads every node's config and converts it in memory: the
// edits, the nodes converted already, and what stops a file from being
// converted (read by the survey too, before the irreversible upgrade).
func configEdits(ctx context.Context, env *steps.Env, boot string) (edits []configEdit, done []int32, problems []string) {
	for _, h := range (&convertConfigs{}).nodes(env) {
		if h.Config == "" {
			problems = append(problems, fmt.Sprintf("the inventory names no config file for node %d (config:)", h.ID))
			continue
		}
		cfg, err := brokers.ReadFile(ctx, env.Hosts, h.ID, h.Config)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %d's %s: %v", h.ID, h.Config, err))
			continue
		}
		if !votersLine.Match(cfg) {
			done = append(done, h.ID)
			continue
		}
		text, err := withBootstrap(cfg, boot)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %d's %s: %v", h.ID, h.Config, err))
			continue
		}
		edits = append(edits, configEdit{host: h, from: cfg, to: text})
	}
	return edits, done, problems
}

// convertKey keeps the bootstrap servers the configs get (a resumed run
// whose controllers' configs are half-converted reads them here).
const convertKey = "quorum/dynamic"

type convertFact struct {
	Bootstrap string `json:"bootstrap"`
}

func (k *convertConfigs) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	for _, a := range p.Actions {
		args, err := steps.ArgsOf[convertArgs](a)
		if err != nil {
			return err
		}
		if err := env.Do(a, func() error {
			if err := env.Save(convertKey, convertFact{Bootstrap: args.Bootstrap}); err != nil {
				return err
			}
			cfg, err := brokers.ReadFile(ctx, env.Hosts, args.Node, args.Path)
			if err != nil {
				return err
			}
			if digest(cfg) == args.To {
				env.Logf("%s is converted already", args.Path)
				return nil
			}
			text, err := withBootstrap(cfg, args.Bootstrap)
			if err != nil || digest(text) != args.To {
				return fmt.Errorf("%w: %s on node %d changed since the plan: nothing was written", steps.ErrStalePlan, args.Path, args.Node)
			}
			err = env.Hosts.RunInput(ctx, args.Node, brokers.EditScript(args.Path, args.Backup, args.From, args.To), text, func(l ports.Line) { env.Output(a.Target, l) })
			if code, ok := brokers.ExitStatus(err); ok && code == 3 {
				return fmt.Errorf("%w: %s on node %d changed since the plan: nothing was written", steps.ErrStalePlan, args.Path, args.Node)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (k *convertConfigs) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	var left []string
	for _, h := range k.nodes(env) {
		cfg, err := brokers.ReadFile(ctx, env.Hosts, h.ID, h.Config)
		if err != nil || votersLine.Match(cfg) || !bootstrapLine.Match(cfg) {
			left = append(left, fmt.Sprint(h.ID))
		}
	}
	return []steps.Check{{Name: "every node's config names controller.quorum.bootstrap.servers, none controller.quorum.voters", OK: len(left) == 0, Detail: "not yet: nodes " + strings.Join(left, ", ")}}, nil
}
