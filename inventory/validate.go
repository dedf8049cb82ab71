package inventory

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/kremedy/kremedy/internal/logdir"
	"github.com/kremedy/kremedy/internal/webhook"
	"github.com/kremedy/kremedy/steps/kafkazk"
)

var (
	// hostRe is an SSH host, IP address or ssh config alias: nothing a
	// shell or ssh(1) would read as syntax or an option.
	hostRe = regexp.MustCompile(`^[A-Za-z0-9_:][A-Za-z0-9._:-]{0,252}$`)
	// userRe is a POSIX-ish login name.
	userRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)
	envRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validate checks what the decoder cannot: required fields, formats and
// cross-field rules. Each error sits at the field it is about.
func (d *decoder) validate(inv *Inventory) {
	if strings.TrimSpace(inv.Name) == "" {
		d.Errorf(d.At("name"), "name is required: it is shown in the header so you always know which cluster you are on")
	}
	d.validateMode(inv)
	d.validateKafka(inv)
	d.validateSSH(inv.SSH)
	seen := d.validateBrokers(inv)
	d.validateControllers(inv, seen)
	d.validateClients(inv)
	for i, n := range inv.Notify {
		d.notify(fmt.Sprintf("notify[%d]", i), n)
	}
	if inv.Policy != nil {
		d.policy(inv.Policy)
	}
}

// validateMode checks the mode and what it asks for: the zookeeper
// section in ZooKeeper mode, kraft_controllers and no zookeeper section in
// KRaft mode.
func (d *decoder) validateMode(inv *Inventory) {
	switch inv.Mode {
	case "", ModeZooKeeper:
		d.validateZooKeeper(&inv.ZooKeeper)
	case ModeKRaft:
		if d.Has("zookeeper") {
			d.Errorf(d.At("zookeeper"), "a KRaft-mode inventory (mode: kraft) has no zookeeper section: the cluster keeps its metadata in the controllers' quorum (kraft_controllers). Remove it, or set mode: zookeeper")
		}
		if len(inv.KRaftControllers) == 0 {
			d.Errorf(d.At("mode"), "mode: kraft needs kraft_controllers: list every KRaft controller with its id (node.id), host, listener, config, stop and start")
		}
	default:
		d.Errorf(d.At("mode"), "mode %q: it is %s (brokers keep their metadata in ZooKeeper, the default) or %s (a KRaft controller quorum)", inv.Mode, ModeZooKeeper, ModeKRaft)
	}
}

// validateKafka checks the kafka section (bootstrap addresses, local
// files, controller properties only with controllers) and
// zookeeper.tls_config_file, a local file in either mode.
func (d *decoder) validateKafka(inv *Inventory) {
	if len(inv.Kafka.Bootstrap) == 0 {
		d.Errorf(d.At("kafka.bootstrap"), "kafka.bootstrap is required: list at least one broker as host:port")
	}
	for i, hp := range inv.Kafka.Bootstrap {
		p := fmt.Sprintf("kafka.bootstrap[%d]", i)
		if err := checkHostPort(hp); err != nil {
			d.Errorf(d.At(p), "%s %q %v", p, hp, err)
		}
	}
	d.localPath("kafka.client_properties", inv.Kafka.ClientProperties)
	d.localPath("kafka.controller_client_properties", inv.Kafka.ControllerClientProperties)
	d.localPath("kafka.krb5_conf", inv.Kafka.Krb5Conf)
	if inv.Kafka.ControllerClientProperties != "" && len(inv.KRaftControllers) == 0 {
		d.Errorf(d.At("kafka.controller_client_properties"), "kafka.controller_client_properties is how kremedy reaches the KRaft controllers, but the inventory lists no kraft_controllers: list them, or leave it out")
	}
	d.localPath("zookeeper.tls_config_file", inv.ZooKeeper.TLSConfigFile)
}

// validateSSH checks the ssh section: user, local files, become and every
// hop of proxy_jump.
func (d *decoder) validateSSH(s SSH) {
	d.user("ssh.user", s.User)
	d.localPath("ssh.identity_file", s.IdentityFile)
	d.localPath("ssh.known_hosts", s.KnownHosts)
	d.localPath("ssh.config", s.Config)
	d.become("ssh.become", s.Become)
	if s.ProxyJump != "" {
		for hop := range strings.SplitSeq(s.ProxyJump, ",") {
			if err := checkJump(hop); err != nil {
				d.Errorf(d.At("ssh.proxy_jump"), "ssh.proxy_jump %q: %v", s.ProxyJump, err)
				break
			}
		}
	}
}

// validateBrokers checks the brokers list: at least one, unique ids, and
// each broker's fields. It returns the ids seen, each with the path of the
// broker that has it, for the controllers' check.
func (d *decoder) validateBrokers(inv *Inventory) map[int32]string {
	if len(inv.Brokers) == 0 {
		d.Errorf(d.At("brokers"), "brokers is required: list every broker with its id, host, stop and start")
	}
	seen := map[int32]string{}
	for i, b := range inv.Brokers {
		p := fmt.Sprintf("brokers[%d]", i)
		if !d.Has(p + ".id") {
			d.Errorf(d.At(p), "%s has no id: set it to the broker's broker.id", p)
		} else if prev, ok := seen[b.ID]; ok {
			d.Errorf(d.At(p+".id"), "%s.id: broker id %d is also used by %s; broker ids are unique", p, b.ID, prev)
		} else {
			seen[b.ID] = p
		}
		d.checkNode(inv, p, b, "broker")
		d.logDirs(p+".log_dirs", b.LogDirs)
		d.remoteFile(p+".config", b.Config)
		d.remoteFile(p+".server_log", b.ServerLog)
	}
	return seen
}

// validateClients checks the clients list: unique names, each client's
// host and commands, and the known_hosts that reaching them needs.
func (d *decoder) validateClients(inv *Inventory) {
	names := map[string]string{}
	for i, c := range inv.Clients {
		p := fmt.Sprintf("clients[%d]", i)
		switch prev, dup := names[c.Name]; {
		case strings.TrimSpace(c.Name) == "":
			d.Errorf(d.At(p+".name"), "%s.name is required: it is how the detach-clients step names this client", p)
		case dup:
			d.Errorf(d.At(p+".name"), "%s.name %q is also used by %s; client names are unique", p, c.Name, prev)
		default:
			names[c.Name] = p
		}
		d.host(p+".host", c.Host)
		d.command(p+".stop", c.Stop, "stops the client")
		d.command(p+".start", c.Start, "starts the client")
	}
	if len(inv.Clients) > 0 && inv.SSH.KnownHosts == "" {
		d.Errorf(d.At("clients"), "clients need ssh.known_hosts to reach their hosts; kremedy never trusts a host key on first use")
	}
}

// notify checks one webhook: one source of its URL, an http(s) URL with no
// credential in it, at most one source of its token, and its format.
func (d *decoder) notify(p string, n Notify) {
	set := 0
	for _, v := range []string{n.URL, n.URLEnv, n.URLFile} {
		if v != "" {
			set++
		}
	}
	switch {
	case set == 0:
		d.Errorf(d.At(p), "%s needs url (the webhook), or url_env or url_file (an environment variable or a file that holds it, for a URL that is a secret, like a Slack webhook's)", p)
	case set > 1:
		d.Errorf(d.At(p), "%s has more than one of url, url_env and url_file; keep one", p)
	}
	if n.URL != "" {
		u, err := url.Parse(n.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			d.Errorf(d.At(p+".url"), "%s: use an http:// or https:// URL with a host, such as https://ops.example.com/hooks/kremedy", p+".url")
		case webhook.IsSlack(n.URL):
			d.Errorf(d.At(p+".url"), "%s is a Slack incoming webhook, whose URL is its secret: kremedy never reads it from the inventory; put it in an environment variable (url_env) or a file only you can read (url_file)", p+".url")
		case u.User != nil:
			d.Errorf(d.At(p+".url"), "%s has a user or password in it: kremedy never reads a credential from the inventory; use token_env or token_file (a bearer token)", p+".url")
		case u.Scheme == "http" && (n.TokenEnv != "" || n.TokenFile != "") && !webhook.Loopback(u.Hostname()):
			d.Errorf(d.At(p+".url"), "%s is http:// and the webhook has a token: a token is sent over https only (or to this machine's loopback)", p+".url")
		}
	}
	if n.TokenEnv != "" && n.TokenFile != "" {
		d.Errorf(d.At(p+".token_file"), "%s has both token_env and token_file; keep one", p)
	}
	for _, k := range []struct{ key, v string }{{"url_env", n.URLEnv}, {"token_env", n.TokenEnv}} {
		if k.v != "" && !envRe.MatchString(k.v) {
			d.Errorf(d.At(p+"."+k.key), "%s.%s %q is not an environment variable name (letters, digits, _)", p, k.key, k.v)
		}
	}
	d.localPath(p+".url_file", n.URLFile)
	d.localPath(p+".token_file", n.TokenFile)
	if n.Format != "" && n.Format != FormatSlack && n.Format != FormatJSON {
		d.Errorf(d.At(p+".format"), "%s.format %q: it is slack (a Slack incoming-webhook message) or json (the event itself); leave it out to choose by the URL", p, n.Format)
	}
}

// policy checks the approval policy: the allowed signers of a policy that
// asks for more than the operator's approval.
func (d *decoder) policy(p *Policy) {
	if !d.Has("policy.approvals") {
		d.Errorf(d.At("policy"), "policy needs approvals: how many people approve a destructive step's plan, the operator included (2: one more person)")
	}
	if p.Approvals >= 2 && p.AllowedSigners == "" {
		d.Errorf(d.At("policy"), "policy approvals: %d needs allowed_signers: an OpenSSH allowed_signers file of who may approve (man ssh-keygen, ALLOWED SIGNERS)", p.Approvals)
	}
	d.localPath("policy.allowed_signers", p.AllowedSigners)
	if d.Has("policy.group") && !groupRe.MatchString(p.Group) {
		d.Errorf(d.At("policy.group"), "policy.group %q is not a Unix group name (a letter or _, then letters, digits, '.', '_', '-'; at most 32): the group the operators and approvers are in, which a run shares its directory with", p.Group)
	}
}

// groupRe is a Unix group name as shadow-utils' groupadd takes one by
// default (a name, never a number).
var groupRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]{0,31}$`)

func (d *decoder) validateZooKeeper(z *ZooKeeper) {
	if strings.TrimSpace(z.Connect) == "" {
		d.Errorf(d.At("zookeeper.connect"), "zookeeper.connect is required: copy it from the brokers' zookeeper.connect, chroot included")
	} else if _, _, err := kafkazk.ParseConnect(z.Connect); err != nil {
		d.Errorf(d.At("zookeeper.connect"), "zookeeper.connect: %v; it must be the brokers' zookeeper.connect exactly, like zk1:2181,zk2:2181/kafka", err)
	}
	a := z.Auth
	if a == nil {
		return
	}
	switch {
	case a.User == "":
		d.Errorf(d.At("zookeeper.auth.user"), "zookeeper.auth.user is required when zookeeper.auth is set")
	case strings.ContainsAny(a.User, ": "):
		d.Errorf(d.At("zookeeper.auth.user"), "zookeeper.auth.user %q must not contain ':' or spaces (ZooKeeper digest is user:password)", a.User)
	}
	switch {
	case a.PasswordEnv == "" && a.PasswordFile == "":
		d.Errorf(d.At("zookeeper.auth"), "zookeeper.auth needs password_env (an environment variable) or password_file (a file only you can read)")
	case a.PasswordEnv != "" && a.PasswordFile != "":
		d.Errorf(d.At("zookeeper.auth.password_file"), "zookeeper.auth has both password_env and password_file; keep one")
	case a.PasswordEnv != "" && !envRe.MatchString(a.PasswordEnv):
		d.Errorf(d.At("zookeeper.auth.password_env"), "zookeeper.auth.password_env %q is not an environment variable name (letters, digits, _)", a.PasswordEnv)
	}
	d.localPath("zookeeper.auth.password_file", a.PasswordFile)
}

func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("is not host:port")
	}
	if host == "" || !hostRe.MatchString(host) {
		return fmt.Errorf("has no valid host (letters, digits, '.', '_', '-', ':')")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("has a port outside 1 to 65535")
	}
	return nil
}

// checkJump checks one ProxyJump hop: [user@]host[:port].
func checkJump(hop string) error {
	user, hp, ok := strings.Cut(hop, "@")
	if !ok {
		user, hp = "", hop
	} else if !userRe.MatchString(user) {
		return fmt.Errorf("hop %q has an invalid user", hop)
	}
	host := hp
	if h, p, err := net.SplitHostPort(hp); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("hop %q: port must be from 1 to 65535", hop)
		}
		host = h
	}
	if !hostRe.MatchString(host) {
		return fmt.Errorf("hop %q: host may hold only letters, digits, '.', '_', '-' and ':' and must not start with '-' or '.'", hop)
	}
	return nil
}

func (d *decoder) host(p, h string) {
	switch {
	case h == "":
		d.Errorf(d.At(p), "%s is required: the SSH host name, address or ssh config alias", p)
	case !hostRe.MatchString(h):
		d.Errorf(d.At(p), "%s %q: a host may hold only letters, digits, '.', '_', '-' and ':' "+
			"(no spaces, shell characters or user@), and must not start with '-' or '.'", p, h)
	}
}

func (d *decoder) user(p, u string) {
	if u != "" && !userRe.MatchString(u) {
		d.Errorf(d.At(p), "%s %q: a user name may hold only letters, digits, '.', '_' and '-', and must not start with '-' or '.'", p, u)
	}
}

func (d *decoder) command(p, cmd, does string) {
	if strings.TrimSpace(cmd) == "" {
		d.Errorf(d.At(p), "%s is required: the shell command that %s on its host, such as \"sudo -n systemctl ...\"", p, does)
	}
}

// localPath checks a path on this machine. "~user/" is refused because Load
// expands only "~/".
func (d *decoder) localPath(p, v string) {
	if strings.HasPrefix(v, "~") && v != "~" && !strings.HasPrefix(v, "~/") {
		d.Errorf(d.At(p), "%s %q: only ~/ is expanded; write the full path", p, v)
	}
}

// logDirs checks a broker's log.dirs: remote POSIX paths, absolute and
// clean, so that a path in a plan means exactly one directory, of the
// characters logdir.Allowed only (security review L4).
func (d *decoder) logDirs(p string, dirs []string) {
	for i, dir := range dirs {
		pi := fmt.Sprintf("%s[%d]", p, i)
		switch {
		case !path.IsAbs(dir):
			d.Errorf(d.At(pi), "%s %q is not an absolute path; write it exactly as in the broker's log.dirs", pi, dir)
			continue
		case path.Clean(dir) != dir:
			d.Errorf(d.At(pi), "%s %q is not a clean path; write it as %q", pi, dir, path.Clean(dir))
			continue
		case dir == "/":
			d.Errorf(d.At(pi), "%s is the root directory; no broker keeps its log there", pi)
			continue
		case strings.Contains(dir, ","):
			d.Errorf(d.At(pi), "%s %q contains ',', which Kafka's log.dirs uses to separate directories", pi, dir)
			continue
		}
		if err := logdir.Check(dir); err != nil {
			d.Errorf(d.At(pi), "%s %q: %v (so that no script kremedy writes can read it as a glob, an expansion or two lines); rename the directory, or point log.dirs at it through a symbolic link whose path is plain", pi, dir, err)
			continue
		}
		for j := range i {
			prev := dirs[j]
			switch {
			case prev == dir:
				d.Errorf(d.At(pi), "%s %q is listed twice (also %s[%d])", pi, dir, p, j)
			case strings.HasPrefix(dir, prev+"/") || strings.HasPrefix(prev, dir+"/"):
				d.Errorf(d.At(pi), "%s %q and %s[%d] %q are nested; log dirs must be separate directories", pi, dir, p, j, prev)
			}
		}
	}
}

func (d *decoder) become(p, v string) {
	if v != "" && v != BecomeSudo {
		d.Errorf(d.At(p), "%s %q: the one method is sudo (each command through `sudo -n`, never prompting); leave it out to run as the login user", p, v)
	}
}

// validateControllers checks kraft_controllers: unique node ids that no
// broker uses (KIP-866) but a combined node's own broker entry, a
// controller listener, the config file kremedy
// edits, and the commands.
func (d *decoder) validateControllers(inv *Inventory, brokers map[int32]string) {
	seen := map[int32]string{}
	for i, c := range inv.KRaftControllers {
		p := fmt.Sprintf("kraft_controllers[%d]", i)
		switch prev, dup := seen[c.ID]; {
		case !d.Has(p + ".id"):
			d.Errorf(d.At(p), "%s has no id: set it to the controller's node.id", p)
		case dup:
			d.Errorf(d.At(p+".id"), "%s.id: node id %d is also used by %s; node ids are unique", p, c.ID, prev)
		case brokers[c.ID] != "" && combined(inv, c):
			seen[c.ID] = p // a combined node: one process, both roles
		case brokers[c.ID] != "":
			d.Errorf(d.At(p+".id"), "%s.id: node id %d is also %s's broker id; a KRaft controller's node.id must differ from every broker.id, unless both are one combined node (process.roles=broker,controller, in a mode: kraft inventory): then give the two entries the same host, stop and start", p, c.ID, brokers[c.ID])
		default:
			seen[c.ID] = p
		}
		d.checkNode(inv, p, c, "controller")
		if err := checkHostPort(c.Listener); err != nil {
			d.Errorf(d.At(p+".listener"), "%s.listener %q %v: set it to the controller listener's host:port (its controller.quorum.voters entry)", p, c.Listener, err)
		}
		if c.Config == "" {
			d.Errorf(d.At(p), "%s has no config: set it to the controller's controller.properties on its host", p)
		}
		d.remoteFile(p+".config", c.Config)
	}
}

// combined reports whether controller c is a combined node of a KRaft
// cluster (process.roles=broker,controller): the broker of its node id is
// the same process — the same host, stop and start. A ZooKeeper-mode
// cluster's controllers (the migration's) never are (KIP-866).
func combined(inv *Inventory, c Broker) bool {
	if !inv.KRaft() {
		return false
	}
	for _, b := range inv.Brokers {
		if b.ID == c.ID {
			return b.Host == c.Host && b.Stop == c.Stop && b.Start == c.Start
		}
	}
	return false
}

// checkNode checks what brokers and controllers share: the host, how to reach
// it over SSH, and the stop and start commands.
func (d *decoder) checkNode(inv *Inventory, p string, b Broker, what string) {
	d.host(p+".host", b.Host)
	d.user(p+".user", b.User)
	d.localPath(p+".identity_file", b.IdentityFile)
	d.localPath(p+".known_hosts", b.KnownHosts)
	d.become(p+".become", b.Become)
	d.command(p+".stop", b.Stop, "stops the "+what)
	d.command(p+".start", b.Start, "starts the "+what)
	if inv.SSH.KnownHosts == "" && b.KnownHosts == "" {
		d.Errorf(d.At(p), "%s has no known_hosts file: set ssh.known_hosts or %s.known_hosts; "+
			"kremedy never trusts a host key on first use", p, p)
	}
}

// remoteFile checks a file path on a host: absolute and clean, or unset.
func (d *decoder) remoteFile(p, f string) {
	if f != "" && (!path.IsAbs(f) || path.Clean(f) != f || strings.ContainsAny(f, "\x00\n")) {
		d.Errorf(d.At(p), "%s %q: use a clean absolute path on the host, such as /etc/kafka/server.properties", p, f)
	}
}
