package inventory

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

const header = `# kremedy inventory: one Kafka cluster in ZooKeeper mode.
# The format is described, key by key, in inventory/example.yaml in kremedy's source.
# Passwords never go in this file: use zookeeper.auth.password_env or password_file.
`

const headerKRaft = `# kremedy inventory: one Kafka cluster in KRaft mode.
# The format is described, key by key, in inventory/example.yaml in kremedy's source.
# Passwords never go in this file: the client properties file names where they are.
`

// Marshal renders inv as YAML in the order of example.yaml, after a header
// comment, leaving out empty values. Parse reads the result back to an equal
// Inventory (Path aside, which is not part of the file). It fails only on
// text that is not valid UTF-8.
func (inv *Inventory) Marshal() ([]byte, error) {
	e := &emitter{}
	e.header(inv)
	e.str(0, "name", inv.Name)
	if inv.Lab {
		e.line(0, "lab: true")
	}
	e.str(0, "mode", inv.Mode)
	e.section(0, "zookeeper", func(e *emitter) { e.zookeeper(inv.ZooKeeper) })
	e.section(0, "kafka", func(e *emitter) { e.kafka(inv.Kafka) })
	e.section(0, "ssh", func(e *emitter) { e.ssh(inv.SSH) })
	e.nodes("brokers", inv.Brokers)
	e.nodes("kraft_controllers", inv.KRaftControllers)
	e.clients(inv.Clients)
	e.notify(inv.Notify)
	e.policy(inv.Policy)
	if e.err != nil {
		return nil, e.err
	}
	return e.b.Bytes(), nil
}

// header writes the comment that opens the file: the mode's header, then
// inv.Note one "# " line per non-empty line.
func (e *emitter) header(inv *Inventory) {
	if inv.KRaft() {
		e.b.WriteString(headerKRaft)
	} else {
		e.b.WriteString(header)
	}
	for _, l := range strings.Split(strings.TrimSpace(inv.Note), "\n") {
		if l != "" {
			e.b.WriteString("# " + l + "\n")
		}
	}
}

// zookeeper writes the keys of the zookeeper section at level 1; an auth
// block with nothing set is written as "auth: {}" so it reads back non-nil.
func (e *emitter) zookeeper(zk ZooKeeper) {
	e.str(1, "connect", zk.Connect)
	if a := zk.Auth; a != nil {
		e.section(1, "auth", func(e *emitter) {
			e.str(2, "user", a.User)
			e.str(2, "password_env", a.PasswordEnv)
			e.str(2, "password_file", a.PasswordFile)
		})
		if !e.wrote {
			e.line(1, "auth: {}")
		}
	}
	e.str(1, "tls_config_file", zk.TLSConfigFile)
	e.int(1, "max_in_flight", int64(zk.MaxInFlight))
}

// kafka writes the keys of the kafka section at level 1.
func (e *emitter) kafka(k Kafka) {
	e.strs(1, "bootstrap", k.Bootstrap)
	e.str(1, "client_properties", k.ClientProperties)
	e.str(1, "controller_client_properties", k.ControllerClientProperties)
	e.str(1, "krb5_conf", k.Krb5Conf)
}

// ssh writes the keys of the ssh section (the defaults every host
// inherits) at level 1.
func (e *emitter) ssh(s SSH) {
	e.str(1, "user", s.User)
	e.int(1, "port", int64(s.Port))
	e.str(1, "identity_file", s.IdentityFile)
	if s.Agent {
		e.line(1, "agent: true")
	}
	e.str(1, "known_hosts", s.KnownHosts)
	e.str(1, "config", s.Config)
	e.str(1, "proxy_jump", s.ProxyJump)
	e.str(1, "become", s.Become)
	if s.ConnectTimeout.Duration != 0 {
		e.line(1, "connect_timeout: "+durationText(s.ConnectTimeout))
	}
}

// nodes writes a list of Kafka nodes (brokers or KRaft controllers) under
// key, or nothing when the list is empty.
func (e *emitter) nodes(key string, nodes []Broker) {
	if len(nodes) == 0 {
		return
	}
	e.line(0, key+":")
	for _, b := range nodes {
		e.item(func(e *emitter) {
			e.line(2, "id: "+strconv.FormatInt(int64(b.ID), 10))
			e.str(2, "host", b.Host)
			e.int(2, "port", int64(b.Port))
			e.str(2, "user", b.User)
			e.str(2, "identity_file", b.IdentityFile)
			e.str(2, "known_hosts", b.KnownHosts)
			e.str(2, "become", b.Become)
			e.str(2, "listener", b.Listener)
			e.str(2, "stop", b.Stop)
			e.str(2, "start", b.Start)
			e.strs(2, "log_dirs", b.LogDirs)
			e.str(2, "config", b.Config)
			e.str(2, "server_log", b.ServerLog)
		})
	}
}

// clients writes the clients list, or nothing when it is empty.
func (e *emitter) clients(clients []Client) {
	if len(clients) == 0 {
		return
	}
	e.line(0, "clients:")
	for _, c := range clients {
		e.item(func(e *emitter) {
			e.str(2, "name", c.Name)
			e.str(2, "host", c.Host)
			e.str(2, "stop", c.Stop)
			e.str(2, "start", c.Start)
		})
	}
}

// notify writes the notify list, or nothing when it is empty.
func (e *emitter) notify(targets []Notify) {
	if len(targets) == 0 {
		return
	}
	e.line(0, "notify:")
	for _, n := range targets {
		e.item(func(e *emitter) {
			e.str(2, "url", n.URL)
			e.str(2, "url_env", n.URLEnv)
			e.str(2, "url_file", n.URLFile)
			e.str(2, "token_env", n.TokenEnv)
			e.str(2, "token_file", n.TokenFile)
			e.str(2, "format", n.Format)
		})
	}
}

// policy writes the policy section, nothing when p is nil, and
// "policy: {}" when p is set but empty so it reads back non-nil.
func (e *emitter) policy(p *Policy) {
	if p == nil {
		return
	}
	e.section(0, "policy", func(e *emitter) {
		e.int(1, "approvals", int64(p.Approvals))
		e.str(1, "allowed_signers", p.AllowedSigners)
		if p.Timeout.Duration != 0 {
			e.line(1, "timeout: "+durationText(p.Timeout))
		}
		if p.InLab {
			e.line(1, "in_lab: true")
		}
		e.str(1, "group", p.Group)
	})
	if !e.wrote {
		e.line(0, "policy: {}")
	}
}

// emitter writes block-style YAML, two spaces per level.
type emitter struct {
	b     bytes.Buffer
	err   error
	wrote bool // whether the last section wrote anything
}

func (e *emitter) line(level int, s string) {
	e.b.WriteString(strings.Repeat("  ", level))
	e.b.WriteString(s)
	e.b.WriteByte('\n')
}

func (e *emitter) str(level int, key, v string) {
	if v == "" {
		return
	}
	e.line(level, key+": "+e.quote(key, v))
}

func (e *emitter) int(level int, key string, v int64) {
	if v != 0 {
		e.line(level, key+": "+strconv.FormatInt(v, 10))
	}
}

func (e *emitter) strs(level int, key string, vs []string) {
	if len(vs) == 0 {
		return
	}
	e.line(level, key+":")
	for _, v := range vs {
		e.line(level+1, "- "+e.quote(key, v))
	}
}

// section writes "key:" and what fill writes under it, or nothing at all
// when fill writes nothing.
func (e *emitter) section(level int, key string, fill func(*emitter)) {
	sub := &emitter{}
	fill(sub)
	if e.err == nil {
		e.err = sub.err
	}
	e.wrote = sub.b.Len() > 0
	if !e.wrote {
		return
	}
	e.line(level, key+":")
	e.b.Write(sub.b.Bytes())
}

// item writes one element of a list of mappings at level 1, with fill
// writing the mapping's keys at level 2.
func (e *emitter) item(fill func(*emitter)) {
	sub := &emitter{}
	fill(sub)
	if e.err == nil {
		e.err = sub.err
	}
	if sub.b.Len() == 0 {
		e.line(1, "- {}")
		return
	}
	e.b.WriteString("  - ")
	e.b.Write(bytes.TrimPrefix(sub.b.Bytes(), []byte("    ")))
}

var (
	// plainRe is text that YAML reads back as the same string without
	// quotes: it starts with a letter, '/', '_' or "~/" and holds no
	// character YAML gives a meaning to.
	plainRe = regexp.MustCompile(`^(?:[A-Za-z/_]|~/)[A-Za-z0-9 ._/@%+=,:~-]*$`)
	// durationRe is what time.Duration.String produces for a positive value.
	durationRe = regexp.MustCompile(`^[0-9][0-9.]*(?:ns|us|µs|ms|s|m|h)(?:[0-9][0-9.]*(?:ns|us|µs|ms|s|m|h))*$`)
	keywords   = map[string]bool{
		"y": true, "yes": true, "n": true, "no": true, "true": true, "false": true,
		"on": true, "off": true, "null": true, "nan": true, "inf": true, "infinity": true,
	}
)

// quote returns v as a YAML scalar: plain when that is unambiguous,
// double-quoted otherwise.
func (e *emitter) quote(key, v string) string {
	if !utf8.ValidString(v) {
		if e.err == nil {
			e.err = fmt.Errorf("inventory %s %q is not valid UTF-8", key, v)
		}
		return `""`
	}
	if plainRe.MatchString(v) && !keywords[strings.ToLower(v)] &&
		!strings.Contains(v, ": ") && !strings.Contains(v, " #") &&
		!strings.HasSuffix(v, ":") && !strings.HasSuffix(v, " ") {
		return v
	}
	// strconv.Quote's escapes (\" \\ \n \t \xXX \uXXXX \UXXXXXXXX ...) are
	// also YAML double-quoted escapes, and on valid UTF-8 it only uses \x
	// for code points below 0x80, where the two agree.
	return strconv.Quote(v)
}

func durationText(d Duration) string {
	s := d.String()
	if durationRe.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}
