package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/javaprops"
)

// Mode is what a node's config file says it runs as.
type Mode string

const (
	ModeZK         Mode = "zookeeper"  // a ZooKeeper-mode broker
	ModeMigration  Mode = "migration"  // a ZooKeeper-mode broker in migration mode (or a controller still migrating)
	ModeKRaft      Mode = "kraft"      // a KRaft broker (process.roles=broker)
	ModeController Mode = "controller" // a KRaft controller, migration flag removed (finalized)
	ModeUnknown    Mode = "unknown"
)

// Keys the migration adds, removes or reads (Kafka 3.9 docs, "ZooKeeper
// to KRaft Migration"; KafkaConfig.scala's migration checks).
const (
	keyMigration   = "zookeeper.metadata.migration.enable"
	keyVoters      = "controller.quorum.voters"
	keyBootstrap   = "controller.quorum.bootstrap.servers"
	keyCtrlNames   = "controller.listener.names"
	keyProtoMap    = "listener.security.protocol.map"
	keyBrokerID    = "broker.id"
	keyNodeID      = "node.id"
	keyRoles       = "process.roles"
	keyIBP         = "inter.broker.protocol.version"
	keyControlPl   = "control.plane.listener.name"
	keyAuthorizer  = "authorizer.class.name"
	zkPrefix       = "zookeeper."
	aclAuthorizer  = "kafka.security.authorizer.AclAuthorizer"
	kraftAuthorize = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
)

// defaultProtoMap is Kafka's listener.security.protocol.map default.
const defaultProtoMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// Props is a config file as text, edited line by line the way an operator
// edits it: comments, order and every untouched line stay as they are.
type Props struct {
	Text   string
	values map[string]string
}

// ParseProps reads a config file as Java does (javaprops) and keeps its
// text for editing.
func ParseProps(text string) (*Props, error) {
	m, err := javaprops.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	return &Props{Text: text, values: m.Values}, nil
}

// Get is a key's value as Java reads it.
func (p *Props) Get(k string) (string, bool) {
	v, ok := p.values[k]
	return v, ok
}

// ModeOf says what a broker's config file makes it.
func (p *Props) BrokerMode() Mode {
	roles, _ := p.Get(keyRoles)
	mig, _ := p.Get(keyMigration)
	_, zk := p.Get("zookeeper.connect")
	switch {
	case strings.TrimSpace(roles) == "broker":
		return ModeKRaft
	case roles != "":
		return ModeUnknown
	case zk && strings.EqualFold(strings.TrimSpace(mig), "true"):
		return ModeMigration
	case zk:
		return ModeZK
	}
	return ModeUnknown
}

// ControllerMode says whether a controller's config still migrates.
func (p *Props) ControllerMode() Mode {
	roles, _ := p.Get(keyRoles)
	mig, _ := p.Get(keyMigration)
	switch {
	case strings.TrimSpace(roles) != "controller":
		return ModeUnknown
	case strings.EqualFold(strings.TrimSpace(mig), "true"):
		return ModeMigration
	}
	return ModeController
}

// Edit is a change to a config file: keys set (added or replaced, in
// order) and keys removed (a trailing "*" removes every key with that
// prefix).
type Edit struct {
	Set    [][2]string
	Remove []string
}

// Diff is what an edit does to a file, line by line, for the plan.
type Diff struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

func (d Diff) String() string {
	var out []string
	for _, l := range d.Removed {
		out = append(out, "- "+l)
	}
	for _, l := range d.Added {
		out = append(out, "+ "+l)
	}
	if len(out) == 0 {
		return "no change"
	}
	return strings.Join(out, "; ")
}

// lineKey is a logical line's key ("" for blanks and comments) and whether
// it continues on the next line.
func lineKey(line string) (string, bool) {
	t := strings.TrimLeft(line, " \t\f")
	if t == "" || t[0] == '#' || t[0] == '!' {
		return "", false
	}
	end := strings.IndexAny(t, "=: \t\f")
	k := t
	if end >= 0 {
		k = t[:end]
	}
	bs := len(line) - len(strings.TrimRight(line, "\\"))
	return k, bs%2 == 1
}

func (e Edit) removes(k string) bool {
	for _, r := range e.Remove {
		if p, ok := strings.CutSuffix(r, "*"); ok && strings.HasPrefix(k, p) || r == k {
			return true
		}
	}
	return false
}

// Apply returns the edited text and its diff. A key the edit touches that
// spans several lines (a backslash continuation) or contains escapes is
// refused: kremedy does not rewrite what it could misread.
func (p *Props) Apply(e Edit) (string, Diff, error) {
	lines := strings.SplitAfter(p.Text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	setIdx := map[string]int{}
	for i, kv := range e.Set {
		setIdx[kv[0]] = i
	}
	done := make([]bool, len(e.Set))
	var out []string
	var d Diff
	cont := false
	for _, raw := range lines {
		line := strings.TrimRight(raw, "\r\n")
		if cont {
			_, cont = lineKey("x=" + line)
			out = append(out, raw)
			continue
		}
		k, c := lineKey(line)
		cont = c
		i, isSet := setIdx[k]
		if k == "" || (!isSet && !e.removes(k)) {
			out = append(out, raw)
			continue
		}
		if c || strings.Contains(k, "\\") {
			return "", Diff{}, fmt.Errorf("the line of %s continues over several lines or uses escapes; edit it by hand into one key=value line first", k)
		}
		switch {
		case isSet && !done[i]:
			want := e.Set[i][0] + "=" + javaprops.EscapeValue(e.Set[i][1])
			done[i] = true
			if line == want {
				out = append(out, raw)
				continue
			}
			d.Removed, d.Added = append(d.Removed, line), append(d.Added, want)
			out = append(out, want+"\n")
		default: // removed, or a duplicate of a key set above
			d.Removed = append(d.Removed, line)
		}
	}
	text := strings.Join(out, "")
	var tail []string
	for i, kv := range e.Set {
		if !done[i] {
			tail = append(tail, kv[0]+"="+javaprops.EscapeValue(kv[1]))
		}
	}
	if len(tail) > 0 {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "# added by kremedy zk-to-kraft\n" + strings.Join(tail, "\n") + "\n"
		d.Added = append(d.Added, tail...)
	}
	return text, d, nil
}

// Quorum is how brokers and controllers find the KRaft controllers.
type Quorum struct {
	Voters   string // controller.quorum.voters: id@host:port,…
	Listener string // controller.listener.names
	Protocol string // the controller listener's security protocol
	// Settings are what a broker needs to log in to a secured controller
	// listener (ControllerSettings.Set): added after the rest.
	Settings [][2]string
}

// MigrationEdit is the edit that puts a ZooKeeper-mode broker into migration
// mode: the migration flag, the controller quorum and its listener in the
// protocol map, and on a secured cluster the login at that listener (the
// operator's controller_settings). broker.id stays.
func MigrationEdit(p *Props, q Quorum) (Edit, error) {
	if id, ok := p.Get(keyBrokerID); !ok || strings.TrimSpace(id) == "" || strings.HasPrefix(strings.TrimSpace(id), "-") {
		return Edit{}, fmt.Errorf("no fixed broker.id: the migration needs one (generated broker ids are refused, KAFKA-17042); set broker.id to the id in meta.properties first")
	}
	pm, ok := p.Get(keyProtoMap)
	if !ok || strings.TrimSpace(pm) == "" {
		pm = defaultProtoMap
	}
	entries := strings.Split(pm, ",")
	if !slices.ContainsFunc(entries, func(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), q.Listener+":") }) {
		entries = append(entries, q.Listener+":"+q.Protocol)
	}
	return Edit{Set: append([][2]string{
		{keyMigration, "true"},
		{keyVoters, q.Voters},
		{keyCtrlNames, q.Listener},
		{keyProtoMap, strings.Join(entries, ",")},
	}, q.Settings...)}, nil
}

// KRaftEdit is the edit that makes a migration-mode broker a KRaft broker:
// node.id instead of broker.id, process.roles=broker, every ZooKeeper
// setting (the migration flag with them), the IBP and the control-plane
// listener removed (KAFKA-17790), and AclAuthorizer replaced by
// StandardAuthorizer.
func KRaftEdit(p *Props) (Edit, error) {
	id, ok := p.Get(keyBrokerID)
	if !ok || strings.TrimSpace(id) == "" {
		return Edit{}, fmt.Errorf("no broker.id to carry over as node.id")
	}
	if p.BrokerMode() != ModeMigration {
		return Edit{}, fmt.Errorf("the broker's config is not in migration mode (%s): roll it into migration mode first", p.BrokerMode())
	}
	e := Edit{Set: [][2]string{{keyRoles, "broker"}, {keyNodeID, strings.TrimSpace(id)}},
		Remove: []string{keyBrokerID, zkPrefix + "*", keyIBP, keyControlPl}}
	if a, _ := p.Get(keyAuthorizer); strings.TrimSpace(a) == aclAuthorizer {
		e.Set = append(e.Set, [2]string{keyAuthorizer, kraftAuthorize})
	}
	return e, nil
}

// FinalizeController removes the migration flag and the ZooKeeper
// settings from a controller: after its roll it no longer writes to
// ZooKeeper.
func FinalizeController() Edit {
	return Edit{Remove: []string{zkPrefix + "*"}}
}

// OutOfMigration is the revert's last edit of a broker whose pre-migration
// backup is gone: the migration settings removed again (the controller
// listener stays in the protocol map, which is harmless).
func OutOfMigration() Edit {
	return Edit{Remove: []string{keyMigration, keyVoters, keyBootstrap, keyCtrlNames}}
}
