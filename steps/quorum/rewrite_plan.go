package quorum

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
)

// planner builds the rewrite's plan phase by phase (rewrite.Plan): what
// every phase reads, and the plan it adds to.
type planner struct {
	ctx      context.Context
	env      *steps.Env
	r        Recovery
	p        *steps.Plan
	seedHost ports.Host
	run      string
	// done is the last phase an earlier attempt ended ("" for none).
	done string
	// on names the seed's host in actions; qs is its quorum-state.
	on, qs string
	// alone, full: the seed's config with the seed alone, and with the
	// full voter set again (a static quorum).
	alone, full []byte
	// meta is the seed's meta.properties (a lost disk's is made from it).
	meta []byte
}

func newPlanner(ctx context.Context, env *steps.Env, r Recovery) (*planner, error) {
	pl := &planner{ctx: ctx, env: env, r: r, run: env.RunID()}
	if _, err := env.Load(phaseKey, &pl.done); err != nil {
		return nil, err
	}
	h, ok := env.Target.Controller(r.Seed.Node)
	if !ok {
		return nil, fmt.Errorf("%w: the seed, controller %d, is not in the inventory any more; nothing was changed", steps.ErrRefused, r.Seed.Node)
	}
	pl.seedHost = h
	pl.on = fmt.Sprintf("controller %d on %s", h.ID, h.On())
	pl.qs = path.Join(r.Seed.Dir, "quorum-state")
	pl.p = &steps.Plan{Summary: fmt.Sprintf("restart the quorum from %s's copy: it alone first, then the other controllers empty, then all %d voters", r.Seed.Role(), len(r.Voters)-len(r.Fenced))}
	pl.meta, _ = brokers.ReadFile(ctx, env.Hosts, h.ID, path.Join(r.Seed.MetaDir, "meta.properties"))
	return pl, nil
}

// add adds an action of phase, unless an earlier attempt ended that phase.
func (pl *planner) add(phase string, a steps.Action) {
	if pl.done != "" && slices.Index(phases, phase) <= slices.Index(phases, pl.done) {
		return
	}
	args := a.Args.(rwArgs)
	args.Phase = phase
	a.Args = args
	a.ID = fmt.Sprintf("%s-%s-%d-%d", phase, args.Do, args.Node, len(pl.p.Actions))
	pl.p.Actions = append(pl.p.Actions, a)
}

// header is the plan's summary, its ledger — what the recovery discards,
// first — and its facts.
func (pl *planner) header(preview bool) error {
	r, p := pl.r, pl.p
	var lf ledgerFact
	if _, err := pl.env.Load(ledgerKey, &lf); err != nil {
		return err
	}
	ledger, lost := lf.Lines, lf.Lost
	switch {
	case preview:
	case len(lost) > 0:
		p.Summary += fmt.Sprintf(" — DISCARDS what %d copies hold beyond the seed, topics %s among it (the ledger below)", len(r.Beyond), strings.Join(lost, ", "))
	case len(ledger) > 0:
		p.Summary += fmt.Sprintf(" — DISCARDS what %d copies hold beyond the seed (the ledger below)", len(r.Beyond))
	default:
		p.Summary += " — discards no record (no copy holds one beyond the seed)"
	}
	switch {
	case preview:
		p.Notes = append(p.Notes, pl.previewNote())
	case len(ledger) == 0:
		p.Notes = append(p.Notes, fmt.Sprintf("WHAT THIS RECOVERY DISCARDS: no record. No copy holds anything beyond the seed's end (offset %d, epoch %d).", r.Seed.End, r.Seed.Epoch))
	default:
		p.Notes = append(p.Notes, "WHAT THIS RECOVERY DISCARDS — the records these copies hold beyond the seed's end, gone from the cluster's metadata once the seed leads (their copies are kept aside):\n"+strings.Join(ledger, "\n"))
		if len(lost) > 0 {
			p.Notes = append(p.Notes, fmt.Sprintf("topics created beyond the seed's end, unknown to the recovered cluster: %s. Their data stays on the brokers' disks; a broker renames such a topic's logs -stray at its start — stray-cleanup offers them, it never deletes them", strings.Join(lost, ", ")))
		}
	}
	for _, c := range r.Copies {
		if c.Node != r.Seed.Node && c.Controller && c.Known() && c.End < r.Seed.End {
			p.Facts = append(p.Facts, fmt.Sprintf("%s ends at %d, behind the seed (%d): it comes back empty and fetches the seed's log; its own copy is kept aside", c.Role(), c.End, r.Seed.End))
		}
	}
	p.Facts = append(p.Facts, fmt.Sprintf("the seed: %s, epoch %d, end offset %d; the voters: %s", r.Seed.Role(), r.Seed.Epoch, r.Seed.End, r.VotersLine))
	if pl.done != "" {
		p.Facts = append(p.Facts, "resumed: the phases up to "+pl.done+" ended in an earlier attempt; they are not planned again")
	}
	return nil
}

// previewNote: `kremedy plan` shows where the ledger comes from, and the
// copies beyond the seed as they stand.
func (pl *planner) previewNote() string {
	r := pl.r
	var beyond []string
	for _, id := range r.Beyond {
		beyond = append(beyond, r.copyOf(id).String())
	}
	note := "WHAT THIS RECOVERY DISCARDS is read by the backup step (the records every copy holds beyond the seed, fetched and decoded) and shown in this step's plan before its confirmation. As the copies stand now, "
	if len(beyond) == 0 {
		return note + fmt.Sprintf("none holds a record beyond the seed's end (%s, offset %d, epoch %d)", r.Seed.Role(), r.Seed.End, r.Seed.Epoch)
	}
	return note + "these hold records beyond the seed's end: " + strings.Join(beyond, "; ")
}

// seedPhase: the seed's quorum-state and voter set rewritten, started
// alone, leading.
func (pl *planner) seedPhase() error {
	r, h := pl.r, pl.seedHost
	cur, err := brokers.ReadFile(pl.ctx, pl.env.Hosts, h.ID, pl.qs)
	from := ""
	if err == nil {
		from = digest(cur)
	}
	if r.Dynamic {
		return planDynamicSeed(pl.add, r, h, pl.qs, from, pl.run)
	}
	content := SeedState(r.Seed.Node, r.StateEpoch)
	pl.add(phaseSeed, steps.Action{Op: steps.OpCheck, Target: "every controller", Detail: "no controller but the seed runs (one brought back by its service manager, or by hand, could lead the old timeline beside the seed)", Args: rwArgs{Node: h.ID, Do: doAlone}})
	pl.add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: fmt.Sprintf("write %s: no leader, no vote, epoch %d (the highest any node saw), voter %d", pl.qs, r.StateEpoch, r.Seed.Node), Broker: h.ID,
		Args: rwArgs{Node: h.ID, Do: doFile, Path: pl.qs, Backup: keptPath(r.Seed, "quorum-state", "was", pl.run), From: from, To: digest(content), Content: string(content)}})
	cfg, err := brokers.ReadFile(pl.ctx, pl.env.Hosts, h.ID, h.Config)
	if err != nil {
		return fmt.Errorf("read the seed's config: %w", err)
	}
	// The seed's config with the seed alone, and with the full set again
	// (from whatever the file holds now: on a resumed run it may be the
	// seed alone already). The file before each edit is kept.
	if pl.alone, err = withVoters(cfg, r.seedEntry()); err != nil {
		return fmt.Errorf("%w: controller %d's %s: %v; nothing was changed", steps.ErrRefused, h.ID, h.Config, err)
	}
	pl.full, _ = withVoters(pl.alone, r.VotersLine)
	pl.add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: fmt.Sprintf("in %s: controller.quorum.voters=%s (the seed alone; the file before it kept as %s)", h.Config, r.seedEntry(), h.Config+".kremedy-"+pl.run), Broker: h.ID,
		Args: rwArgs{Node: h.ID, Do: doVoters, Path: h.Config, Backup: h.Config + ".kremedy-" + pl.run, From: digest(cfg), To: digest(pl.alone), Voters: r.seedEntry()}})
	pl.add(phaseSeed, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: h.Start, Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doStart}})
	pl.add(phaseSeed, steps.Action{Op: steps.OpWait, Target: h.Addr, Detail: fmt.Sprintf("controller %d leads, its whole log committed", h.ID), Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doLeads}})
	return nil
}

// asidePhase: the brokers whose copies diverge from the seed stopped and
// their copies moved aside (every controller but the seed comes back
// empty in a later phase).
func (pl *planner) asidePhase() {
	for _, id := range pl.r.Beyond {
		c := pl.r.copyOf(id)
		if c.Controller {
			continue
		}
		h := pl.env.Target.Node(id)
		on := fmt.Sprintf("broker %d on %s", id, h.On())
		aside := asideName(c, pl.run)
		pl.add(phaseAside, steps.Action{Op: steps.OpSSH, Target: on, Detail: h.Stop, Broker: id, Args: rwArgs{Node: id, Do: doStop}})
		pl.add(phaseAside, steps.Action{Op: steps.OpWait, Target: h.Addr, Detail: fmt.Sprintf("broker %d's port closes", id), Broker: id, Args: rwArgs{Node: id, Do: doGone}})
		pl.add(phaseAside, steps.Action{Op: steps.OpMove, Target: on, Detail: fmt.Sprintf("mv %s %s", shell.Quote(c.Dir), shell.Quote(aside)), Broker: id, Args: rwArgs{Node: id, Do: doAside, Dir: c.Dir, Aside: aside}})
	}
}

// back plans controller id's return, empty: its copy moved aside, its
// meta.properties (a lost disk's made from the seed's; on a dynamic
// quorum a new directory id), the check, its start.
func (pl *planner) back(phase string, id int32, check, checkWhat string) error {
	r := pl.r
	h, _ := pl.env.Target.Controller(id)
	c := r.copyOf(id)
	con := fmt.Sprintf("controller %d on %s", id, h.On())
	if c.Known() && c.Dir != "" {
		pl.add(phase, steps.Action{Op: steps.OpMove, Target: con, Detail: fmt.Sprintf("mv %s %s (kept, never deleted)", shell.Quote(c.Dir), shell.Quote(asideName(c, pl.run))), Broker: id, Args: rwArgs{Node: id, Do: doAside, Dir: c.Dir, Aside: asideName(c, pl.run)}})
	}
	if c.MetaDir != "" {
		if err := pl.metaBack(phase, id, c, con, h); err != nil {
			return err
		}
	}
	pl.add(phase, steps.Action{Op: steps.OpCheck, Target: con, Detail: checkWhat, Broker: id, Args: rwArgs{Node: id, Do: check}})
	pl.add(phase, steps.Action{Op: steps.OpSSH, Target: con, Detail: h.Start, Broker: id, Args: rwArgs{Node: id, Do: doStart}})
	return nil
}

// metaBack plans controller id's meta.properties for its return.
func (pl *planner) metaBack(phase string, id int32, c Copy, con string, h ports.Host) error {
	mp := path.Join(c.MetaDir, "meta.properties")
	own, err := brokers.ReadFile(pl.ctx, pl.env.Hosts, id, mp)
	if err == nil {
		if !pl.r.Dynamic {
			return nil
		}
		// A dynamic quorum names its voters by directory id: the
		// controller comes back as a new disk, never under the id its old
		// log had.
		a, ok, err := newDirectoryID(id, mp, own, pl.r.oldDirID(id), pl.run)
		if err == nil && ok {
			a.Target = con
			pl.add(phase, a)
		}
		return err
	}
	if len(pl.meta) == 0 {
		return fmt.Errorf("%w: controller %d has no %s and the seed's meta.properties could not be read to make it; format it with kafka-storage.sh format --cluster-id <the cluster's id> --config %s (static quorum), then run again (kremedy resume). Nothing of this step was done", steps.ErrRefused, id, mp, h.Config)
	}
	text, err := metaFor(pl.meta, id)
	if err != nil {
		return err
	}
	pl.add(phase, steps.Action{Op: steps.OpSSH, Target: con, Detail: fmt.Sprintf("write %s (its disk was lost): the cluster id, node.id=%d, a new directory.id — what kafka-storage.sh format writes", mp, id), Broker: id,
		Args: rwArgs{Node: id, Do: doFile, Path: mp, To: digest(text), Content: string(text), Dir: c.MetaDir}})
	return nil
}

// staticJoin plans a static quorum's return. Phase rejoin: majority-1 of
// the other voters, each empty, started under the rule, caught up with the
// seed leading alone. No more: with a majority of the others running they
// could elect one of themselves without what the seed committed alone
// since its end, if it stalled. Phase restart: the seed with the full
// voter set, while fewer than a majority of the others run, until a leader
// and they are caught up. Phase join: the rest, one at a time, into a
// quorum that serves.
func (pl *planner) staticJoin() error {
	r, h := pl.r, pl.seedHost
	others := r.others()
	maj := len(r.Voters)/2 + 1
	first, rest := others, []int32(nil)
	if len(others) > maj-1 {
		first, rest = others[:maj-1], others[maj-1:]
	}
	for _, id := range first {
		if err := pl.back(phaseRejoin, id, doSafe, "the rule for an empty voter's start: the seed runs and leads, and the running voters without its log stay fewer than a majority"); err != nil {
			return err
		}
		pl.add(phaseRejoin, steps.Action{Op: steps.OpWait, Target: h.Addr, Detail: fmt.Sprintf("controller %d fetched the seed's log to its end", id), Broker: id, Args: rwArgs{Node: id, Do: doCaughtUp}})
	}
	pl.add(phaseRestart, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: fmt.Sprintf("in %s: controller.quorum.voters=%s (the full voter set again)", h.Config, r.VotersLine), Broker: h.ID,
		Args: rwArgs{Node: h.ID, Do: doVoters, Path: h.Config, Backup: h.Config + ".kremedy-" + pl.run + "-alone", From: digest(pl.alone), To: digest(pl.full), Voters: r.VotersLine}})
	pl.add(phaseRestart, steps.Action{Op: steps.OpCheck, Target: pl.on, Detail: "the rule for the seed's restart: fewer than a majority of the other voters run", Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doSafe}})
	pl.add(phaseRestart, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: h.Stop, Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doStop}})
	pl.add(phaseRestart, steps.Action{Op: steps.OpWait, Target: h.Addr, Detail: fmt.Sprintf("controller %d's port closes", h.ID), Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doGone}})
	pl.add(phaseRestart, steps.Action{Op: steps.OpSSH, Target: pl.on, Detail: h.Start, Broker: h.ID, Args: rwArgs{Node: h.ID, Do: doStart}})
	running := append([]int32{r.Seed.Node}, first...)
	pl.add(phaseRestart, steps.Action{Op: steps.OpWait, Target: "the KRaft quorum", Detail: fmt.Sprintf("a leader, and voters %v caught up", running), Args: rwArgs{Do: doQuorum, Want: slices.Clone(running)}})
	for _, id := range rest {
		if err := pl.back(phaseJoin, id, doJoinSafe, "the quorum has a leader and a majority of the voters caught up: an empty voter joins as a follower"); err != nil {
			return err
		}
		running = append(running, id)
		pl.add(phaseJoin, steps.Action{Op: steps.OpWait, Target: "the KRaft quorum", Detail: fmt.Sprintf("a leader, and voters %v caught up", running), Broker: id, Args: rwArgs{Node: id, Do: doQuorum, Want: slices.Clone(running)}})
	}
	return nil
}

// brokersPhase: the brokers stopped in phase aside started again.
func (pl *planner) brokersPhase() {
	for _, id := range pl.r.Beyond {
		if pl.r.copyOf(id).Controller {
			continue
		}
		h := pl.env.Target.Node(id)
		pl.add(phaseBrokers, steps.Action{Op: steps.OpSSH, Target: fmt.Sprintf("broker %d on %s", id, h.On()), Detail: h.Start, Broker: id, Args: rwArgs{Node: id, Do: doStart}})
	}
}

// footer: a plan with nothing left, the fenced voters a dynamic quorum
// drops, what is kept.
func (pl *planner) footer() {
	r, p, run := pl.r, pl.p, pl.run
	if len(p.Actions) == 0 && pl.done != "" {
		// Every phase ended in an earlier attempt (a resumed run whose
		// re-check found a voter lagging): nothing to do or confirm again.
		p.NoOp = true
		p.Summary = "every phase of the rewrite ended in an earlier attempt (the last: " + pl.done + "); nothing left to do"
	}
	if r.Dynamic && len(r.Fenced) > 0 {
		left := len(r.Voters) - len(r.Fenced)
		p.Notes = append(p.Notes, fmt.Sprintf("controllers %v, named fenced, leave the voter set for good: the quorum ends with %d voters, which survive %d lost. Add one back on a new disk (an empty metadata dir, a new directory id) with kremedy run controller-replace, or kafka-metadata-quorum.sh add-controller on its host, once it runs as an observer", r.Fenced, left, (left-1)/2))
	}
	kept := keptPath(r.Seed, "quorum-state", "was", run)
	if r.Dynamic {
		p.Rollback = fmt.Sprintf(`What is kept, never deleted, beside each node's metadata log dir:
  every copy as it was, the seed's last segment before the records appended to it among them: <dir>.%s.kremedy-backup-%s (the backup step);
  the copies moved aside: <dir>.%s.kremedy-aside-%s;
  the seed's quorum-state as it was: %s; each controller's meta.properties before its new directory id: <meta.properties>.kremedy-%s.
Once a controller is added back as a voter, the voter set names its new directory id: its old copy, put back, is at most an observer.`, MetadataLog, run, MetadataLog, run, kept, run)
		return
	}
	p.Rollback = fmt.Sprintf(`What is kept, never deleted, beside each node's metadata log dir:
  every copy as it was: <dir>.%s.kremedy-backup-%s (the backup step);
  the copies moved aside: <dir>.%s.kremedy-aside-%s;
  the seed's quorum-state and config as they were: %s, %s.`, MetadataLog, run, MetadataLog, run, kept, pl.seedHost.Config+".kremedy-"+run)
}
