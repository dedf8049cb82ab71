package migrate

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kremedy/kremedy/internal/javaprops"
)

// A secured cluster's migration (Kafka 3.9.2's source, the lines each rule
// rests on):
//
//   - A broker reaches the controllers over their own listener
//     (controller.listener.names, its protocol in the broker's
//     listener.security.protocol.map) and logs in there with
//     sasl.mechanism.controller.protocol (default GSSAPI, KafkaConfig) and
//     the JAAS line of that listener and mechanism:
//     NodeToControllerChannelManager builds its channel with
//     ChannelBuilders.clientChannelBuilder(protocol, JaasContext.Type.SERVER,
//     config, controller listener, mechanism), and JaasContext.
//     loadServerContext reads listener.name.<listener>.<mechanism>.
//     sasl.jaas.config (AbstractConfig.valuesWithPrefixOverride strips the
//     listener prefix). TLS settings come from the same prefix, else the
//     broker's own ssl.*.
//   - A migrating controller sends the ZooKeeper-mode brokers their RPCs
//     (UpdateMetadata, LeaderAndIsr) over the brokers' inter-broker listener:
//     ControllerChannelManager uses inter.broker.listener.name,
//     sasl.mechanism.inter.broker.protocol and that listener's JAAS line, so
//     the controllers need them as the brokers have them.
//   - It writes ZooKeeper as the brokers do: ControllerServer makes its
//     client with KafkaZkClient.createZkClient(config), whose znodes carry
//     the secure ACLs when zookeeper.set.acl=true (and which refuses that
//     setting without ZooKeeper SASL — the JVM's JAAS Client section — or
//     TLS); zookeeper.ssl.* as the brokers'.
//   - In KRaft mode the controllers authorize what the brokers forward them
//     (CreateTopics, CreateAcls, …: ControllerApis): a controller without
//     authorizer.class.name allows everyone. The ACLs, SCRAM credentials and
//     client quotas move from ZooKeeper into the metadata log
//     (ZkMigrationClient.readAllMetadata: migrateClientQuotas with the SCRAM
//     credentials, migrateAcls, migrateDelegationTokens).

// ControllerSettings are what every broker needs to reach a secured
// controller listener, from the file the operator gives as
// controller_settings: sasl.mechanism.controller.protocol and
// listener.name.<listener>.* (its JAAS line, TLS overrides), in the
// file's order of keys (sorted for a stable plan).
type ControllerSettings struct {
	Path string
	Set  [][2]string
	// StaticJAAS: the nodes' SASL logins live in a static JAAS file
	// (KafkaServer sections, -Djava.security.auth.login.config), which
	// kremedy cannot read; their JAAS lines are not required then.
	StaticJAAS bool
}

// ReadControllerSettings reads and checks a controller_settings file: an
// absolute path (a resumed run reads it again), Java properties, each key
// one that belongs to the controller listener.
func ReadControllerSettings(path, listener string) (ControllerSettings, error) {
	if path == "" {
		return ControllerSettings{}, nil
	}
	if !filepath.IsAbs(path) {
		return ControllerSettings{}, fmt.Errorf("controller_settings %q: give an absolute path (a resumed run reads the file again, from wherever it is resumed)", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ControllerSettings{}, fmt.Errorf("controller_settings: %w", err)
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		return ControllerSettings{}, fmt.Errorf("controller_settings %s: %w", path, err)
	}
	prefix := "listener.name." + strings.ToLower(listener) + "."
	var bad []string
	s := ControllerSettings{Path: path}
	for _, k := range slices.Sorted(maps.Keys(p.Values)) {
		if k != keyCtrlMech && !strings.HasPrefix(k, prefix) {
			bad = append(bad, fmt.Sprintf("line %d: %s", p.Lines[k], k))
			continue
		}
		s.Set = append(s.Set, [2]string{k, p.Values[k]})
	}
	if len(bad) > 0 {
		return ControllerSettings{}, fmt.Errorf("controller_settings %s: only %s and %s* belong there (what the brokers need to reach the controllers' %s listener); not: %s",
			path, keyCtrlMech, prefix, listener, strings.Join(bad, ", "))
	}
	if len(s.Set) == 0 {
		return ControllerSettings{}, fmt.Errorf("controller_settings %s sets nothing", path)
	}
	return s, nil
}

// Keys the security checks read.
const (
	keyCtrlMech      = "sasl.mechanism.controller.protocol"
	keyIBLName       = "inter.broker.listener.name"
	keyIBProto       = "security.inter.broker.protocol"
	keyIBMech        = "sasl.mechanism.inter.broker.protocol"
	keyEnabledMechs  = "sasl.enabled.mechanisms"
	keyZKSetACL      = "zookeeper.set.acl"
	keyZKTLS         = "zookeeper.ssl.client.enable"
	keySuperUsers    = "super.users"
	defaultSASLMech  = "GSSAPI" // sasl.mechanism.*.protocol and sasl.enabled.mechanisms (KafkaConfig)
	defaultIBProto   = "PLAINTEXT"
	jaasSuffix       = ".sasl.jaas.config"
	listenerPrefixFm = "listener.name.%s."
)

// view is a node's config with what an edit would add laid over it.
type view struct {
	p    *Props
	over map[string]string
}

func (v view) get(k string) (string, bool) {
	if s, ok := v.over[k]; ok {
		return s, true
	}
	s, ok := v.p.Get(k)
	return strings.TrimSpace(s), ok
}

// protocolOf is the security protocol listener maps to.
func (v view) protocolOf(listener string) (string, bool) {
	pm, set := v.get(keyProtoMap)
	if !set || pm == "" {
		pm = defaultProtoMap
	}
	for e := range strings.SplitSeq(pm, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(e), ":")
		if ok && strings.EqualFold(name, listener) {
			return strings.ToUpper(strings.TrimSpace(proto)), true
		}
	}
	// A KRaft node (process.roles) without the map maps its controller
	// listeners to PLAINTEXT, unless a controller listener or a listener is
	// named SSL or SASL_* (KafkaConfig.effectiveListenerSecurityProtocolMap).
	if roles, _ := v.get(keyRoles); roles != "" && !set {
		names, _ := v.get(keyCtrlNames)
		listeners, _ := v.get("listeners")
		var all []string
		for n := range strings.SplitSeq(names, ",") {
			all = append(all, strings.ToUpper(strings.TrimSpace(n)))
		}
		for l := range strings.SplitSeq(listeners, ",") {
			if n, _, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
				all = append(all, strings.ToUpper(n))
			}
		}
		secured := slices.ContainsFunc(all, func(n string) bool { return n == "SSL" || n == "SASL_SSL" || n == "SASL_PLAINTEXT" })
		if !secured && slices.Contains(all[:len(strings.Split(names, ","))], strings.ToUpper(listener)) {
			return "PLAINTEXT", true
		}
	}
	return "", false
}

// interBroker is the node's inter-broker listener name and protocol.
func (v view) interBroker() (name, proto string) {
	if n, ok := v.get(keyIBLName); ok && n != "" {
		p, _ := v.protocolOf(n)
		return strings.ToUpper(n), p
	}
	p, ok := v.get(keyIBProto)
	if !ok || p == "" {
		p = defaultIBProto
	}
	return strings.ToUpper(p), strings.ToUpper(p)
}

func (v view) mech(key string) string {
	if m, ok := v.get(key); ok && m != "" {
		return strings.ToUpper(m)
	}
	return defaultSASLMech
}

// enabled are the SASL mechanisms the node serves on listener.
func (v view) enabled(listener string) []string {
	s, ok := v.get(fmt.Sprintf(listenerPrefixFm, strings.ToLower(listener)) + keyEnabledMechs)
	if !ok {
		s, ok = v.get(keyEnabledMechs)
	}
	if !ok {
		s = defaultSASLMech
	}
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			out = append(out, m)
		}
	}
	return out
}

func jaasKey(listener, mech string) string {
	return fmt.Sprintf(listenerPrefixFm, strings.ToLower(listener)) + strings.ToLower(mech) + jaasSuffix
}

func (v view) isTrue(k string) bool {
	s, _ := v.get(k)
	return strings.EqualFold(s, "true")
}

func sasl(proto string) bool { return strings.HasPrefix(proto, "SASL_") }

// jaasUser is the username of the broker's JAAS line for the controller
// listener (PLAIN and SCRAM name one), "" when there is none.
func jaasUser(b view, listener string) string {
	m := b.mech(keyCtrlMech)
	if m != "PLAIN" && !strings.HasPrefix(m, "SCRAM-") {
		return ""
	}
	line, _ := b.get(jaasKey(listener, m))
	if mm := jaasUsername.FindStringSubmatch(line); mm != nil {
		return mm[1]
	}
	return ""
}

var jaasUsername = regexp.MustCompile(`\busername\s*=\s*"([^"]*)"`)

// superUsers splits super.users (User:a;User:b).
func superUsers(s string) []string {
	var out []string
	for u := range strings.SplitSeq(s, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Security is what the security checks found: problems refuse the
// migration before anything changes, facts go into the plan.
type Security struct {
	// Protocol is the controller listener's security protocol, as the
	// controllers' own listener.security.protocol.map says.
	Protocol string
	Problems []string
	Facts    []string
}

// CheckSecurity compares the brokers' and the controllers' config files
// for what a secured cluster's migration needs (the rules at the top of
// this file), with the controller settings the migration's edit would add
// to each broker.
func CheckSecurity(brokerFiles, ctrlFiles map[int32]*Props, listener string, set ControllerSettings) Security {
	c := securityCheck{
		brokerFiles: brokerFiles, ctrlFiles: ctrlFiles, listener: listener, set: set,
		over: map[string]string{},
		bids: slices.Sorted(maps.Keys(brokerFiles)),
		cids: slices.Sorted(maps.Keys(ctrlFiles)),
	}
	for _, kv := range set.Set {
		c.over[kv[0]] = kv[1]
	}
	if len(c.bids) == 0 || len(c.cids) == 0 {
		return c.s
	}
	if c.s.Protocol = c.controllerProtocol(); c.s.Protocol == "" {
		return c.s
	}
	c.first = view{p: brokerFiles[c.bids[0]], over: c.over}
	c.ibName, c.ibProto = c.first.interBroker()
	c.brokersReachControllers()
	c.listenerFacts()
	c.controllersActForBrokers()
	return c.s
}

// securityCheck holds one CheckSecurity: its inputs, what it found so far
// (s), and what the first broker's file (with the controller settings
// added) says of the inter-broker listener, which every broker must share.
type securityCheck struct {
	brokerFiles, ctrlFiles map[int32]*Props
	bids, cids             []int32 // sorted
	listener               string
	set                    ControllerSettings
	over                   map[string]string // the settings' keys and values
	first                  view              // the first broker's, with over
	ibName, ibProto        string            // first's inter-broker listener
	s                      Security
}

// problem adds a problem to what the check found.
func (c *securityCheck) problem(f string, a ...any) {
	c.s.Problems = append(c.s.Problems, fmt.Sprintf(f, a...))
}

// fact adds a fact to what the check found.
func (c *securityCheck) fact(f string, a ...any) {
	c.s.Facts = append(c.s.Facts, fmt.Sprintf(f, a...))
}

// controllerProtocol is the security protocol of the controllers' own
// listener, where each names the runbook's listener first and maps it; it
// adds a problem for each controller that does not and for controllers that
// disagree ("" when none maps it).
func (c *securityCheck) controllerProtocol() string {
	protos := map[string][]int32{}
	for _, id := range c.cids {
		v := view{p: c.ctrlFiles[id]}
		names, _ := v.get(keyCtrlNames)
		first := strings.TrimSpace(strings.Split(names, ",")[0])
		if !strings.EqualFold(first, c.listener) {
			c.problem("controller %d's controller.listener.names is %q, not the runbook's controller_listener %s: set --set controller_listener=%s", id, names, c.listener, first)
			continue
		}
		p, ok := v.protocolOf(c.listener)
		if !ok {
			c.problem("controller %d's listener.security.protocol.map has no %s entry (add %s:SASL_SSL, SSL or PLAINTEXT, as it serves)", id, c.listener, c.listener)
			continue
		}
		protos[p] = append(protos[p], id)
	}
	if len(protos) > 1 {
		c.problem("the controllers' %s listener is secured differently: %v; give every controller the same protocol", c.listener, protos)
	}
	proto := ""
	for p := range protos {
		proto = p
	}
	return proto
}

// brokersReachControllers adds a problem for what keeps brokers (with the
// controller settings added) from reaching and logging in to the
// controllers' listener, or from agreeing on the inter-broker listener:
// each said once with every broker it is of.
func (c *securityCheck) brokersReachControllers() {
	var order []string
	of := map[string][]string{}
	brokerProblem := func(id int32, f string, a ...any) {
		m := fmt.Sprintf(f, a...)
		if of[m] == nil {
			order = append(order, m)
		}
		of[m] = append(of[m], fmt.Sprint(id))
	}
	for _, id := range c.bids {
		b := view{p: c.brokerFiles[id], over: c.over}
		if p, ok := b.protocolOf(c.listener); ok && p != c.s.Protocol {
			brokerProblem(id, "map %s to %s in their listener.security.protocol.map, the controllers serve %s there", c.listener, p, c.s.Protocol)
		}
		if n, p := b.interBroker(); n != c.ibName || p != c.ibProto {
			brokerProblem(id, "have the inter-broker listener %s (%s), broker %d %s (%s): the brokers must agree before the migration", n, p, c.bids[0], c.ibName, c.ibProto)
		}
		if sasl(c.s.Protocol) {
			m := b.mech(keyCtrlMech)
			for _, cid := range c.cids {
				if en := (view{p: c.ctrlFiles[cid]}).enabled(c.listener); !slices.Contains(en, m) {
					brokerProblem(id, "would log in to the controllers with %s (%s), controller %d's %s listener enables %s", m, keyCtrlMech, cid, c.listener, strings.Join(en, ","))
					break
				}
			}
			if _, ok := b.get(jaasKey(c.listener, m)); !ok && !c.set.StaticJAAS {
				brokerProblem(id, "have no %s, the login they need at the controllers' %s listener (%s): put it and %s in a file and pass --set controller_settings=/absolute/path (kremedy adds them to each broker's config in the migration's edit; the revert restores each file without them); if the brokers' login is in a static JAAS file (a controller.KafkaServer or KafkaServer section), say so with --set static_jaas=true",
					jaasKey(c.listener, m), c.s.Protocol, m, keyCtrlMech)
			}
		}
	}
	for _, m := range order {
		c.problem("brokers %s %s", strings.Join(of[m], ", "), m)
	}
}

// listenerFacts adds the plan's facts about the listeners: the controller
// settings the edit adds, how the brokers log in to the controllers (with
// a caution for SCRAM and for a PLAINTEXT controller listener beside a
// secured inter-broker one) and static JAAS taken on trust.
func (c *securityCheck) listenerFacts() {
	if c.set.Path != "" {
		var keys []string
		for _, kv := range c.set.Set {
			keys = append(keys, kv[0])
		}
		c.fact("controller_settings %s: the migration's edit adds %s to every broker", c.set.Path, strings.Join(keys, ", "))
	}
	how := c.s.Protocol
	if sasl(c.s.Protocol) {
		m := c.first.mech(keyCtrlMech)
		how += " with " + m
		if strings.HasPrefix(m, "SCRAM-") {
			c.fact("CAUTION: the brokers log in to the controllers with %s: SCRAM credentials live in the metadata log, so the controllers can check them only if they were formatted with them (kafka-storage format --add-scram, KIP-900); PLAIN over TLS or mutual TLS is the usual controller listener", m)
		}
	}
	if c.set.StaticJAAS {
		c.s.Facts = append(c.s.Facts, "static_jaas=true: the SASL logins the nodes need are taken to be in their static JAAS files (kremedy cannot read a JVM's options); a missing one shows as a broker that does not come back from its restart")
	}
	c.fact("the controllers' %s listener: %s; the brokers' inter-broker listener: %s (%s)", c.listener, how, c.ibName, c.ibProto)
	if c.s.Protocol == "PLAINTEXT" && c.ibProto != "PLAINTEXT" {
		c.fact("CAUTION: the brokers' inter-broker listener is %s but the controllers' listener is PLAINTEXT: the metadata (topics, ACLs, SCRAM credentials' salted hashes) would travel unauthenticated and unencrypted; secure the controllers' listener unless the network is yours alone", c.ibProto)
	}
}

// brokersZK is what the brokers' files say of their ZooKeeper security and
// authorization, which a migrating controller must match: any broker's
// zookeeper.set.acl and zookeeper.ssl.client.enable, and the (last)
// authorizer and super users named.
type brokersZK struct {
	acl, tls           bool
	authorizer, supers string
}

// brokersZKOf reads brokersZK from the brokers' files.
func (c *securityCheck) brokersZKOf() brokersZK {
	var z brokersZK
	for _, id := range c.bids {
		b := view{p: c.brokerFiles[id]}
		z.acl = z.acl || b.isTrue(keyZKSetACL)
		z.tls = z.tls || b.isTrue(keyZKTLS)
		if a, _ := b.get(keyAuthorizer); a != "" {
			z.authorizer = a
		}
		if su, _ := b.get(keySuperUsers); su != "" {
			z.supers = su
		}
	}
	return z
}

// controllersActForBrokers adds a problem for what keeps each controller
// from acting as the ZooKeeper-mode brokers' controller during the
// migration: the inter-broker listener and its login, ZooKeeper's ACLs and
// TLS, the authorizer and super users; and the fact of the authorizer.
func (c *securityCheck) controllersActForBrokers() {
	z := c.brokersZKOf()
	for _, id := range c.cids {
		v := view{p: c.ctrlFiles[id]}
		c.controllerInterBroker(id, v)
		if z.acl && !v.isTrue(keyZKSetACL) {
			c.problem("controller %d lacks %s=true, which the brokers have: its writes to ZooKeeper during the migration would leave znodes open to everyone (and the JVM needs the brokers' ZooKeeper SASL identity: a JAAS Client section, -Djava.security.auth.login.config)", id, keyZKSetACL)
		}
		if z.tls && !v.isTrue(keyZKTLS) {
			c.problem("controller %d lacks %s=true, which the brokers have: give it the brokers' zookeeper.ssl.* and zookeeper.clientCnxnSocket", id, keyZKTLS)
		}
		if z.authorizer != "" {
			c.controllerAuthorizer(id, v, z)
		}
	}
	if z.authorizer != "" {
		c.fact("authorizer: the brokers use %s; the migration copies ZooKeeper's ACLs, SCRAM credentials and client quotas into the metadata log, and brokers-to-kraft switches AclAuthorizer to %s", z.authorizer, kraftAuthorize)
	}
}

// controllerInterBroker adds a problem when controller id (its file v)
// cannot send the brokers their RPCs over their inter-broker listener: a
// different listener or protocol, or a SASL login the brokers do not
// enable or it has no JAAS line for.
func (c *securityCheck) controllerInterBroker(id int32, v view) {
	n, p := v.interBroker()
	switch {
	case n != c.ibName:
		c.problem("controller %d's inter-broker listener is %s, the brokers' is %s: a migrating controller reaches the ZooKeeper-mode brokers over it (set %s=%s and its protocol in listener.security.protocol.map)", id, n, c.ibName, keyIBLName, c.ibName)
	case p == "":
		c.problem("controller %d's listener.security.protocol.map has no entry for the inter-broker listener %s (the brokers map it to %s)", id, n, c.ibProto)
	case p != c.ibProto:
		c.problem("controller %d maps the inter-broker listener %s to %s, the brokers to %s", id, n, p, c.ibProto)
	case sasl(c.ibProto):
		// The controller logs in to the brokers' listener with its own
		// mechanism: the brokers must enable it there.
		cm := v.mech(keyIBMech)
		if en := c.first.enabled(c.ibName); !slices.Contains(en, cm) {
			c.problem("controller %d would log in to the brokers' %s listener with %s (%s), the brokers enable %s there", id, c.ibName, cm, keyIBMech, strings.Join(en, ","))
		} else if _, ok := v.get(jaasKey(c.ibName, cm)); !ok && !c.set.StaticJAAS {
			c.problem("controller %d has no %s: the login a migrating controller needs to send the brokers their RPCs over %s (the brokers' own inter-broker login will do)", id, jaasKey(c.ibName, cm), c.ibName)
		}
	}
}

// controllerAuthorizer adds a problem when controller id (its file v),
// beside brokers that authorize (z), would not authorize what they
// forward it or would refuse the brokers' own principal.
func (c *securityCheck) controllerAuthorizer(id int32, v view, z brokersZK) {
	a, _ := v.get(keyAuthorizer)
	su, _ := v.get(keySuperUsers)
	switch {
	case a == "":
		c.problem("controller %d has no %s while the brokers use %s: KRaft controllers authorize what brokers forward them (CreateTopics, CreateAcls, …) and without one allow everyone; set %s=%s and %s (the brokers' and the controllers' principals)", id, keyAuthorizer, z.authorizer, keyAuthorizer, kraftAuthorize, keySuperUsers)
	case a == aclAuthorizer:
		c.problem("controller %d's %s is %s, which keeps its ACLs in ZooKeeper: a KRaft controller takes %s", id, keyAuthorizer, a, kraftAuthorize)
	case su == "":
		c.problem("controller %d has no %s while the brokers' is %s: the brokers' principal (and the controllers' own) must be a super user at the controllers", id, keySuperUsers, z.supers)
	default:
		// The principal the brokers log in to the controllers as, where
		// a JAAS line names it (PLAIN, SCRAM): a ClusterAction the
		// controllers refuse stops every broker's registration.
		if u := jaasUser(c.first, c.listener); u != "" && !slices.Contains(superUsers(su), "User:"+u) {
			c.problem("controller %d's %s (%s) lacks User:%s, the principal the brokers log in to the controllers as: their registration (ClusterAction) would be refused before any ACL is migrated", id, keySuperUsers, su, u)
		}
	}
}
