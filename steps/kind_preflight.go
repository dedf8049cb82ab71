package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kremedy/kremedy/steps/segments"
)

// preflight looks before anything happens: it refuses clusters kremedy must
// not touch, proves every host is reachable with a verified key, finds the
// log dirs, and records the topic's state everywhere. It changes nothing.
type preflight struct {
	checks []Check
	plan   *Plan
}

func (k *preflight) Plan(ctx context.Context, r *Run) (*Plan, error) {
	p, checks, err := gatherPreflight(ctx, r)
	k.plan, k.checks = p, checks
	return p, err
}

func (k *preflight) Apply(context.Context, *Run, *Plan) error { return nil }

func (k *preflight) Verify(ctx context.Context, r *Run) ([]Check, error) {
	if k.checks != nil {
		c := k.checks
		k.checks = nil
		return c, nil
	}
	// Resume: facts are not journaled state, they are re-read.
	_, checks, err := gatherPreflight(ctx, r)
	return checks, err
}

// dirState is a topic's partition directories found on one broker.
type dirState struct {
	Broker  int32                  `json:"broker"`
	LogDir  string                 `json:"log_dir"`
	Matches []segments.Match       `json:"matches,omitempty"`
	Strays  []segments.Unparseable `json:"strays,omitempty"`
	IDs     map[string]string
}

func gatherPreflight(ctx context.Context, r *Run) (*Plan, []Check, error) {
	t := r.Topic()
	p := &Plan{NoOp: true, Summary: fmt.Sprintf("read-only look at %q on cluster %s", t, r.Target.Name)}
	// The diagnosis reads the same cluster independently; it runs beside
	// the checks below instead of after them (it is ~0.1-0.2 s of round
	// trips on the lab), and is cancelled if preflight returns early.
	dctx, cancelDiag := context.WithCancel(ctx)
	diagDone := make(chan struct{})
	var diag *Diagnosis
	var diagErr error
	go func() {
		defer close(diagDone)
		diag, diagErr = Diagnose(dctx, r.Target, r.ZK, r.Kafka, r.Remote, DiagnoseOptions{Topic: t, Disk: true})
	}()
	defer func() { cancelDiag(); <-diagDone }()
	var checks []Check
	ok := func(name, detail string) { checks = append(checks, Check{Name: name, OK: true, Detail: detail}) }
	fact := func(format string, a ...any) { p.Facts = append(p.Facts, fmt.Sprintf(format, a...)) }
	refuse := func(format string, a ...any) (*Plan, []Check, error) {
		return p, checks, fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, a...))
	}
	chroot := r.ZK.Chroot()
	if chroot == "" {
		chroot = "(no chroot)"
	}
	for _, need := range []string{BrokerIDsPath, ClusterIDPath} {
		has, err := r.exists(ctx, need)
		if err != nil {
			return p, checks, fmt.Errorf("ZooKeeper %s: %w", r.Target.ZKConnect, err)
		}
		if !has {
			return refuse("ZooKeeper chroot %s has no %s: this is not the Kafka cluster's chroot (a wrong chroot silently starts a new, empty cluster). Check zookeeper.connect in the inventory against the brokers' server.properties; nothing was changed", chroot, need)
		}
	}
	if has, err := r.exists(ctx, MigrationPath); err != nil {
		return p, checks, err
	} else if has {
		return refuse("%s%s exists: the cluster is migrating from ZooKeeper to KRaft; manual znode surgery now would corrupt the migration. Nothing was changed", r.ZK.Chroot(), MigrationPath)
	}
	ok("ZooKeeper chroot is a Kafka cluster", fmt.Sprintf("%s has %s and %s, no %s", chroot, BrokerIDsPath, ClusterIDPath, MigrationPath))

	reg, err := r.registered(ctx)
	if err != nil {
		return p, checks, err
	}
	ctrl, err := r.controller(ctx)
	if err != nil {
		return p, checks, err
	}
	r.Facts = Facts{Controller: ctrl, Registered: reg, LogDirs: map[int32][]string{}, AutoCreate: map[int32]bool{}, Addrs: map[int32]string{}}
	if b, _, err := r.ZK.Get(ctx, ClusterIDPath); err == nil {
		var cid struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &cid) == nil {
			r.Facts.ClusterID = cid.ID
		}
	}
	// A resumed run must be on the cluster it started on: an inventory
	// edited (or a DNS name moved) between attempts would otherwise carry
	// the run's later, destructive steps to another cluster.
	if r.Prior != nil && r.Prior.ClusterID != "" && r.Facts.ClusterID != r.Prior.ClusterID {
		return refuse("this run started on the cluster with id %s, but %s%s now says %q: the inventory points at another cluster. Nothing was changed; check the inventory (%s)", r.Prior.ClusterID, r.ZK.Chroot(), ClusterIDPath, r.Facts.ClusterID, r.Meta.Inventory)
	}
	for _, id := range reg {
		r.Facts.Addrs[id] = r.brokerAddr(ctx, id)
	}
	if r.Prior != nil {
		for id, a := range r.Prior.Addrs {
			if _, ok := r.Facts.Addrs[id]; !ok && a != "" {
				r.Facts.Addrs[id] = a
			}
		}
	}
	inv := r.hostIDs()
	for _, id := range reg {
		if !slices.Contains(inv, id) {
			return refuse("broker %d is registered in ZooKeeper but not in the inventory: kremedy could not stop it, and a full restart with one broker left running would keep its stale state. Add it to the inventory; nothing was changed", id)
		}
	}
	fact("brokers registered %s of inventory %s; controller %d", i32s(reg), i32s(inv), ctrl)
	for _, id := range inv {
		if !slices.Contains(reg, id) {
			p.Notes = append(p.Notes, fmt.Sprintf("broker %d is in the inventory but not registered in ZooKeeper (stopped or crashed)", id))
		}
	}

	for _, h := range r.Target.Hosts {
		dirs := h.LogDirs
		if len(dirs) == 0 && !slices.Contains(reg, h.ID) && r.Prior != nil {
			dirs = r.Prior.LogDirs[h.ID] // found while it ran, in an earlier attempt
		}
		if len(dirs) == 0 {
			if !slices.Contains(reg, h.ID) {
				return refuse("broker %d is down and the inventory lists no log_dirs for it, so kremedy cannot find its segments; add log_dirs to the inventory", h.ID)
			}
			if dirs, err = r.Kafka.LogDirs(ctx, h.ID); err != nil {
				return p, checks, fmt.Errorf("log dirs of broker %d: %w", h.ID, err)
			}
		}
		r.Facts.LogDirs[h.ID] = dirs
	}
	// The disks are listed over SSH while the brokers are asked below.
	var listing map[int32]map[string][]segments.Entry
	var listErr error
	listDone := make(chan struct{})
	go func() { defer close(listDone); listing, listErr = r.listAll(ctx) }()
	defer func() { <-listDone }() // an early return still waits for the SSH listings
	// What else is already unhealthy, before anything is done: the health
	// gate after the restart must not blame the run for it, and the
	// operator must hear of it before the whole cluster is stopped.
	baseDone := make(chan struct{})
	go func() {
		defer close(baseDone)
		switch {
		case r.Prior != nil && r.Prior.Baseline:
			r.Facts.UnhealthyBefore = r.Prior.UnhealthyBefore // the first attempt's, never one read after the restart
		case r.Prior != nil:
			// An earlier attempt recorded none: count nothing as pre-existing.
		default:
			r.Facts.UnhealthyBefore = r.unhealthyNow(ctx, reg)
		}
		r.Facts.Baseline = true
	}()
	defer func() { <-baseDone }()
	// Every broker is asked at once; the answers are read in broker order.
	type configAnswer struct {
		v   string
		err error
	}
	configs := eachID(reg, func(id int32) configAnswer {
		v, err := r.Kafka.BrokerConfig(ctx, id, "auto.create.topics.enable")
		return configAnswer{v, err}
	})
	for i, id := range reg {
		v, err := configs[i].v, configs[i].err
		if err != nil {
			p.Notes = append(p.Notes, fmt.Sprintf("could not read auto.create.topics.enable on broker %d: %v", id, err))
			continue
		}
		r.Facts.AutoCreate[id] = v == "true"
		if v == "true" {
			p.Notes = append(p.Notes, fmt.Sprintf("broker %d has auto.create.topics.enable=true: any client still attached can silently recreate %q between steps; detach every client first", id, t))
		}
	}

	// The topic in ZooKeeper.
	var zt TopicZNode
	var ctime time.Time
	hasTopic := false
	if b, st, err := r.ZK.Get(ctx, TopicPath(t)); err == nil {
		if err := DecodeZNode(r.ZK.Chroot()+TopicPath(t), b, &zt); err != nil {
			return p, checks, err
		}
		hasTopic, ctime = true, st.Ctime
		r.Facts.TopicID = zt.TopicID
		if r.Facts.Partitions, err = zt.Assignment(); err != nil {
			return p, checks, err
		}
		fact("%s%s: %d partitions, topic_id %s, created %s", r.ZK.Chroot(), TopicPath(t), len(zt.Partitions), orDash(zt.TopicID), ctime.UTC().Format(time.RFC3339))
	} else if !r.ZK.IsNoNode(err) {
		return p, checks, err
	} else {
		fact("%s%s: absent", r.ZK.Chroot(), TopicPath(t))
	}
	if b, _, err := r.ZK.Get(ctx, ConfigTopicPath(t)); err == nil {
		var cz TopicConfigZNode
		if DecodeZNode("", b, &cz) == nil {
			r.Facts.Configs = cz.Config
		}
		fact("%s%s: present %v", r.ZK.Chroot(), ConfigTopicPath(t), r.Facts.Configs)
	}
	pending, err := r.exists(ctx, DeleteTopicPath(t))
	if err != nil {
		return p, checks, err
	}
	if pending {
		fact("%s%s: PRESENT — the topic is marked for deletion and the deletion has not completed", r.ZK.Chroot(), DeleteTopicPath(t))
	}

	// Each broker's own metadata.
	consistent := !pending && len(reg) == len(inv)
	ids := map[string]bool{}
	if zt.TopicID != "" {
		ids[zt.TopicID] = true
	}
	type viewAnswer struct {
		v   BrokerView
		err error
	}
	views := eachID(reg, func(id int32) viewAnswer {
		v, err := r.Kafka.BrokerView(ctx, id, t)
		return viewAnswer{v, err}
	})
	for i, id := range reg {
		v, err := views[i].v, views[i].err
		if err != nil {
			fact("broker %d metadata: no answer (%v)", id, err)
			consistent = false
			continue
		}
		tv := v.Topics[t]
		switch {
		case !tv.Present():
			fact("broker %d metadata: %s", id, tv.Err)
			consistent = consistent && !hasTopic
		default:
			urp := 0
			for _, pv := range tv.Partitions {
				if pv.UnderReplicated() || pv.Leader < 0 || pv.Err != "" {
					urp++
				}
			}
			fact("broker %d metadata: lists %q, %d partitions, topic ID %s, %d partitions under-replicated or leaderless", id, t, len(tv.Partitions), orDash(tv.ID), urp)
			if tv.ID != "" {
				ids[tv.ID] = true
			}
			consistent = consistent && hasTopic && tv.ID == zt.TopicID && len(tv.Partitions) == len(zt.Partitions) && urp == 0
		}
	}

	<-baseDone
	if u := r.Facts.UnhealthyBefore; len(u) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("other topics' partitions are already offline or under-replicated, before anything is done: %s. A full restart will not repair them; the health gate after it waits for them during health_grace (%s), then names them and does not fail on them while they are no worse (the restart did not cause them), but fails on any other. Look at them first: `kremedy diagnose`", summarize(slices.Collect(maps.Keys(u))), r.healthGrace()))
	}

	// Partition directories on every broker's disk.
	<-listDone
	all, err := listing, listErr
	if err != nil && !errors.Is(err, ErrRefused) {
		return p, checks, fmt.Errorf("%w: %v. kremedy must reach every broker over SSH before it changes anything; nothing was changed", ErrRefused, err)
	}
	if err != nil {
		return p, checks, err
	}
	for _, h := range r.Target.Hosts {
		listing := all[h.ID]
		for _, dir := range r.Facts.LogDirs[h.ID] {
			entries := listing[dir]
			for _, e := range entries {
				if d, err := segments.ParseDir(e.Name); err == nil && d.Topic == t && e.TopicID != "" {
					ids[e.TopicID] = true // exactly this topic's, never orders-v2's
				}
			}
			matches, strays := segments.Select(entries, t, idList(ids))
			for _, s := range strays {
				p.Notes = append(p.Notes, fmt.Sprintf("broker %d %s/%s: %s — Kafka refuses to start with it inside a log dir; kremedy reports it and does not move it", h.ID, dir, s.Name, s.Why))
			}
			for _, m := range matches {
				id := idOf(entries, m.Dir.Name)
				fact("broker %d %s/%s (%s, topic id %s)", h.ID, dir, m.Dir.Name, m.Dir.Kind, orDash(id))
				assigned := slices.Contains(r.Facts.Partitions[m.Dir.Partition], h.ID)
				if m.Dir.Kind != segments.Live || !hasTopic || !assigned || (zt.TopicID != "" && id != zt.TopicID) {
					consistent = false
				}
			}
		}
	}
	ok("every broker host reachable over SSH with a verified host key", fmt.Sprintf("%d hosts, log dirs listed", len(r.Target.Hosts)))
	for id := range ids {
		if id != zt.TopicID {
			r.Facts.OldIDs = append(r.Facts.OldIDs, id)
		}
	}
	slices.Sort(r.Facts.OldIDs)

	// Old records in a "new" topic: the adoption the report proved by dates.
	if hasTopic && consistent {
		for part := range r.Facts.Partitions {
			ts, has, err := r.Kafka.FirstRecordTime(ctx, t, part)
			if err != nil {
				fact("first record of %s-%d: %v", t, part, err)
				consistent = false
				continue
			}
			if has && ts.Before(ctime.Add(-time.Second)) {
				fact("%s-%d holds a record from %s, before the topic was created (%s): old segments were adopted", t, part, ts.UTC().Format(time.RFC3339), ctime.UTC().Format(time.RFC3339))
				consistent = false
			}
		}
	}
	// Once a run has found the topic inconsistent it is a cleanup run to
	// its end: a resume after this run's own znode deletion, restart or
	// recreation may well find everything consistent, and must still finish
	// (verify proves the recreated topic, removes a leftover canary).
	if consistent && r.Prior != nil && !r.Prior.Clean {
		consistent = false
		p.Notes = append(p.Notes, fmt.Sprintf("%q looks consistent now, but this run's first preflight found it inconsistent: the run continues to its end and verify proves the result", t))
	}
	r.Facts.Clean = consistent
	if consistent {
		if hasTopic {
			p.Summary = fmt.Sprintf("%q is consistent: ZooKeeper, every broker's metadata and every disk agree, no old records — nothing to clean", t)
		} else {
			p.Summary = fmt.Sprintf("%q is absent from ZooKeeper, from every broker's metadata and from every disk — nothing to clean", t)
		}
	} else {
		p.Summary = fmt.Sprintf("%q is inconsistent across ZooKeeper, broker caches and disks: the cleanup applies", t)
	}
	ok("topic state recorded", p.Summary)
	// The same findings `kremedy diagnose --topic` reports, so that the
	// first screen of a run shows them (started at the top, read-only).
	<-diagDone
	if d, err := diag, diagErr; err != nil {
		p.Notes = append(p.Notes, fmt.Sprintf("diagnosis incomplete: %v", err))
	} else {
		for _, f := range d.Findings {
			p.Facts = append(p.Facts, fmt.Sprintf("finding [%s] %s: %s", f.Severity, f.Kind, f.Summary))
		}
		if d.Healthy {
			p.Facts = append(p.Facts, "diagnosis: no findings")
		}
	}
	p.Payload, _ = jsonRaw(r.Facts)
	return p, checks, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func idList(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func idOf(entries []segments.Entry, name string) string {
	for _, e := range entries {
		if e.Name == name {
			return e.TopicID
		}
	}
	return ""
}

const listFunc = `kremedy_list() {
  ( cd -- "$2" 2>/dev/null || { printf '%s\tx\t\t\n' "$1"; exit 0; }
    for e in * .[!.]* ..?*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      if [ -d "$e" ]; then
        id=
        if [ -f "$e/partition.metadata" ] && [ -r "$e/partition.metadata" ]; then
          while IFS= read -r l || [ -n "$l" ]; do
            case $l in topic_id:*) id=${l#topic_id:}; id=${id#"${id%%[! ]*}"}; break ;; esac
          done < "$e/partition.metadata"
        fi
        printf '%s\td\t%s\t%s\n' "$1" "$e" "$id"
      else
        printf '%s\tf\t%s\t\n' "$1" "$e"
      fi
    done )
}
`

// listAll lists every broker host's log dirs, hosts in parallel; an error
// names every host that failed.
func (r *Run) listAll(ctx context.Context) (map[int32]map[string][]segments.Entry, error) {
	out, errs := r.listEach(ctx)
	var all []error
	for _, h := range r.Target.Hosts {
		if err := errs[h.ID]; err != nil {
			all = append(all, err)
		}
	}
	return out, errors.Join(all...)
}

// listEach lists every broker host's log dirs, hosts in parallel, with each
// failed host's error.
func (r *Run) listEach(ctx context.Context) (map[int32]map[string][]segments.Entry, map[int32]error) {
	type res struct {
		l   map[string][]segments.Entry
		err error
	}
	ids := r.hostIDs()
	got := eachID(ids, func(id int32) res { l, err := r.listLogDirs(ctx, id); return res{l, err} })
	out := map[int32]map[string][]segments.Entry{}
	errs := map[int32]error{}
	for i, id := range ids {
		out[id] = got[i].l
		if err := got[i].err; err != nil {
			h, _ := r.Target.Host(id)
			if !errors.Is(err, ErrRefused) {
				err = fmt.Errorf("broker %d's host %s: %w", id, h.Host, err)
			}
			errs[id] = err
		}
	}
	return out, errs
}

// listFunc lists log dirs: one line per entry with the dir's index, the
// kind (d, f, or x for a missing dir), the name, and for directories the
// topic id from partition.metadata. Shell builtins only: a log dir holds
// thousands of partition directories, and a fork or two per directory
// (sed, head) cost ~0.3 s per listing on the 3-broker lab.
//
// listLogDirs lists every log dir of one broker host in one SSH command.
func (r *Run) listLogDirs(ctx context.Context, broker int32) (map[string][]segments.Entry, error) {
	dirs := r.Facts.LogDirs[broker]
	var script strings.Builder
	script.WriteString(listFunc)
	for i, d := range dirs {
		fmt.Fprintf(&script, "kremedy_list %d %s\n", i, ShQuote(d))
	}
	out := map[string][]segments.Entry{}
	var missing, bad []string
	err := r.Remote.Run(ctx, broker, Script(script.String()), func(l Line) {
		f := strings.SplitN(l.Text, "\t", 4)
		var i int
		if l.Stderr || len(f) != 4 || func() bool { _, err := fmt.Sscanf(f[0], "%d", &i); return err != nil }() || i < 0 || i >= len(dirs) {
			bad = append(bad, l.Text)
			return
		}
		switch f[1] {
		case "x":
			missing = append(missing, dirs[i])
		default:
			out[dirs[i]] = append(out[dirs[i]], segments.Entry{Name: f[2], IsDir: f[1] == "d", TopicID: f[3]})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list log dirs on broker %d: %w", broker, err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: log dir(s) %v do not exist on broker %d's host; check log_dirs in the inventory", ErrRefused, missing, broker)
	}
	if len(bad) > 0 {
		r.Logf("broker %d: unexpected lines while listing log dirs: %v", broker, bad)
	}
	return out, nil
}

// eachID runs f for every id (brokers, partitions) at once, at most 16 at
// a time, and returns the answers in the order of ids.
func eachID[T any](ids []int32, f func(id int32) T) []T {
	out := make([]T, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = f(id)
		}()
	}
	wg.Wait()
	return out
}

// unhealthyNow lists other topics' partitions that every broker that
// answers reports offline or under-replicated right now, for a reason the
// restart will not remove: a replica out of sync on a broker that runs, or
// on a broker that is not in the inventory (kremedy does not start it). A
// partition short only of inventory brokers that are down now is not
// listed: the restart starts them, and the gate must see it heal. Every
// broker must agree, so that one broker's stale cache can neither add a
// healthy partition nor make it look better than it is (the ISR kept is the
// largest any broker reports; offline only if every broker says so).
func (r *Run) unhealthyNow(ctx context.Context, reg []int32) map[string]Unhealthy {
	inv := r.hostIDs()
	stays := func(id int32) bool { return slices.Contains(reg, id) || !slices.Contains(inv, id) }
	seen := map[string]int{}
	out := map[string]Unhealthy{}
	views := 0
	for _, v := range eachID(reg, func(id int32) *BrokerView {
		if v, err := r.Kafka.BrokerView(ctx, id); err == nil {
			return &v
		}
		return nil
	}) {
		if v == nil {
			continue
		}
		views++
		for name, tv := range v.Topics {
			if name == r.Topic() {
				continue
			}
			for _, pv := range tv.Partitions {
				off := pv.IsOffline()
				if !off && !pv.UnderReplicated() {
					continue
				}
				for _, rep := range pv.Replicas {
					if !slices.Contains(pv.ISR, rep) && stays(rep) {
						key := fmt.Sprintf("%s-%d", name, pv.Partition)
						u, ok := out[key]
						if !ok {
							u.Offline = true
						}
						u.Offline = u.Offline && off
						u.ISR = max(u.ISR, len(pv.ISR))
						out[key] = u
						seen[key]++
						break
					}
				}
			}
		}
	}
	for key := range out {
		if seen[key] < views {
			delete(out, key)
		}
	}
	return out
}
