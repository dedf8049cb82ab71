package cleanup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/text"
	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/roll"
	"github.com/kremedy/kremedy/steps/segments"
)

// The stray cleanup (KRaft 3.7+): Kafka renames a log whose topic ID is not
// in the metadata, or whose partition is no longer assigned to the broker,
// <topic>-<p>.<uuid>-stray and never deletes it (LogManager.loadLog,
// isStrayKraftReplica; docs/kraft-strays-research.md §1). It is invisible
// to DescribeLogDirs: only the disk shows it.
//
// Moving a -stray directory while its broker runs is sound once the broker
// has loaded its logs: after the rename Kafka makes no filesystem call on
// that path (no delete, flush, retention, cleaner or checkpoint touches
// it), so a moved stray cannot take the log dir offline (research §1.3).
// kremedy therefore moves only directories whose name already ends in
// -stray, only on a broker the cluster lists as unfenced (it has loaded its
// logs and caught up with the metadata), into a quarantine outside every
// log dir. The broker keeps the files open until its process exits, so the
// space comes back only when the quarantine is deleted and the broker has
// restarted; the plan says so.

// strayManifestKind marks a quarantine manifest of -stray directories:
// `segments restore` may put them back while the brokers run, since Kafka
// never opens a -stray path again until its next start.
const strayManifestKind = "kraft-strays"

// strayOpts are the stray kinds' options.
type strayOpts struct {
	// Unproven: quarantine too the strays without partition.metadata,
	// whose old topic ID cannot be read — only where the live partition of
	// that name is in sync on that broker.
	Unproven bool `opt:"unproven" default:"false"`
}

// strayDir is one -stray directory and kremedy's judgment of it.
type strayDir struct {
	Broker int32
	Host   string
	LogDir string
	Dir    segments.Dir
	OldID  string // the topic id in its partition.metadata, "" when none
	Size   string // "12.0 MiB, last changed 3m ago"
	// Proof says why it may go (Why is then ""); Why says why it stays.
	Proof, Why string
}

func (s strayDir) path() string { return filepath.Join(s.LogDir, s.Dir.Name) }

func (s strayDir) oldID() string { return cmp.Or(s.OldID, "none (no partition.metadata)") }

// strayLook is what one read of the cluster and its disks showed.
type strayLook struct {
	ClusterID string
	Strays    []strayDir
	// WouldBe are live logs Kafka will set aside at their broker's next
	// start, one line each; Would the same, by broker.
	WouldBe []string
	Would   map[int32][]wouldBeDir
	// Dirs are the log dirs listed, by broker.
	Dirs map[int32][]string
}

// Removable are the strays kremedy proved it may move.
func (l *strayLook) Removable() []strayDir {
	var out []strayDir
	for _, s := range l.Strays {
		if s.Why == "" {
			out = append(out, s)
		}
	}
	return out
}

// Left are the strays kremedy leaves, each with why.
func (l *strayLook) Left() []string {
	var out []string
	for _, s := range l.Strays {
		if s.Why != "" {
			out = append(out, fmt.Sprintf("broker %d %s: %s", s.Broker, s.path(), s.Why))
		}
	}
	return out
}

// strayFactsKey is where stray-find saves the cluster it saw.
const strayFactsKey = "strays/facts"

type strayFacts struct {
	ClusterID string `json:"cluster_id"`
}

// lookStrays reads the cluster (DescribeCluster, every serving broker's
// Metadata) and every broker host's log dirs over SSH, and judges each
// -stray directory. A host that cannot be listed is an error: a cleanup
// that cannot see a disk says so rather than judging half a cluster.
func lookStrays(ctx context.Context, env *steps.Env, o strayOpts) (*strayLook, error) {
	cv, serving, err := strayCluster(ctx, env)
	if err != nil {
		return nil, err
	}
	look := &strayLook{ClusterID: cv.ClusterID, Would: map[int32][]wouldBeDir{}}
	if look.Dirs, err = strayLogDirs(ctx, env, serving); err != nil {
		return nil, err
	}
	listing := brokers.List(ctx, env.Hosts, env.Target, look.Dirs)
	if err := listing.Err(env.Target); err != nil {
		return nil, fmt.Errorf("%w: every broker's disk must be listed before kremedy judges a stray: %v. Fix SSH to that host and run again; nothing was moved", steps.ErrRefused, err)
	}
	j, err := newStrayJudge(ctx, env, o, serving)
	if err != nil {
		return nil, err
	}
	look.judge(env, listing, j)
	look.sizes(ctx, env)
	return look, nil
}

// strayCluster is the KRaft cluster the stray kinds look at, and its
// serving (unfenced) brokers; it refuses a ZooKeeper-mode cluster, and one
// whose id is not the one the run began on.
func strayCluster(ctx context.Context, env *steps.Env) (ports.ClusterView, map[int32]bool, error) {
	if !env.Target.KRaft {
		return ports.ClusterView{}, nil, fmt.Errorf("%w: stray-cleanup is for KRaft clusters (Kafka 3.7+ sets stray logs aside only in KRaft mode), and %s is a ZooKeeper-mode cluster: in ZooKeeper mode a deleted topic's leftovers are topic-cleanup's work; nothing was done", steps.ErrRefused, env.Target.Name)
	}
	cv, err := env.Kafka.DescribeCluster(ctx)
	if err != nil {
		return cv, nil, fmt.Errorf("describe the cluster over Kafka: %w. Nothing was moved", err)
	}
	var prior strayFacts
	if ok, err := env.Load(strayFactsKey, &prior); err != nil {
		return cv, nil, err
	} else if ok && prior.ClusterID != cv.ClusterID {
		return cv, nil, fmt.Errorf("%w: this run began on cluster id %s and the inventory's brokers now answer as %s: it is another cluster (or a reinstall). Start a new run; nothing was moved", steps.ErrRefused, prior.ClusterID, cv.ClusterID)
	}
	serving := map[int32]bool{}
	for _, b := range cv.Brokers {
		if !b.Fenced {
			serving[b.ID] = true
		}
	}
	return cv, serving, nil
}

// strayLogDirs are every broker's log dirs: the inventory's, else (for a
// serving broker) its DescribeLogDirs answer. A broker with neither is
// refused: kremedy cannot find its disks.
func strayLogDirs(ctx context.Context, env *steps.Env, serving map[int32]bool) (map[int32][]string, error) {
	dirs := map[int32][]string{}
	var ask []int32
	for _, h := range env.Target.Hosts {
		dirs[h.ID] = h.LogDirs
		if len(h.LogDirs) == 0 {
			if !serving[h.ID] {
				return nil, fmt.Errorf("%w: broker %d is not serving and the inventory names no log_dirs for it, so kremedy cannot find its disks: start it, or add its log_dirs to the inventory. Nothing was moved", steps.ErrRefused, h.ID)
			}
			ask = append(ask, h.ID)
		}
	}
	for i, r := range par.Each(ask, func(id int32) answer[[]string] { return answerOf(env.Kafka.LogDirs(ctx, id)) }) {
		if r.err != nil {
			return nil, fmt.Errorf("broker %d's log dirs (DescribeLogDirs): %w; add log_dirs to its inventory entry. Nothing was moved", ask[i], r.err)
		}
		if err := brokers.CheckLogDirs(ask[i], r.v, "its DescribeLogDirs answer"); err != nil {
			return nil, err
		}
		dirs[ask[i]] = r.v
	}
	return dirs, nil
}

// newStrayJudge asks every serving broker for its Metadata view; the judge
// holds the views and the brokers that did not answer. With no view at all
// no stray can be proved stale: an error.
func newStrayJudge(ctx context.Context, env *steps.Env, o strayOpts, serving map[int32]bool) (strayJudge, error) {
	ids := slices.Sorted(maps.Keys(serving))
	views := map[int32]ports.BrokerView{}
	viewErr := map[int32]error{}
	for i, r := range par.Each(ids, func(id int32) answer[ports.BrokerView] { return answerOf(env.Kafka.BrokerView(ctx, id)) }) {
		if r.err != nil {
			viewErr[ids[i]] = r.err
			continue
		}
		views[ids[i]] = r.v
	}
	if len(views) == 0 {
		return strayJudge{}, fmt.Errorf("no broker answers Metadata (%v): kremedy cannot prove any stray stale. Nothing was moved", errors.Join(slices.Collect(maps.Values(viewErr))...))
	}
	return strayJudge{o: o, serving: serving, views: views, viewErr: viewErr}, nil
}

// judge goes through every broker's listed partition directories: each
// -stray one is judged (kept in Strays with its proof or why it stays),
// each live one Kafka would set aside at its broker's next start goes into
// WouldBe and Would.
func (l *strayLook) judge(env *steps.Env, listing brokers.Listing, j strayJudge) {
	for _, h := range env.Target.Hosts {
		for _, dir := range l.Dirs[h.ID] {
			for _, e := range listing.Entries[h.ID][dir] {
				if !e.IsDir {
					continue
				}
				d, err := segments.ParseDir(e.Name)
				if err != nil || d.Topic == "__cluster_metadata" {
					continue
				}
				switch d.Kind {
				case segments.Stray:
					s := strayDir{Broker: h.ID, Host: h.Host, LogDir: dir, Dir: d, OldID: e.TopicID}
					s.Proof, s.Why = j.judge(s)
					l.Strays = append(l.Strays, s)
				case segments.Live:
					if w := j.wouldBe(h.ID, d, e.TopicID); w != "" {
						l.WouldBe = append(l.WouldBe, fmt.Sprintf("broker %d %s: %s", h.ID, filepath.Join(dir, e.Name), w))
						l.Would[h.ID] = append(l.Would[h.ID], wouldBeDir{LogDir: dir, Name: e.Name, Why: w})
					}
				}
			}
		}
	}
}

// answer is one broker's answer to a call made of every broker at once.
type answer[T any] struct {
	v   T
	err error
}

func answerOf[T any](v T, err error) answer[T] { return answer[T]{v, err} }

// sizes fills in each stray's size and age, one command per host.
func (l *strayLook) sizes(ctx context.Context, env *steps.Env) {
	by := map[int32][]string{}
	for _, s := range l.Strays {
		by[s.Broker] = append(by[s.Broker], s.path())
	}
	got := brokers.SizesText(ctx, env.Hosts, by, env.Now())
	for i := range l.Strays {
		l.Strays[i].Size = got[l.Strays[i].path()]
	}
}

// wouldBeDir is a live log Kafka will set aside at its broker's next start.
type wouldBeDir struct{ LogDir, Name, Why string }

// strayJudge proves a stray stale from the brokers' metadata, or says why
// it cannot.
type strayJudge struct {
	o       strayOpts
	serving map[int32]bool
	views   map[int32]ports.BrokerView
	viewErr map[int32]error
}

// topic is what every answering broker says of topic: the view, whether
// any knows it, and "" — or why they disagree (metadata still spreading).
func (j strayJudge) topic(name string) (tv ports.TopicView, live bool, disagree string) {
	var first *ports.TopicView
	for _, id := range slices.Sorted(maps.Keys(j.views)) {
		v, ok := j.views[id].Topics[name]
		if ok && !v.Present() && !v.Gone() {
			return v, false, fmt.Sprintf("broker %d cannot tell whether it knows %q: %s", id, name, v.Unsure())
		}
		present := ok && v.Present()
		switch {
		case first == nil && present:
			first, live = &v, true
		case first == nil:
			if live {
				return tv, false, fmt.Sprintf("broker %d does not know %q and another does", id, name)
			}
			first = &ports.TopicView{Name: name, Err: ports.KafkaUnknownTopicOrPartition}
		case present != first.Present():
			return tv, false, fmt.Sprintf("the brokers disagree on whether %q exists (broker %d says %v)", name, id, present)
		case present && !segments.SameTopicID(v.ID, first.ID):
			return tv, false, fmt.Sprintf("the brokers disagree on %q's topic id (%s and %s)", name, first.ID, v.ID)
		}
	}
	return *first, live, ""
}

// insync says whether every answering broker lists broker b in the ISR of
// topic's partition p, and the ISRs seen.
func (j strayJudge) insync(topic string, p, b int32) (bool, string) {
	ok := true
	var seen []string
	for _, id := range slices.Sorted(maps.Keys(j.views)) {
		pv := j.views[id].Topics[topic].Partitions[p]
		if !slices.Contains(pv.ISR, b) {
			ok = false
		}
		seen = append(seen, fmt.Sprintf("broker %d: ISR %v", id, pv.ISR))
	}
	return ok, strings.Join(seen, ", ")
}

// judge returns why s may be moved (proof), or why it stays.
func (j strayJudge) judge(s strayDir) (proof, why string) {
	const again = "; run again once it is"
	if !j.serving[s.Broker] {
		return "", fmt.Sprintf("broker %d is not serving (DescribeCluster does not list it unfenced): it may still be loading its logs, and a directory that vanishes while Kafka loads a log dir takes the whole log dir offline (LogManager.loadLogs). Start it, wait until it serves, and run again", s.Broker)
	}
	if err := j.viewErr[s.Broker]; err != nil {
		return "", fmt.Sprintf("broker %d does not answer Metadata (%v): kremedy cannot see what it serves%s", s.Broker, err, again)
	}
	t := s.Dir.Topic
	if s.Dir.MaybeTruncated() {
		return "", fmt.Sprintf("Kafka cut its name to 255 bytes, so %q may be only the start of the topic's name: kremedy cannot match it to a topic. Move it by hand once you know whose it is", t)
	}
	tv, live, disagree := j.topic(t)
	if disagree != "" {
		return "", disagree + ": the metadata is still spreading, or a broker is stale; run again in a minute"
	}
	pv, assigned := tv.Partitions[s.Dir.Partition]
	assigned = live && assigned && slices.Contains(pv.Replicas, s.Broker)
	var stale string
	switch {
	case s.OldID == "" && !j.o.Unproven:
		return "", "it has no partition.metadata, so kremedy cannot read whose topic ID it held: a log copied in by hand or written before Kafka 2.8 may be the only copy of live data. Compare its offsets with the live partition's, then move it by hand or run again with unproven=true (the quarantine keeps it, and segments restore puts it back)"
	case s.OldID == "":
		stale = "no partition.metadata (quarantined on request: unproven=true)"
	case !live:
		stale = fmt.Sprintf("old topic id %s; the metadata has no topic %q", s.OldID, t)
	case !segments.SameTopicID(s.OldID, tv.ID):
		stale = fmt.Sprintf("old topic id %s; the live %q is topic id %s", s.OldID, t, tv.ID)
	case !assigned:
		stale = fmt.Sprintf("topic id %s is live, but partition %d is no longer assigned to broker %d (replicas %v)", s.OldID, s.Dir.Partition, s.Broker, pv.Replicas)
	default:
		return "", fmt.Sprintf("its topic id %s is the live topic's and partition %d is assigned to broker %d: kremedy cannot prove it stale (a reassignment away and back?). Compare it with the live log by hand", s.OldID, s.Dir.Partition, s.Broker)
	}
	if !assigned {
		return stale, ""
	}
	ok, seen := j.insync(t, s.Dir.Partition, s.Broker)
	if !ok {
		return "", fmt.Sprintf("%s, but the live %s-%d is not in sync on broker %d (%s): the stray may hold records that partition has not fetched back yet. Wait until broker %d is in its ISR%s", stale, t, s.Dir.Partition, s.Broker, seen, s.Broker, again)
	}
	return fmt.Sprintf("%s; the live %s-%d is in sync on broker %d", stale, t, s.Dir.Partition, s.Broker), ""
}

// wouldBe says why Kafka will set a live log aside at its broker's next
// start ("" when it will not, or kremedy cannot tell).
func (j strayJudge) wouldBe(b int32, d segments.Dir, id string) string {
	if id == "" || j.viewErr[b] != nil {
		return "" // a broker not serving is judged from the others' views
	}
	tv, live, disagree := j.topic(d.Topic)
	switch {
	case disagree != "":
		return ""
	case !live:
		return fmt.Sprintf("topic id %s, and the metadata has no topic %q", id, d.Topic)
	case !segments.SameTopicID(id, tv.ID):
		return fmt.Sprintf("topic id %s, the live topic's is %s", id, tv.ID)
	}
	if pv, ok := tv.Partitions[d.Partition]; !ok || !slices.Contains(pv.Replicas, b) {
		return fmt.Sprintf("partition %d is no longer assigned to broker %d", d.Partition, b)
	}
	return ""
}

// strayFind is the stray-cleanup's read-only look: every -stray directory
// on every broker, each with the proof that it may go or why it stays.
type strayFind struct {
	o      strayOpts
	checks []steps.Check
}

func (k *strayFind) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	look, err := lookStrays(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	p := &steps.Plan{NoOp: true}
	rm := look.Removable()
	p.Summary = fmt.Sprintf("%d stray log directories on the brokers' disks: %d kremedy proved stale, %d it leaves (each with why)", len(look.Strays), len(rm), len(look.Strays)-len(rm))
	if len(look.Strays) == 0 {
		p.Summary = "no -stray directory on any broker's log dirs: nothing to clean up"
	}
	for _, s := range look.Strays {
		verdict := "may go: " + s.Proof // the proof names the old topic id
		if s.Why != "" {
			verdict = fmt.Sprintf("stays (old topic id %s): %s", s.oldID(), s.Why)
		}
		p.Facts = append(p.Facts, fmt.Sprintf("broker %d %s: %s-%d, %s — %s", s.Broker, s.path(), s.Dir.Topic, s.Dir.Partition, s.Size, verdict))
	}
	p.Notes = wouldBeNotes(look)
	k.checks = []steps.Check{
		{Name: "every broker's log dirs listed over SSH", OK: true, Detail: fmt.Sprintf("cluster id %s, %d brokers", look.ClusterID, len(look.Dirs))},
		{Name: "every -stray directory judged from the brokers' metadata", OK: true, Detail: p.Summary},
	}
	if err := env.Save(strayFactsKey, strayFacts{ClusterID: look.ClusterID}); err != nil {
		return nil, err
	}
	return p, nil
}

// wouldBeNotes names the live logs Kafka will set aside at their broker's
// next start, and the way to clean them up.
func wouldBeNotes(look *strayLook) []string {
	if len(look.WouldBe) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d live log directories will become stray at their broker's next start (%s). kremedy does not move a live log while its broker runs (Kafka still flushes and checkpoints it): run stray-cleanup with would_be=true to move them through a restart of their broker (stop, move, start, health gate; one broker at a time), or restart that broker (Kafka sets them aside) and run stray-cleanup again", len(look.WouldBe), text.Summarize(look.WouldBe))}
}

func (k *strayFind) Apply(context.Context, *steps.Env, *steps.Plan) error { return nil }

func (k *strayFind) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	if _, err := k.Plan(ctx, env); err != nil { // resume: read again, never trusted
		return nil, err
	}
	return k.Verify(ctx, env)
}

// strayQuarantine moves the strays kremedy proved stale into a quarantine
// beside each log dir, recording each move in the manifest first, while
// the brokers run.
type strayQuarantine struct{ o strayOpts }

func (k *strayQuarantine) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	look, err := lookStrays(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	rm := look.Removable()
	p := &steps.Plan{Summary: fmt.Sprintf("move %d stray log directories off the brokers' log dirs into quarantine, while the brokers run", len(rm))}
	p.Notes = append(p.Notes, look.Left()...)
	p.Notes = append(p.Notes, wouldBeNotes(look)...)
	if len(rm) == 0 {
		p.NoOp = true
		p.Summary = "no stray log directory kremedy may move"
		if len(look.Strays) == 0 {
			p.Summary = "no -stray directory on any broker's log dirs: nothing to clean up"
		}
		return p, nil
	}
	for _, s := range rm {
		if err := quarantineOutside(env, s.Broker, look.Dirs[s.Broker]); err != nil {
			return nil, err
		}
		h, _ := env.Target.Host(s.Broker)
		mv := Move{Broker: s.Broker, Host: h.Host, From: s.path(), To: filepath.Join(QuarantineDir(env.RunID(), s.LogDir), s.Dir.Name), Kind: segments.Stray.String(), State: "planned"}
		p.Actions = append(p.Actions, steps.Action{ID: fmt.Sprintf("move-%d", len(p.Actions)), Op: steps.OpMove, Broker: s.Broker,
			Target: fmt.Sprintf("broker %d on %s: %s", s.Broker, h.On(), mv.From),
			Detail: fmt.Sprintf("→ %s (%s-%d, %s; %s)", mv.To, s.Dir.Topic, s.Dir.Partition, s.Size, s.Proof), Args: mv})
	}
	p.Notes = append(p.Notes, "Disk space: a move within the same filesystem frees nothing, and Kafka keeps a stray's files open until the broker's process exits (LogManager never closes a stray log). Delete the quarantine once you are sure, then restart those brokers (kraft-rolling-restart) to get the space back.")
	p.Actions = append([]steps.Action{{ID: "manifest", Op: steps.OpSave, Target: env.Artifact(artManifest), Detail: "each move is recorded before and after it happens; segments restore puts them back"}}, p.Actions...)
	return p, nil
}

func (k *strayQuarantine) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	hosts, err := byHost(p)
	if err != nil {
		return err
	}
	// The proof is read again right before anything moves: a broker that
	// stopped, or a live partition that fell out of sync since the plan,
	// stops the step.
	look, err := lookStrays(ctx, env, k.o)
	if err != nil {
		return err
	}
	ok := map[string]bool{}
	for _, s := range look.Removable() {
		ok[moveKey(s.Broker, s.path())] = true
	}
	var changed []string
	for _, h := range hosts {
		for _, mv := range h.moves {
			if ok[moveKey(mv.Broker, mv.From)] {
				continue
			}
			why := "it is no longer on the disk"
			for _, s := range look.Strays {
				if s.Broker == mv.Broker && s.path() == mv.From {
					why = s.Why
				}
			}
			changed = append(changed, fmt.Sprintf("broker %d %s: %s", mv.Broker, mv.From, why))
		}
	}
	if len(changed) > 0 {
		return fmt.Errorf("%w: since the plan, kremedy can no longer prove these strays stale: %s. Nothing was moved; run again for a new plan", steps.ErrRefused, strings.Join(changed, "; "))
	}
	man, err := loadManifest(env, nil)
	if err != nil {
		return fmt.Errorf("quarantine manifest %s: %w", env.Artifact(artManifest), err)
	}
	q := &quarantine{env: env, man: man, ends: map[string]func(error) error{}, idx: map[string]int{}, strays: true}
	if err := q.plan(hosts, p.Actions[0]); err != nil {
		return err
	}
	return q.moveAll(ctx, hosts)
}

func (k *strayQuarantine) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	look, err := lookStrays(ctx, env, k.o)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, s := range look.Removable() {
		left = append(left, fmt.Sprintf("broker %d %s", s.Broker, s.path()))
	}
	checks := []steps.Check{{Name: "no stray log directory kremedy may move is left on a log dir", OK: len(left) == 0, Detail: cmp.Or(text.Summarize(left), fmt.Sprintf("%d strays left in place, each named in the plan with why", len(look.Strays)))}}
	if c, err := reconcileManifest(ctx, env, nil); err != nil {
		return nil, err
	} else if c != nil {
		checks = append(checks, *c)
	}
	return checks, nil
}

// strayRollOpts are the stray-roll kind's options.
type strayRollOpts struct {
	// WouldBe: move the live logs that will become stray, each broker
	// that holds some stopped, its logs moved, started and gated.
	WouldBe       bool          `opt:"would_be" default:"false"`
	StopTimeout   time.Duration `opt:"stop_timeout" default:"5m"`
	StartTimeout  time.Duration `opt:"start_timeout" default:"5m"`
	HealthChecks  int           `opt:"health_checks" default:"3"`
	HealthTimeout time.Duration `opt:"health_timeout" default:"5m"`
	Accept        []string      `opt:"accept_unavailable" type:"topics" default:""`
}

// strayRoll moves, on request, the live logs Kafka will set aside at their
// broker's next start (topic ID not live, or the partition no longer the
// broker's): Kafka still flushes and checkpoints a live log, so it moves
// only while its broker is stopped — through the one roller, one broker at
// a time, the partition rule before each stop, the gate after each start.
// Brokers without such logs are not restarted.
type strayRoll struct {
	o strayRollOpts
	r roll.Roll
}

func newStrayRoll(o strayRollOpts) *strayRoll {
	return &strayRoll{o: o, r: roll.Roll{Nodes: &roll.KafkaBrokers{HealthChecks: o.HealthChecks, HealthTimeout: o.HealthTimeout},
		StopTimeout: o.StopTimeout, StartTimeout: o.StartTimeout, HealWait: o.HealthTimeout, Accept: o.Accept, While: wouldBeWhile{}}}
}

func (k *strayRoll) Plan(ctx context.Context, env *steps.Env) (*steps.Plan, error) {
	if !k.o.WouldBe {
		return &steps.Plan{NoOp: true, Summary: "would_be=false (the default): the live logs that will become stray at their broker's next start, if any, are named above and left; with would_be=true this step moves them, restarting their brokers one at a time"}, nil
	}
	if !env.Target.KRaft {
		return nil, fmt.Errorf("%w: stray-cleanup is for KRaft clusters; nothing was done", steps.ErrRefused)
	}
	if err := refuseCombined(ctx, env); err != nil {
		return nil, err
	}
	p, err := k.r.Plan(ctx, env)
	if err != nil || p.NoOp {
		return p, err
	}
	p.Summary = "restart each broker that holds live logs Kafka will set aside, one at a time, moving those logs into quarantine while it is stopped; the others are not restarted"
	return p, nil
}

func (k *strayRoll) Apply(ctx context.Context, env *steps.Env, p *steps.Plan) error {
	return k.r.Apply(ctx, env, p)
}

func (k *strayRoll) Verify(ctx context.Context, env *steps.Env) ([]steps.Check, error) {
	if !k.o.WouldBe {
		return nil, nil
	}
	checks, err := k.r.Verify(ctx, env)
	if err != nil {
		return nil, err
	}
	look, err := lookStrays(ctx, env, strayOpts{})
	if err != nil {
		return nil, err
	}
	checks = append(checks, steps.Check{Name: "no live log will become stray at its broker's next start", OK: len(look.WouldBe) == 0, Detail: text.Summarize(look.WouldBe)})
	if c, err := reconcileManifest(ctx, env, nil); err != nil {
		return nil, err
	} else if c != nil {
		checks = append(checks, *c)
	}
	return checks, nil
}

// refuseCombined refuses a stray roll that would stop a combined node
// (process.roles=broker,controller) holding would-be strays: its stop moves
// the quorum too, which this roll does not judge. kraft-rolling-restart
// does (the quorum rule and the partition rule before its stop), and Kafka
// then sets those logs aside as -stray at its start, which stray-cleanup
// moves while it runs.
func refuseCombined(ctx context.Context, env *steps.Env) error {
	look, err := lookStrays(ctx, env, strayOpts{})
	if err != nil {
		return err
	}
	var ids []int32
	for _, id := range slices.Sorted(maps.Keys(look.Would)) {
		if len(look.Would[id]) > 0 && env.Target.Combined(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return fmt.Errorf("%w: node(s) %v hold live logs that will become stray, and each is a combined node (process.roles=broker,controller): stopping one moves the metadata quorum too, which stray-cleanup's roll does not judge. Restart them with `kremedy run kraft-rolling-restart` (it judges the quorum rule and the partition rule before each stop); Kafka then sets those logs aside as -stray at their start, and `kremedy run stray-cleanup` (would_be=false) moves them into quarantine while they run. Nothing was done", steps.ErrRefused, ids)
}

// wouldBeWhile moves a stopped broker's would-be strays into quarantine.
type wouldBeWhile struct{}

func (wouldBeWhile) moves(ctx context.Context, env *steps.Env, id int32) ([]Move, []string, error) {
	look, err := lookStrays(ctx, env, strayOpts{})
	if err != nil {
		return nil, nil, err
	}
	if err := quarantineOutside(env, id, look.Dirs[id]); err != nil {
		return nil, nil, err
	}
	h, _ := env.Target.Host(id)
	var out []Move
	var why []string
	for _, w := range look.Would[id] {
		out = append(out, Move{Broker: id, Host: h.Host, From: filepath.Join(w.LogDir, w.Name), To: filepath.Join(QuarantineDir(env.RunID(), w.LogDir), w.Name), Kind: segments.Live.String(), State: "planned"})
		why = append(why, w.Why)
	}
	return out, why, nil
}

// Skip: a broker without would-be strays is not restarted.
func (w wouldBeWhile) Skip(ctx context.Context, env *steps.Env, id int32) (string, error) {
	mv, _, err := w.moves(ctx, env, id)
	if err != nil || len(mv) > 0 {
		return "", err
	}
	return fmt.Sprintf("no live log of broker %d will become stray", id), nil
}

func (w wouldBeWhile) Plan(ctx context.Context, env *steps.Env, id int32) ([]steps.Action, string, error) {
	moves, why, err := w.moves(ctx, env, id)
	if err != nil || len(moves) == 0 {
		return nil, "", err
	}
	for i := range why {
		why[i] = "will become stray: " + why[i]
	}
	return whileMoves(env, id, moves, why), "", nil
}

func (w wouldBeWhile) Apply(ctx context.Context, env *steps.Env, id int32, acts []steps.Action) error {
	// The broker is stopped (the roll waited until its port closed); the
	// host's .lock check proves it once more before the first move.
	now, _, err := w.moves(ctx, env, id)
	if err != nil {
		return err
	}
	return applyWhileMoves(ctx, env, id, acts, now, nil, "that will become stray")
}
