// Package live reads a running cluster through kremedy's ports to write an
// inventory for it (kremedy inventory init) and to check, part by part,
// that an inventory reaches everything it names (kremedy inventory check).
// It only reads: the one ZooKeeper "write" is the ACL probe, a delete of a
// znode that never exists.
package live

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/steps/brokers"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/ports"
)

// Registration is one broker as it registered in ZooKeeper.
type Registration struct {
	ID        int32
	Host      string
	Endpoints []string
	// Protocols maps listener names to security protocols
	// (listener_security_protocol_map).
	Protocols map[string]string
}

// Registrations reads /brokers/ids.
func Registrations(ctx context.Context, zk ports.ZooKeeper) ([]Registration, error) {
	kids, err := zk.Children(ctx, kafkazk.BrokerIDsPath)
	if err != nil && !zk.IsNoNode(err) {
		return nil, err
	}
	var out []Registration
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		b, _, err := zk.Get(ctx, kafkazk.BrokerIDsPath+"/"+k)
		if zk.IsNoNode(err) {
			continue // deregistered meanwhile
		}
		if err != nil {
			return nil, err
		}
		var reg struct {
			kafkazk.BrokerRegistration
			Map map[string]string `json:"listener_security_protocol_map"`
		}
		if err := json.Unmarshal(b, &reg); err != nil {
			return nil, fmt.Errorf("%s%s/%s: %w", zk.Chroot(), kafkazk.BrokerIDsPath, k, err)
		}
		r := Registration{ID: int32(id), Host: reg.Host, Endpoints: reg.Endpoints, Protocols: reg.Map}
		if r.Host == "" {
			if h, _, ok := strings.Cut(reg.Addr(), ":"); ok {
				r.Host = h
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no broker is registered under %s%s: is the connect string the brokers' zookeeper.connect, chroot included, and are they running?", zk.Chroot(), kafkazk.BrokerIDsPath)
	}
	slices.SortFunc(out, func(a, b Registration) int { return int(a.ID - b.ID) })
	return out, nil
}

// Bootstrap picks, on every broker, the listener whose security protocol
// is protocol (security.protocol of the client properties).
func Bootstrap(regs []Registration, protocol string) ([]string, error) {
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	var out, seen []string
	for _, r := range regs {
		found := false
		for _, e := range r.Endpoints {
			name, addr, ok := strings.Cut(e, "://")
			if !ok {
				continue
			}
			seen = append(seen, e)
			p := name
			if m, ok := r.Protocols[name]; ok {
				p = m
			}
			if strings.EqualFold(p, protocol) && !found {
				out, found = append(out, addr), true
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no broker has a %s listener (registered: %s); give --bootstrap, or --client-properties whose security.protocol one of them speaks", protocol, strings.Join(seen, ", "))
	}
	return out, nil
}

// Options are what the operator says about the cluster that it cannot
// tell by itself.
type Options struct {
	Name             string
	ZooKeeper        inventory.ZooKeeper
	Bootstrap        []string
	ClientProperties string
	// ControllerClientProperties is how kremedy reaches a KRaft cluster's
	// controllers' own listener ("" its ClientProperties).
	ControllerClientProperties string
	// Krb5Conf is the krb5.conf of a GSSAPI ClientProperties ("" the default).
	Krb5Conf string
	SSH      inventory.SSH
}

// Unit is what Guess found about how a broker is run on its host.
type Unit struct {
	Stop, Start string
	// Config is the properties file the JVM was started with ("" unknown).
	Config string
	// How says where the commands come from ("" when nothing was found:
	// Stop and Start are then commands that fail, saying what to set).
	How string
}

// guessScript finds broker id's JVM on its host and prints what runs it:
// its systemd unit, its server.properties and the Kafka home its jars
// come from. Several JVMs with that broker.id on one host (brokers of
// other clusters) are told apart by the broker's registered endpoints
// (host:port) in their config; when none names one, the guess is
// refused as ambiguous rather than made.
func guessScript(id int32, endpoints []string) string {
	eps := []string{"''"}
	for _, e := range endpoints {
		if _, hp, ok := strings.Cut(e, "://"); ok {
			e = hp
		}
		eps = append(eps, shell.Quote(e))
	}
	return shell.Script(fmt.Sprintf(`props_of() { tr '\0' '\n' < /proc/$1/cmdline 2>/dev/null | awk 'f{print; exit} /^kafka\.Kafka$/{f=1}'; }
emit() {
  p=$1; props=$(props_of "$p")
  printf 'pid\t%%s\n' "$p"
  printf 'props\t%%s\n' "$props"
  printf 'unit\t%%s\n' "$(ps -o unit= -p "$p" 2>/dev/null | tr -d ' ')"
  cp=$(tr '\0' '\n' < /proc/$p/cmdline | awk 'f{print; exit} /^(-cp|-classpath)$/{f=1}')
  printf 'classpath\t%%s\n' "$cp"
  d=$(dirname "$props")
  for f in "$d/kafka-stop" "$d/kafka-start" "$d/../bin/kafka-server-stop.sh" "$d/../bin/kafka-server-start.sh"; do
    [ -x "$f" ] && printf 'exe\t%%s\n' "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"
  done
  exit 0
}
n=0; first=""; named=""
for p in $(ls /proc | grep -E '^[0-9]+$'); do
  [ -r /proc/$p/cmdline ] || continue
  props=$(props_of "$p")
  [ -n "$props" ] && [ -r "$props" ] || continue
  grep -qE '^[[:space:]]*(broker|node)\.id[[:space:]]*[=:][[:space:]]*%d[[:space:]]*$' "$props" || continue
  n=$((n+1)); [ -n "$first" ] || first=$p
  for e in %s; do
    [ -n "$e" ] && grep -qF -- "$e" "$props" && named="$named $p"
  done
done
set -- $named
if [ $# -eq 1 ]; then emit "$1"; fi
if [ $# -gt 1 ]; then printf 'ambiguous\t%%s\n' "$*"; exit 0; fi
if [ $n -eq 1 ]; then emit "$first"; fi
if [ $n -gt 1 ]; then printf 'ambiguous\t%%s JVMs\n' "$n"; exit 0; fi
echo none`, id, strings.Join(eps, " ")))
}

// Guess asks broker id's host how the broker runs there: its systemd
// unit (systemctl stop/start UNIT); else unit-like kafka-stop/kafka-start
// scripts beside its server.properties; else Kafka's own
// kafka-server-stop.sh/kafka-server-start.sh -daemon. Every guess must be
// reviewed: the inventory says so.
func Guess(ctx context.Context, h ports.Hosts, id int32, endpoints []string) (Unit, error) {
	fields := map[string][]string{}
	err := h.Run(ctx, id, guessScript(id, endpoints), func(l ports.Line) {
		if k, v, ok := strings.Cut(l.Text, "\t"); ok && !l.Stderr {
			fields[k] = append(fields[k], v)
		}
	})
	if err != nil {
		return placeholder(id, "the host could not be asked: "+err.Error()), err
	}
	one := func(k string) string {
		if v := fields[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if a := one("ambiguous"); a != "" {
		return placeholder(id, "several Kafka JVMs with broker.id="+strconv.Itoa(int(id))+" run on the host ("+a+"), and not exactly one names the broker's endpoints "+strings.Join(endpoints, ", ")+" in its config: kremedy does not guess which"), nil
	}
	if len(fields["pid"]) == 0 {
		return placeholder(id, "no Kafka JVM with broker.id="+strconv.Itoa(int(id))+" runs on the host"), nil
	}
	if u := one("unit"); strings.HasSuffix(u, ".service") {
		return Unit{Stop: "systemctl stop " + shell.Quote(u), Start: "systemctl start " + shell.Quote(u), Config: one("props"), How: "systemd unit " + u + " runs the broker (pid " + one("pid") + ")"}, nil
	}
	exe := fields["exe"]
	find := func(suffix string) string {
		for _, e := range exe {
			if strings.HasSuffix(e, "/"+suffix) {
				return e
			}
		}
		return ""
	}
	if stop, start := find("kafka-stop"), find("kafka-start"); stop != "" && start != "" {
		return Unit{Stop: shell.Quote(stop), Start: shell.Quote(start), Config: one("props"), How: "unit-like scripts beside " + one("props")}, nil
	}
	if stop, start := find("kafka-server-stop.sh"), find("kafka-server-start.sh"); stop != "" && start != "" {
		// kafka-server-stop.sh stops every broker of the host.
		return Unit{Stop: shell.Quote(stop), Start: shell.Quote(start) + " -daemon " + shell.Quote(one("props")), Config: one("props"),
			How: "Kafka's scripts beside " + one("props") + " (kafka-server-stop.sh stops every broker on that host)"}, nil
	}
	return placeholder(id, "broker "+strconv.Itoa(int(id))+" runs (pid "+one("pid")+", "+one("props")+") but not under a systemd unit kremedy recognises"), nil
}

// placeholder commands fail and say what to set: an inventory with a
// guess left unreviewed cannot stop a broker by accident.
func placeholder(id int32, why string) Unit {
	cmd := fmt.Sprintf("echo %s >&2; exit 1", shell.Quote(fmt.Sprintf("kremedy: set the stop and start commands of broker %d in the inventory", id)))
	return Unit{Stop: cmd, Start: cmd, How: "nothing found (" + why + ")"}
}

// Init reads the cluster and writes the inventory for it: brokers from
// /brokers/ids, their log.dirs (DescribeLogDirs, else DescribeConfigs),
// their stop/start commands guessed over SSH. The notes (one per broker
// and per guess) go into the file's header for review.
func Init(ctx context.Context, regs []Registration, kc ports.Kafka, hosts ports.Hosts, o Options) (*inventory.Inventory, error) {
	inv := &inventory.Inventory{Name: o.Name, ZooKeeper: o.ZooKeeper, Kafka: inventory.Kafka{Bootstrap: o.Bootstrap, ClientProperties: o.ClientProperties, Krb5Conf: o.Krb5Conf}, SSH: o.SSH}
	var notes []string
	notes = append(notes, "written by `kremedy inventory init` from the live cluster: REVIEW every stop/start command before a run")
	for _, r := range regs {
		b := inventory.Broker{ID: r.ID, Host: r.Host}
		dirs, err := kc.LogDirs(ctx, r.ID)
		if err != nil || len(dirs) == 0 {
			if v, err2 := kc.BrokerConfig(ctx, r.ID, "log.dirs"); err2 == nil && v != "" {
				dirs = strings.Split(v, ",")
			} else if v, err3 := kc.BrokerConfig(ctx, r.ID, "log.dir"); err3 == nil && v != "" {
				dirs = []string{v}
			}
		}
		for i := range dirs {
			dirs[i] = strings.TrimSpace(dirs[i]) // Kafka's csv lists are trimmed
		}
		slices.Sort(dirs)
		if bad := brokers.CheckLogDirs(r.ID, dirs, "as the broker reports it"); bad != nil {
			// None of them: an inventory naming some of a broker's log dirs
			// would hide the others from a cleanup.
			notes = append(notes, fmt.Sprintf("broker %d: no log_dirs written: %v", r.ID, bad))
		} else {
			b.LogDirs = dirs
			if len(dirs) == 0 {
				notes = append(notes, fmt.Sprintf("broker %d: log.dirs not read (%v); kremedy asks the broker at run time", r.ID, err))
			}
		}
		u, err := Guess(ctx, hosts, r.ID, r.Endpoints)
		if err != nil {
			notes = append(notes, fmt.Sprintf("broker %d: host %s not reached over SSH: %v", r.ID, r.Host, err))
		}
		b.Stop, b.Start, b.Config = u.Stop, u.Start, cleanAbs(u.Config)
		notes = append(notes, fmt.Sprintf("REVIEW broker %d (%s): stop/start from %s", r.ID, r.Host, u.How))
		inv.Brokers = append(inv.Brokers, b)
	}
	inv.Note = strings.Join(notes, "\n")
	return inv, nil
}

// cleanAbs is p when it is a clean absolute path (what an inventory
// accepts for a config file), else "": a JVM started with a relative one
// leaves the operator to name it.
func cleanAbs(p string) string {
	if path.IsAbs(p) && path.Clean(p) == p {
		return p
	}
	return ""
}

// Voter is one controller of a static quorum (controller.quorum.voters).
type Voter struct {
	ID   int32
	Host string
	Addr string // host:port of its controller listener
}

// ParseVoters reads controller.quorum.voters: id@host:port, comma-separated.
func ParseVoters(v string) ([]Voter, error) {
	var out []Voter
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		id, addr, ok := strings.Cut(e, "@")
		n, err := strconv.ParseInt(id, 10, 32)
		host, _, hok := strings.Cut(addr, ":")
		if bracket := strings.LastIndex(addr, "]:"); strings.HasPrefix(addr, "[") && bracket > 0 {
			host, hok = addr[1:bracket], true
		}
		if !ok || err != nil || !hok || host == "" {
			return nil, fmt.Errorf("controller.quorum.voters entry %q is not id@host:port", e)
		}
		out = append(out, Voter{ID: int32(n), Host: host, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("controller.quorum.voters is empty")
	}
	return out, nil
}

// InitKRaft reads a KRaft cluster and writes the inventory for it: brokers
// from DescribeCluster, controllers as voters says (connect.Voters: a static
// quorum's controller.quorum.voters, a dynamic one's leader), log.dirs,
// configs and stop/start commands as Init finds them. hosts must reach the
// controllers by their node ids.
func InitKRaft(ctx context.Context, cv ports.ClusterView, voters []Voter, kc ports.Kafka, hosts ports.Hosts, o Options) (*inventory.Inventory, error) {
	var regs []Registration
	for _, b := range cv.Brokers {
		regs = append(regs, Registration{ID: b.ID, Host: b.Host, Endpoints: []string{fmt.Sprintf("%s:%d", b.Host, b.Port)}})
	}
	o.ZooKeeper = inventory.ZooKeeper{}
	inv, err := Init(ctx, regs, kc, hosts, o)
	if err != nil {
		return nil, err
	}
	inv.Mode = inventory.ModeKRaft
	inv.Kafka.ControllerClientProperties = o.ControllerClientProperties
	notes := []string{inv.Note}
	if o.ClientProperties != "" && o.ControllerClientProperties == "" {
		// A secured cluster's controllers' listener has its own
		// mechanism and users (SCRAM lives in the metadata log a
		// controller reads only once it has a leader: PLAIN, mTLS or
		// Kerberos there, as a rule).
		notes = append(notes, "REVIEW kafka.controller_client_properties: kremedy asks the controllers' own listener for the quorum (DescribeQuorum) with kafka.client_properties unless this names another file; when the controllers take other credentials than the brokers, write one (security.protocol, sasl.mechanism and a login their listener takes) and name it here (inventory init --controller-client-properties F)")
	}
	if len(voters) == 0 {
		notes = append(notes, "REVIEW kraft_controllers: the brokers name no controller.quorum.voters (a dynamic quorum, KIP-853): list every controller by hand (id, host, listener, config, stop, start)")
	}
	for _, v := range voters {
		if i := slices.IndexFunc(inv.Brokers, func(b inventory.Broker) bool { return b.ID == v.ID }); i >= 0 {
			// A combined node (process.roles=broker,controller): one
			// process, so the broker's own entry with its controller
			// listener (the inventory accepts it only so).
			c := inv.Brokers[i]
			c.Listener, c.LogDirs, c.ServerLog = v.Addr, nil, ""
			notes = append(notes, fmt.Sprintf("controller %d: a combined node (process.roles=broker,controller), listed with broker %d's host, stop, start and config", v.ID, v.ID))
			inv.KRaftControllers = append(inv.KRaftControllers, c)
			continue
		}
		c := inventory.Broker{ID: v.ID, Host: v.Host, Listener: v.Addr}
		u, err := Guess(ctx, hosts, v.ID, []string{v.Addr})
		if err != nil {
			notes = append(notes, fmt.Sprintf("controller %d: host %s not reached over SSH: %v", v.ID, v.Host, err))
		}
		c.Stop, c.Start, c.Config = u.Stop, u.Start, cleanAbs(u.Config)
		if c.Config == "" {
			c.Config = "/REVIEW/controller.properties"
			notes = append(notes, fmt.Sprintf("controller %d: its config file was not found: set kraft_controllers[].config", v.ID))
		}
		notes = append(notes, fmt.Sprintf("REVIEW controller %d (%s): stop/start from %s", v.ID, v.Host, u.How))
		inv.KRaftControllers = append(inv.KRaftControllers, c)
	}
	inv.Note = strings.Join(notes, "\n")
	return inv, nil
}
