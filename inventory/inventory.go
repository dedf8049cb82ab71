package inventory

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kremedy/kremedy/internal/strictyaml"
)

// The inventory's modes.
const (
	ModeZooKeeper = "zookeeper"
	ModeKRaft     = "kraft"
)

// KRaft reports whether the inventory describes a KRaft-mode cluster.
func (inv *Inventory) KRaft() bool { return inv.Mode == ModeKRaft }

// DefaultSSHPort is the port SSHFor uses when neither the broker nor the
// ssh defaults name one.
const DefaultSSHPort = 22

// MaxSize is the largest inventory file Parse accepts.
const MaxSize = 256 << 10

// Inventory describes one Kafka cluster: where its ZooKeeper ensemble (in
// ZooKeeper mode) or KRaft controllers (in KRaft mode) and brokers are,
// how to reach each host over SSH, and which commands stop and start
// brokers, controllers and clients.
type Inventory struct {
	Name string `yaml:"name"`
	Lab  bool   `yaml:"lab"`
	// Mode is how the cluster keeps its metadata: ModeZooKeeper (the
	// default; a zookeeper section is required) or ModeKRaft (no
	// zookeeper section; kraft_controllers are the quorum).
	Mode      string    `yaml:"mode"`
	ZooKeeper ZooKeeper `yaml:"zookeeper"`
	Kafka     Kafka     `yaml:"kafka"`
	SSH       SSH       `yaml:"ssh"`
	Brokers   []Broker  `yaml:"brokers"`
	Clients   []Client  `yaml:"clients"`
	// KRaftControllers is the KRaft controller quorum provisioned for the
	// ZooKeeper → KRaft migration (zk-to-kraft): hosts, stop/start
	// commands and each one's controller.properties.
	KRaftControllers []Broker `yaml:"kraft_controllers"`
	// Notify are the webhooks a run tells what it does (besides run's
	// --notify).
	Notify []Notify `yaml:"notify"`
	// Policy is the approval policy of the cluster's runs; nil: the
	// operator's confirmation is the approval.
	Policy *Policy `yaml:"policy"`

	// Path is the file the inventory was loaded from, set by Load.
	Path string `yaml:"-"`
	// Note is written as comment lines under the header (what wrote the
	// file, e.g. the lab's Kafka release); it is not read back.
	Note string `yaml:"-"`
}

// ZooKeeper says how to reach the ensemble the brokers use.
type ZooKeeper struct {
	// Connect is the brokers' zookeeper.connect, chroot included.
	Connect string  `yaml:"connect"`
	Auth    *ZKAuth `yaml:"auth"`
	// TLSConfigFile is a properties file with the zookeeper.ssl.* settings
	// the brokers use (as Kafka's --zk-tls-config-file): TLS to the
	// servers' secureClientPort, which zookeeper.connect then names.
	TLSConfigFile string `yaml:"tls_config_file"`
	// MaxInFlight caps the reads kremedy keeps in flight when it scans the
	// whole chroot (diagnose, preflights) one znode per request: 0 is the
	// default, 128, at most 256 (see zookeeper.DefaultScanConcurrency for
	// what they rest on). Where the servers answer multiRead (ZooKeeper
	// 3.6+) a sixteenth of it is the requests in flight, each of up to 200
	// reads.
	MaxInFlight int `yaml:"max_in_flight,omitempty"`
}

// ZKAuth is ZooKeeper digest authentication. The password itself is never
// part of an inventory: it comes from an environment variable or a file.
type ZKAuth struct {
	User         string `yaml:"user"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
}

// Kafka says how a Kafka client reaches the cluster.
type Kafka struct {
	Bootstrap []string `yaml:"bootstrap"`
	// ClientProperties is an optional Kafka client .properties file
	// (security.protocol, sasl.*, ssl.*).
	ClientProperties string `yaml:"client_properties"`
	// ControllerClientProperties is how kremedy reaches the KRaft
	// controllers' own listener (DescribeQuorum) when it is secured
	// otherwise than the brokers' (the controllers' listener rarely takes
	// SCRAM: its credentials live in the metadata log); "" uses
	// ClientProperties.
	ControllerClientProperties string `yaml:"controller_client_properties"`
	// Krb5Conf is the krb5.conf a GSSAPI (Kerberos) client.properties
	// needs (the file Kafka's clients get as -Djava.security.krb5.conf);
	// "": $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string `yaml:"krb5_conf"`
}

// SSH holds the SSH settings every broker and client host uses unless a
// broker overrides them.
type SSH struct {
	User           string   `yaml:"user"`
	Port           int      `yaml:"port"`
	IdentityFile   string   `yaml:"identity_file"`
	Agent          bool     `yaml:"agent"`
	KnownHosts     string   `yaml:"known_hosts"`
	Config         string   `yaml:"config"`
	ProxyJump      string   `yaml:"proxy_jump"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// Become is how every command kremedy runs on a host gains the rights
	// it needs: "" runs as the login user, "sudo" runs each one through
	// `sudo -n` (never prompting; preflight checks it works).
	Become string `yaml:"become"`
}

// SSHConfigNone as ssh.config reads no OpenSSH client config at all.
const SSHConfigNone = "none"

// BecomeSudo is the one Become value besides "".
const BecomeSudo = "sudo"

// Broker is one Kafka broker: its broker.id, the SSH host it runs on and
// the commands that stop and start it there.
type Broker struct {
	ID           int32    `yaml:"id"`
	Host         string   `yaml:"host"`
	Port         int      `yaml:"port"`
	User         string   `yaml:"user"`
	IdentityFile string   `yaml:"identity_file"`
	KnownHosts   string   `yaml:"known_hosts"`
	Become       string   `yaml:"become"`
	Stop         string   `yaml:"stop"`
	Start        string   `yaml:"start"`
	LogDirs      []string `yaml:"log_dirs"`
	// Config is the file the process reads its settings from
	// (server.properties, controller.properties): the ZooKeeper → KRaft
	// migration edits it over SSH, after a backup beside it.
	Config string `yaml:"config"`
	// ServerLog is a broker's log4j server log (server.log; Kafka's
	// scripts put it in $LOG_DIR, by default the Kafka home's logs/):
	// diagnose reads its tail over SSH for the error that stopped a
	// broker or took a log dir offline (No space left on device). ""
	// when the inventory does not name it: then the fix only says to
	// read it.
	ServerLog string `yaml:"server_log"`
	// Listener is a KRaft controller's controller listener (host:port);
	// only kraft_controllers have one.
	Listener string `yaml:"listener"`
}

// Client is a producer or consumer that the "detach clients" step stops
// before a repair and starts again afterwards.
type Client struct {
	Name  string `yaml:"name"`
	Host  string `yaml:"host"`
	Stop  string `yaml:"stop"`
	Start string `yaml:"start"`
}

// Notify is one webhook. Its URL is written here (url), or, when the URL is
// itself a credential (a Slack incoming webhook), named: an environment
// variable (url_env) or a file (url_file). A bearer token is never written
// here either: token_env or token_file.
type Notify struct {
	URL       string `yaml:"url"`
	URLEnv    string `yaml:"url_env"`
	URLFile   string `yaml:"url_file"`
	TokenEnv  string `yaml:"token_env"`
	TokenFile string `yaml:"token_file"`
	// Format is "slack", "json" or "" (Slack for a Slack webhook's URL,
	// JSON otherwise).
	Format string `yaml:"format"`
}

// The Notify formats.
const (
	FormatSlack = "slack"
	FormatJSON  = "json"
)

// Policy is the approval policy: Approvals people approve a destructive
// step's plan, the operator included, each an allowed signer.
type Policy struct {
	// Approvals is 1 (the operator's confirmation, the default) to 9.
	Approvals int `yaml:"approvals"`
	// AllowedSigners is an OpenSSH allowed_signers file (a path on this
	// machine): who may approve, the operator included.
	AllowedSigners string `yaml:"allowed_signers"`
	// Timeout bounds a run's wait for the approvals (0: kremedy's 30m).
	Timeout Duration `yaml:"timeout"`
	// InLab makes a lab inventory (lab: true) enforce the policy too: the
	// lab ignores it otherwise.
	InLab bool `yaml:"in_lab"`
	// Group is a Unix group the operators and approvers are all in: a run
	// shares its directory with it (mode 2750, the journal 0640,
	// approvals/ 3770), so that an approver runs `kremedy approve` from
	// their own account. "": the run directory is the operator's alone.
	Group string `yaml:"group"`
}

// Enforced reports whether runs on this inventory enforce its approval
// policy — one that asks for more than the operator's approval — and why
// a lab inventory's is or is not: a live cluster's is; a lab's is waived
// only when it does not ask for it (policy.in_lab) and the marker of
// `kremedy lab up` vouches for the file as it is (CheckLabMarker): an
// inventory that merely says lab: true enforces its policy.
func (inv *Inventory) Enforced() (bool, string) {
	p := inv.Policy
	switch {
	case p == nil || p.Approvals < 2:
		return false, ""
	case !inv.Lab:
		return true, ""
	case p.InLab:
		return true, "a lab's inventory that asks for it (policy.in_lab: true)"
	}
	if err := CheckLabMarker(inv.Path); err != nil {
		return true, fmt.Sprintf("the inventory says lab: true, but %v; a policy is waived only on a lab `kremedy lab up` made", err)
	}
	return false, fmt.Sprintf("waived on a lab: %s vouches that `kremedy lab up` wrote %s", LabMarkerFile, inv.Path)
}

// Duration is a time.Duration written the Go way in YAML ("10s", "1m30s").
type Duration struct{ time.Duration }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Error is a problem with an inventory file, located at a line and column
// (both 1-based). Line is 0 when the problem is not in the text, such as a
// file that cannot be read; Err then holds the cause.
type Error = strictyaml.Error

// Load reads and parses the inventory at path, records path in Path, and
// resolves the local file paths in it (identity files, known_hosts, ssh
// config, client properties, the password file): a leading "~/" is the
// user's home directory and a relative path is relative to the inventory's
// directory. Paths on the brokers (log_dirs, commands) are left alone.
func Load(path string) (*Inventory, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the inventory: " + err.Error(), Err: err}
	}
	inv, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot make the path absolute: " + err.Error(), Err: err}
	}
	inv.Path = abs
	if err := inv.resolvePaths(filepath.Dir(abs)); err != nil {
		return nil, &Error{File: path, Msg: err.Error(), Err: err}
	}
	return inv, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte more than Parse accepts, so Parse sees and reports the excess.
	return io.ReadAll(io.LimitReader(f, MaxSize+1))
}

func (inv *Inventory) resolvePaths(dir string) error {
	var home string
	resolve := func(p *string) error {
		switch {
		case *p == "", p == &inv.SSH.Config && *p == SSHConfigNone:
			return nil
		case *p == "~" || strings.HasPrefix(*p, "~/"):
			if home == "" {
				h, err := os.UserHomeDir()
				if err != nil {
					return fmt.Errorf("cannot expand %q: %w", *p, err)
				}
				home = h
			}
			*p = filepath.Join(home, strings.TrimPrefix(*p, "~"))
		case !filepath.IsAbs(*p):
			*p = filepath.Join(dir, *p)
		}
		return nil
	}
	ps := []*string{&inv.ZooKeeper.TLSConfigFile, &inv.Kafka.ClientProperties, &inv.Kafka.ControllerClientProperties, &inv.Kafka.Krb5Conf, &inv.SSH.IdentityFile, &inv.SSH.KnownHosts, &inv.SSH.Config}
	if inv.ZooKeeper.Auth != nil {
		ps = append(ps, &inv.ZooKeeper.Auth.PasswordFile)
	}
	for i := range inv.Brokers {
		ps = append(ps, &inv.Brokers[i].IdentityFile, &inv.Brokers[i].KnownHosts)
	}
	for i := range inv.Notify {
		ps = append(ps, &inv.Notify[i].URLFile, &inv.Notify[i].TokenFile)
	}
	if inv.Policy != nil {
		ps = append(ps, &inv.Policy.AllowedSigners)
	}
	for _, p := range ps {
		if err := resolve(p); err != nil {
			return err
		}
	}
	return nil
}

// Write stores inv at path atomically (a temporary file in the same
// directory, fsynced, then renamed) with mode 0600. It refuses an inventory
// that Load would reject, so a written inventory can always be read back.
func Write(path string, inv *Inventory) error {
	data, err := inv.Marshal()
	if err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if _, err := Parse(path, data); err != nil {
		return fmt.Errorf("write inventory %s: not written, it would not load back: %w", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write inventory %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: the rename is already visible
		d.Close()
	}
	return nil
}

// Broker returns the broker with the given broker.id.
func (inv *Inventory) Broker(id int32) (Broker, bool) {
	for _, b := range inv.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// SSHFor returns the SSH settings for broker b: b's port, user,
// identity_file, known_hosts and become where set, the ssh defaults otherwise, and
// port 22 when neither names one.
func (inv *Inventory) SSHFor(b Broker) SSH {
	s := inv.SSH
	if b.Port != 0 {
		s.Port = b.Port
	}
	if s.Port == 0 {
		s.Port = DefaultSSHPort
	}
	if b.User != "" {
		s.User = b.User
	}
	if b.IdentityFile != "" {
		s.IdentityFile = b.IdentityFile
	}
	if b.KnownHosts != "" {
		s.KnownHosts = b.KnownHosts
	}
	if b.Become != "" {
		s.Become = b.Become
	}
	return s
}

// ZKPassword returns the ZooKeeper digest password from the environment
// variable or file named by zookeeper.auth, with one trailing newline
// removed. It returns "" and no error when the inventory has no auth.
// Errors name the variable or file, never the value.
func (inv *Inventory) ZKPassword() (string, error) {
	a := inv.ZooKeeper.Auth
	switch {
	case a == nil:
		return "", nil
	case a.PasswordEnv != "":
		v, ok := os.LookupEnv(a.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("%w: environment variable %s is not set (zookeeper.auth.password_env); nothing was sent to ZooKeeper",
				ErrNoPassword, a.PasswordEnv)
		}
		if v == "" {
			return "", fmt.Errorf("%w: environment variable %s is empty (zookeeper.auth.password_env); nothing was sent to ZooKeeper",
				ErrNoPassword, a.PasswordEnv)
		}
		return v, nil
	case a.PasswordFile != "":
		b, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("%w: password file %s (zookeeper.auth.password_file): %w", ErrNoPassword, a.PasswordFile, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("%w: password file %s (zookeeper.auth.password_file) is empty; nothing was sent to ZooKeeper",
				ErrNoPassword, a.PasswordFile)
		}
		return v, nil
	default:
		return "", fmt.Errorf("%w: zookeeper.auth names neither password_env nor password_file", ErrNoPassword)
	}
}

// ErrNoPassword is wrapped by ZKPassword's errors.
var ErrNoPassword = errors.New("no ZooKeeper password")

// ErrNoCredential is wrapped by ResolveURL's and Token's errors.
var ErrNoCredential = errors.New("a webhook's credential is missing")

// ResolveURL is the webhook's URL: url, or read from url_env or url_file
// (one trailing newline removed). Errors name the variable or file, never
// the value.
func (n Notify) ResolveURL() (string, error) {
	switch {
	case n.URL != "":
		return n.URL, nil
	case n.URLEnv != "":
		return secretEnv(n.URLEnv, "notify url_env")
	case n.URLFile != "":
		return secretFile(n.URLFile, "notify url_file")
	}
	return "", fmt.Errorf("%w: the webhook names neither url, url_env nor url_file", ErrNoCredential)
}

// Token is the webhook's bearer token from token_env or token_file; ""
// when it has none.
func (n Notify) Token() (string, error) {
	switch {
	case n.TokenEnv != "":
		return secretEnv(n.TokenEnv, "notify token_env")
	case n.TokenFile != "":
		return secretFile(n.TokenFile, "notify token_file")
	}
	return "", nil
}

func secretEnv(name, key string) (string, error) {
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: environment variable %s is not set (%s)", ErrNoCredential, name, key)
	case strings.TrimSpace(v) == "":
		return "", fmt.Errorf("%w: environment variable %s is empty (%s)", ErrNoCredential, name, key)
	}
	return strings.TrimSpace(v), nil
}

func secretFile(path, key string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s (%s): %w", ErrNoCredential, path, key, err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%w: %s (%s) is empty", ErrNoCredential, path, key)
	}
	return strings.TrimSpace(v), nil
}
