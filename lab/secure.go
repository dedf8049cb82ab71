package lab

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kremedy/kremedy/internal/atomicfile"
	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// A secured lab (lab up --secure) is a production cluster in miniature:
// brokers listen only on SASL_SSL (SCRAM-SHA-512 over TLS with the lab CA's
// certificates, keystores in JKS and PKCS12), also between themselves; they
// run as ServiceUser and own their data; they authenticate to ZooKeeper
// with SASL (DIGEST-MD5) and, with zookeeper.set.acl=true, ACL their znodes
// to that identity; ZooKeeper knows an operator identity (a superDigest)
// for tools without SASL such as kremedy; and the SSH login is
// OperatorUser, who runs the broker commands through `sudo -n`.
const (
	// ServiceUser runs the secured lab's brokers and owns their data.
	ServiceUser = "kremedy-kafka"
	// OperatorUser is the secured lab's SSH login (passwordless sudo);
	// NoSudoUser may log in too but has no sudo rights.
	OperatorUser = "kremedy-op"
	NoSudoUser   = "kremedy-nosudo"
	// ClientUser is the SCRAM user the secured lab's client.properties
	// authenticate as; adminUser is the brokers' own.
	ClientUser = "kremedy"
	adminUser  = "admin"
	// AppUser is a SCRAM user with ACLs for topics and groups named
	// app… only; IntruderUser one without any ACL (the authorizer denies
	// it everything).
	AppUser      = "app"
	IntruderUser = "intruder"
	// AppPrefix is the prefix of the topics and groups AppUser may use.
	AppPrefix = "app"
	// ZKOperator is the ZooKeeper digest identity the lab's superDigest
	// makes a superuser; zkBrokerUser the brokers' SASL identity.
	ZKOperator   = "kremedy"
	zkBrokerUser = "kafka"
)

// ErrNeedsRoot: a secured lab chowns its brokers' data to ServiceUser.
var ErrNeedsRoot = errors.New("lab up --secure needs root")

// The secured lab's files.
func (l *Lab) pkiDir() string { return l.path("pki") }

// ClientProperties is the secured lab's client.properties (JKS truststore,
// Kafka's default type, so ssl.truststore.type is left out as operators
// often do); ClientPropertiesPKCS12 the same with a PKCS12 truststore and
// its passwords read through a ${file:…} config provider.
func (l *Lab) ClientProperties() string       { return l.path("client.properties") }
func (l *Lab) ClientPropertiesPKCS12() string { return l.path("client-pkcs12.properties") }

// CAPEM is the lab CA's certificate for tools that want PEM.
func (l *Lab) CAPEM() string { return filepath.Join(l.pkiDir(), "ca.pem") }

// ZKSecurePort is the secured lab's ZooKeeper TLS port (secureClientPort).
const ZKSecurePort = 2182

// ZKTLSConfigFile holds the zookeeper.ssl.* client settings for it, and
// ZKSecureConnect is the connect string that uses it.
func (l *Lab) ZKTLSConfigFile() string { return l.path("zookeeper-tls.properties") }
func (l *Lab) ZKSecureConnect() string {
	c := l.State.Config
	var hosts []string
	for n := 1; n <= c.ZooKeepers; n++ {
		hosts = append(hosts, fmt.Sprintf("%s:%d", c.ZKHost(n), ZKSecurePort))
	}
	return strings.Join(hosts, ",") + c.Chroot
}

func (l *Lab) trustJKS() string     { return filepath.Join(l.pkiDir(), "truststore.jks") }
func (l *Lab) clientStore() string  { return filepath.Join(l.pkiDir(), "client.p12") }
func (l *Lab) zkStore(n int) string { return filepath.Join(l.pkiDir(), fmt.Sprintf("zk-%d.p12", n)) }

// zkTLSServer is the secured ZooKeeper's TLS part of zoo.cfg: a
// secureClientPort beside the plain one (the brokers keep SASL on the
// plain port), served by Netty, with the lab CA's certificate.
func (l *Lab) zkTLSServer(n int) (string, error) {
	s, err := l.secrets()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`secureClientPort=%d
secureClientPortAddress=%s
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=%s
ssl.keyStore.password=%s
ssl.keyStore.type=PKCS12
ssl.trustStore.location=%s
ssl.trustStore.password=%s
ssl.trustStore.type=JKS
ssl.clientAuth=none
`, ZKSecurePort, l.State.Config.ZKHost(n), l.zkStore(n), s.store, l.trustJKS(), s.store), nil
}

// ZKOperatorPasswordFile holds ZKOperator's digest password.
func (l *Lab) ZKOperatorPasswordFile() string { return l.path("zk-operator.password") }
func (l *Lab) secretsPath() string            { return l.path("secrets.properties") }
func (l *Lab) toolsLog4j() string             { return l.path("tools-log4j.properties") }
func (l *Lab) libsDir() string {
	if l.State.Config.Secure {
		return l.path("kafka-libs") // ServiceUser cannot read the cache in root's home
	}
	return filepath.Join(l.State.Config.KafkaHome, "libs")
}

// secrets are the secured lab's passwords, made at random once (a lab
// made before a password existed gets it on its next `lab up`).
type secrets struct {
	store, key, admin, client, zkBroker, zkOperator string
	// app and intruder are the SCRAM passwords of AppUser and
	// IntruderUser; ctrl, ctrlAdmin and ctrlOperator the PLAIN passwords
	// of the controllers' listener (the controllers' own, the brokers',
	// kremedy's).
	app, intruder, ctrl, ctrlAdmin, ctrlOperator string
}

// fields names each secret as secrets.properties has it.
func (s *secrets) fields() []struct {
	key string
	v   *string
} {
	return []struct {
		key string
		v   *string
	}{{"store.password", &s.store}, {"key.password", &s.key}, {"admin.password", &s.admin}, {"client.password", &s.client},
		{"zk.broker.password", &s.zkBroker}, {"zk.operator.password", &s.zkOperator}, {"app.password", &s.app},
		{"intruder.password", &s.intruder}, {"controller.password", &s.ctrl}, {"controller.admin.password", &s.ctrlAdmin},
		{"controller.operator.password", &s.ctrlOperator}}
}

func (l *Lab) secrets() (secrets, error) {
	var s secrets
	b, err := os.ReadFile(l.secretsPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return secrets{}, err
	}
	p, err := javaprops.Parse(b)
	if err != nil {
		return secrets{}, fmt.Errorf("%s: %w", l.secretsPath(), err)
	}
	missing := false
	var text strings.Builder
	for i, f := range s.fields() {
		*f.v = p.Values[f.key]
		// The first six made the stores and the brokers' credentials: a
		// file without one of them is damaged, not old.
		if *f.v == "" && i < 6 && len(b) > 0 {
			return secrets{}, fmt.Errorf("%s lacks %s: the lab's stores and credentials were made with it; restore the file or make the lab again (lab down --purge)", l.secretsPath(), f.key)
		}
		if *f.v == "" {
			r := make([]byte, 12)
			_, _ = io.ReadFull(rand.Reader, r)
			*f.v, missing = hex.EncodeToString(r), true
		}
		fmt.Fprintf(&text, "%s=%s\n", f.key, *f.v)
	}
	if missing {
		return s, atomicfile.WriteFile(l.secretsPath(), []byte(text.String()))
	}
	return s, nil
}

// ZKOptions are the options the lab's own ZooKeeper sessions use: the
// operator identity on a secured lab.
func (l *Lab) ZKOptions() zookeeper.Options {
	if !l.State.Config.Secure {
		return zookeeper.Options{}
	}
	s, err := l.secrets()
	if err != nil {
		return zookeeper.Options{}
	}
	return zookeeper.Options{DigestAuth: ZKOperator + ":" + s.zkOperator}
}

// KafkaOpts are the options the lab's own Kafka clients use: on a secured
// lab, read from its client.properties the way kremedy reads an operator's.
func (l *Lab) KafkaOpts() []kgo.Opt {
	if !l.State.Config.Secure {
		return nil
	}
	b, err := os.ReadFile(l.ClientProperties())
	if err != nil {
		return nil
	}
	props, err := kafka.ParseProperties(b)
	if err != nil {
		return nil
	}
	opts, _, err := kafka.OptionsWith(props, l.krb5ConfOrNone())
	if err != nil {
		return nil
	}
	return opts
}

// kafkaClient is the lab's own Kafka client (KafkaOpts); on a secured lab
// with KRaft controllers it reaches their listener as kremedy does, with
// the inventory's controller_client_properties (DescribeQuorum).
func (l *Lab) kafkaClient() (*kafka.Client, error) {
	kc, err := kafka.New(l.State.Config.Bootstrap(), l.KafkaOpts()...)
	if err != nil || !l.State.Config.Secure || !l.State.Config.hasControllers() {
		return kc, err
	}
	b, err := os.ReadFile(l.ControllerClientProperties())
	if err != nil {
		return kc, nil // not written yet: before lab up, no quorum to ask
	}
	props, err := kafka.ParseProperties(b)
	if err == nil {
		var opts []kgo.Opt
		if opts, _, err = kafka.OptionsWith(props, ""); err == nil {
			kc.SetControllerOptions(opts)
		}
	}
	if err != nil {
		kc.Close()
		return nil, fmt.Errorf("%s: %w", l.ControllerClientProperties(), err)
	}
	return kc, nil
}

// formatSCRAM are the `kafka-storage format` arguments that create the
// secured KRaft lab's SCRAM-SHA-512 users in its bootstrap metadata
// (--add-scram, KIP-900): with no ZooKeeper, the brokers' own user must
// exist before the first broker authenticates.
func (l *Lab) formatSCRAM() ([]string, error) {
	s, err := l.secrets()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range []struct{ name, pass string }{{adminUser, s.admin}, {ClientUser, s.client}, {AppUser, s.app}, {IntruderUser, s.intruder}} {
		out = append(out, "--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,iterations=4096,password=%s]", u.name, u.pass))
	}
	return out, nil
}

// giveToService hands a node's data directories, formatted as root, to
// the service user that runs it on a secured lab (a no-op otherwise).
func (l *Lab) giveToService(dirs ...string) error {
	if !l.State.Config.Secure {
		return nil
	}
	uid, gid, err := serviceIDs()
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := chownTree(d, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// krb5ConfOrNone is the Kerberized lab's krb5.conf, "" otherwise.
func (l *Lab) krb5ConfOrNone() string {
	if l.State.Config.Kerberos {
		return l.Krb5Conf()
	}
	return ""
}

// serviceIDs looks up ServiceUser.
func serviceIDs() (uid, gid int, err error) {
	u, err := user.Lookup(ServiceUser)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: user %s (the brokers' service user) does not exist: %v. Run `make lab-users` as root (lab/install-users.sh)", ErrMissingPart, ServiceUser, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// checkSecure refuses a secured lab this machine cannot run.
func checkSecure() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it runs the brokers as %s and gives them their data; nothing was started", ErrNeedsRoot, ServiceUser)
	}
	if _, _, err := serviceIDs(); err != nil {
		return err
	}
	if _, err := user.Lookup(OperatorUser); err != nil {
		return fmt.Errorf("%w: user %s (the SSH login) does not exist: %v. Run `make lab-users` as root", ErrMissingPart, OperatorUser, err)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return fmt.Errorf("%w: setpriv (util-linux) is not installed", ErrMissingPart)
	}
	return nil
}

// superDigest is ZooKeeper's DigestAuthenticationProvider hash of
// user:password.
func superDigest(user, pass string) string {
	h := sha1.Sum([]byte(user + ":" + pass))
	return user + ":" + base64.StdEncoding.EncodeToString(h[:])
}

// writeSecure makes the PKI, the stores, the JAAS files, the client
// files and the libs copy, and hands each broker its data.
func (l *Lab) writeSecure(ctx context.Context) error {
	s, err := l.secrets()
	if err != nil {
		return err
	}
	uid, gid, err := serviceIDs()
	if err != nil {
		return err
	}
	// ServiceUser must reach its files and the operator the authorized
	// keys inside the lab dir; secrets stay 0600 root.
	if err := os.Chmod(l.Dir, 0o755); err != nil {
		return err
	}
	pki, err := NewPKI(ctx, l.pkiDir(), s.store)
	if err != nil {
		return err
	}
	if _, err := os.Stat(l.clientStore()); errors.Is(err, os.ErrNotExist) {
		if _, err := pki.Issue(ctx, Cert{Name: "client", Type: "PKCS12"}); err != nil {
			return err
		}
	}
	if err := os.Chmod(l.pkiDir(), 0o755); err != nil {
		return err
	}
	for _, f := range []string{pki.CAPEM(), pki.TrustJKS(), pki.TrustP12()} {
		if err := os.Chmod(f, 0o644); err != nil {
			return err
		}
	}
	if l.State.Config.Kerberos {
		if err := l.writeKerberos(ctx, uid, gid); err != nil {
			return fmt.Errorf("Kerberos: %w", err)
		}
	}
	if err := l.writeBrokerSecurity(ctx, pki, s, uid, gid); err != nil {
		return err
	}
	if err := l.writeControllerSecurity(ctx, pki, s, uid, gid); err != nil {
		return err
	}
	if err := l.writeZKSecurity(ctx, pki, s); err != nil {
		return err
	}
	if err := l.writeClientFiles(pki, s); err != nil {
		return err
	}
	return l.linkLibs()
}

// javaEscape escapes what java.util.Properties would read otherwise in a
// value written on one line.
func javaEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func writeOwned(path, text string, uid, gid int) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil { // a file written before keeps its mode otherwise
		return err
	}
	return os.Chown(path, uid, gid)
}

func (l *Lab) brokerStoreType(n int) string {
	if n%2 == 1 {
		return "JKS"
	}
	return "PKCS12"
}

func (l *Lab) brokerStore(n int) string {
	ext := map[string]string{"JKS": ".jks", "PKCS12": ".p12"}[l.brokerStoreType(n)]
	return filepath.Join(l.pkiDir(), fmt.Sprintf("broker-%d%s", n, ext))
}

// linkLibs gives the secured lab its own view of the Kafka jars (hard
// links, a copy across file systems): the release's home sits in root's
// cache, which ServiceUser may not read.
func (l *Lab) linkLibs() error {
	src := filepath.Join(l.State.Config.KafkaHome, "libs")
	dst := l.libsDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range ents {
		to := filepath.Join(dst, e.Name())
		if _, err := os.Stat(to); err == nil {
			continue
		}
		from := filepath.Join(src, e.Name())
		if err := os.Link(from, to); err != nil {
			b, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, 0o644); err != nil {
				return err
			}
		}
		_ = os.Chmod(to, 0o644)
	}
	// Every directory above the lab must let ServiceUser through.
	cmd := exec.Command("setpriv", "--reuid="+ServiceUser, "--regid="+ServiceUser, "--init-groups", "--", "test", "-r", filepath.Join(dst, ents[0].Name()))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s cannot read %s: a directory above the lab is closed to other users; put the lab elsewhere (--dir) or open its parents (chmod o+x)", ErrMissingPart, ServiceUser, dst)
	}
	return nil
}

// brokerSecurity is the secured broker's part of server.properties.
func (l *Lab) brokerSecurity(n int) (string, error) {
	s, err := l.secrets()
	if err != nil {
		return "", err
	}
	c := l.State.Config
	jaas := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, adminUser, s.admin)
	super := "User:" + adminUser
	if c.Combined {
		// A combined node is a controller too: the principals its
		// controller listener takes are super users, as on a controller
		// of its own (securedControllerProps). super.users is the whole
		// process's, so kremedy asks the quorum as a PLAIN user of that
		// listener alone (quorumUser), not as its SCRAM principal: that
		// one stays under the ACLs on the brokers' listener.
		super += ";User:" + ctrlUser + ";User:" + quorumUser
	}
	if c.Kerberos {
		// kafka/HOST@REALM maps to User:kafka (sasl.kerberos.principal.to.local.rules' DEFAULT).
		super = "User:" + kafkaService + ";" + super
	}
	text := fmt.Sprintf(`listeners=SASL_SSL://%s:%d
security.inter.broker.protocol=SASL_SSL
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
sasl.enabled.mechanisms=SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=%s
# OAUTHBEARER with Kafka's default, unsecured validator (alg "none" tokens):
# a development cluster's set-up, for rehearsing OAuth clients
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
ssl.keystore.type=%s
ssl.keystore.location=%s
ssl.keystore.password=%s
ssl.key.password=%s
ssl.truststore.type=JKS
ssl.truststore.location=%s
ssl.truststore.password=%s
ssl.client.auth=none
`, c.BrokerHost(n), KafkaPort, javaEscape(jaas), l.brokerStoreType(n), l.brokerStore(n), s.store, l.keyPassFor(n, s),
		l.trustJKS(), s.store)
	authz := `zookeeper.set.acl=true
# ACLs, as a production cluster has them: the brokers' own principal is a
# super user, every other principal needs an ACL (ensureACLs writes the lab's)
authorizer.class.name=kafka.security.authorizer.AclAuthorizer
`
	if c.KRaft {
		authz = l.kraftBrokerAuthz(s)
	}
	text += authz + "super.users=" + super + "\n"
	if c.Kerberos {
		// The SASL lines up to the keystore's become Kerberos's.
		text = l.kerberosBrokerSASL(n, jaas) + text[strings.Index(text, "ssl.keystore.type="):]
	}
	return text, nil
}

// kraftBrokerAuthz is a secured KRaft broker's authorizer and its login
// at the controllers' listener (PLAIN as the brokers' principal, as
// BrokerControllerSettings gives a migrating cluster's brokers).
func (l *Lab) kraftBrokerAuthz(s secrets) string {
	plain := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, adminUser, s.ctrlAdmin)
	head := "# the controllers' listener: SASL_SSL with PLAIN, as the brokers' principal\n"
	if l.State.Config.Combined {
		// A combined node serves the controllers' listener too: one JAAS
		// line holds its own login (the controllers') and the users it
		// takes, those of a controller of its own.
		plain = controllerPlain(s, quorumUser)
		head = "# the controllers' listener, its own: SASL_SSL with PLAIN, as a controller of\n# its own has it (securedControllerProps)\nlistener.name.controller.sasl.enabled.mechanisms=PLAIN\n"
	}
	return head + fmt.Sprintf(`sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=%s
# ACLs, as a production cluster has them, in the metadata log: the brokers'
# own principal is a super user, every other principal needs an ACL
# (ensureACLs writes the lab's)
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
`, javaEscape(plain))
}

// keyPassFor: a PKCS12 store has one password for store and key.
func (l *Lab) keyPassFor(n int, s secrets) string {
	if l.brokerStoreType(n) == "PKCS12" {
		return s.store
	}
	return s.key
}

// zkSecurityArgs are the secured ZooKeeper's JVM flags.
func (l *Lab) zkSecurityArgs(n int) []string {
	s, err := l.secrets()
	if err != nil {
		return nil
	}
	return []string{
		"-Djava.security.auth.login.config=" + filepath.Join(l.ZKDir(n), "jaas.conf"),
		"-Dzookeeper.authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
		"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + superDigest(ZKOperator, s.zkOperator),
	}
}

// ensureSCRAM creates the SCRAM credentials of the brokers' and the
// client's users with Kafka's own kafka-configs (ConfigCommand, through
// ZooKeeper, which is how a ZooKeeper-mode cluster's first SCRAM users are
// made), authenticated to ZooKeeper as the brokers are.
func (l *Lab) ensureSCRAM(ctx context.Context, zc *zookeeper.Conn, out io.Writer) error {
	s, err := l.secrets()
	if err != nil {
		return err
	}
	// kafka-configs through ZooKeeper does not create the chroot the
	// brokers would (createChrootIfNecessary).
	if c := l.State.Config; c.Chroot != "" {
		servers, _, _ := strings.Cut(c.ZKConnect(), "/")
		if err := ensureChroot(ctx, servers, c.Chroot); err != nil {
			return err
		}
	}
	for _, u := range []struct{ name, pass string }{{adminUser, s.admin}, {ClientUser, s.client}, {AppUser, s.app}, {IntruderUser, s.intruder}} {
		if ok, _, err := zc.Exists(ctx, "/config/users/"+u.name); err != nil {
			return err
		} else if ok {
			continue
		}
		argv := []string{l.State.Java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Djava.security.auth.login.config=" + filepath.Join(l.BrokerDir(1), "jaas.conf"),
			"-Dlog4j.configuration=file:" + l.toolsLog4j(),
			"-cp", filepath.Join(l.libsDir(), "*"), "kafka.admin.ConfigCommand",
			"--zookeeper", l.State.Config.ZKConnect(), "--alter", "--entity-type", "users", "--entity-name", u.name,
			"--add-config", fmt.Sprintf("SCRAM-SHA-512=[iterations=4096,password=%s]", u.pass)}
		b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kafka-configs: SCRAM credentials of %s: %v\n%s", u.name, err, indent(string(b)))
		}
		fmt.Fprintf(out, "  scram     %s: SCRAM-SHA-512 credentials created in ZooKeeper (kafka-configs)\n", u.name)
	}
	return nil
}

// writeBrokerSecurity issues each broker's keystore, writes its ZooKeeper
// JAAS file and hands it its data.
func (l *Lab) writeBrokerSecurity(ctx context.Context, pki *PKI, s secrets, uid, gid int) error {
	c := l.State.Config
	for n := 1; n <= c.Brokers; n++ {
		store := l.brokerStore(n)
		if _, err := os.Stat(store); errors.Is(err, os.ErrNotExist) {
			if _, err := pki.Issue(ctx, Cert{Name: fmt.Sprintf("broker-%d", n), SANs: []string{"ip:" + c.BrokerHost(n)},
				Type: l.brokerStoreType(n), KeyPass: s.key}); err != nil {
				return err
			}
		}
		if err := os.Chown(store, uid, gid); err != nil {
			return err
		}
		if err := writeOwned(filepath.Join(l.BrokerDir(n), "jaas.conf"), l.zkClientJAAS(s), uid, gid); err != nil {
			return err
		}
		for _, d := range append(l.LogDirs(n), filepath.Join(l.BrokerDir(n), "logs"), l.BrokerDir(n)) {
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
		// Kafka's data is its service user's alone, as packages set it up:
		// the operator reaches it only through sudo.
		for _, d := range l.LogDirs(n) {
			if err := os.Chmod(d, 0o750); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeZKSecurity issues each ZooKeeper server's TLS keystore and writes its
// SASL server JAAS file.
func (l *Lab) writeZKSecurity(ctx context.Context, pki *PKI, s secrets) error {
	c := l.State.Config
	for n := 1; n <= c.ZooKeepers; n++ {
		if _, err := os.Stat(l.zkStore(n)); errors.Is(err, os.ErrNotExist) {
			if _, err := pki.Issue(ctx, Cert{Name: fmt.Sprintf("zk-%d", n), SANs: []string{"ip:" + c.ZKHost(n)}, Type: "PKCS12"}); err != nil {
				return err
			}
		}
		jaas := fmt.Sprintf("// ZooKeeper's SASL server: the brokers' identity\nServer {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  user_%s=%q;\n};\n", zkBrokerUser, s.zkBroker)
		if err := os.WriteFile(filepath.Join(l.ZKDir(n), "jaas.conf"), []byte(jaas), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeClientFiles writes what operators' tools take: client.properties
// (JKS), its PKCS12 variant, the ZooKeeper TLS settings and the ZooKeeper
// operator's password.
func (l *Lab) writeClientFiles(pki *PKI, s secrets) error {
	jaasLine := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, ClientUser, s.client)
	client := fmt.Sprintf(`# written by kremedy lab up --secure: the lab's client settings, as an operator's
# client.properties has them (a JKS truststore; JKS is Kafka's default type)
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=%s
ssl.truststore.location=%s
ssl.truststore.password=%s
`, javaEscape(jaasLine), pki.TrustJKS(), s.store)
	if l.State.Config.Kerberos {
		client = l.kerberosClientProperties(pki.TrustJKS(), s.store)
	}
	if err := os.WriteFile(l.ClientProperties(), []byte(client), 0o600); err != nil {
		return err
	}
	p12 := fmt.Sprintf(`# written by kremedy lab up --secure: the same client with a PKCS12
# truststore, its passwords read through Kafka's FileConfigProvider
config.providers=file
config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="${file:%s:client.password}";
ssl.truststore.type=PKCS12
ssl.truststore.location=%s
ssl.truststore.password=${file:%s:store.password}
# a client certificate too (the brokers do not ask for one: ssl.client.auth=none)
ssl.keystore.type=PKCS12
ssl.keystore.location=%s
ssl.keystore.password=${file:%s:store.password}
`, ClientUser, l.secretsPath(), pki.TrustP12(), l.secretsPath(), l.clientStore(), l.secretsPath())
	if err := os.WriteFile(l.ClientPropertiesPKCS12(), []byte(p12), 0o600); err != nil {
		return err
	}
	if l.State.Config.KRaft {
		return l.writeToolFiles() // a KRaft lab has no ZooKeeper to reach
	}
	zkTLS := fmt.Sprintf(`# written by kremedy lab up --secure: TLS to ZooKeeper's secureClientPort
# (%d), as a broker's zookeeper.ssl.* settings or kafka's --zk-tls-config-file
zookeeper.ssl.client.enable=true
zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty
zookeeper.ssl.truststore.location=%s
zookeeper.ssl.truststore.password=%s
`, ZKSecurePort, pki.TrustJKS(), s.store)
	if err := os.WriteFile(l.ZKTLSConfigFile(), []byte(zkTLS), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(l.ZKOperatorPasswordFile(), []byte(s.zkOperator+"\n"), 0o600); err != nil {
		return err
	}
	return l.writeToolFiles()
}

// writeToolFiles opens authorized_keys to the operator's sshd session and
// writes the Kafka tools' log4j configuration.
func (l *Lab) writeToolFiles() error {
	// sshd reads authorized_keys as the operator logging in.
	if err := os.Chmod(l.path("authorized_keys"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(l.toolsLog4j(), []byte("log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\nlog4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stderr.layout.ConversionPattern=%p %m (%c)%n\n"), 0o644); err != nil {
		return err
	}
	return nil
}

// adminOpts are the options of a client authenticated as the brokers'
// own principal (a super user): the lab writes its ACLs with it.
func (l *Lab) adminOpts() ([]kgo.Opt, error) { return l.UserOpts(adminUser) }

// UserOpts are the options of a client of the secured lab authenticated
// with SCRAM-SHA-512 as user (ClientUser, AppUser, IntruderUser, or the
// brokers' own), over TLS with the lab CA.
func (l *Lab) UserOpts(user string) ([]kgo.Opt, error) {
	s, err := l.secrets()
	if err != nil {
		return nil, err
	}
	pass, ok := map[string]string{adminUser: s.admin, ClientUser: s.client, AppUser: s.app, IntruderUser: s.intruder}[user]
	if !ok {
		return nil, fmt.Errorf("the secured lab has no SCRAM user %q", user)
	}
	opts, _, err := kafka.Options(map[string]string{
		"security.protocol":       "SASL_SSL",
		"sasl.mechanism":          "SCRAM-SHA-512",
		"sasl.jaas.config":        fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, pass),
		"ssl.truststore.location": l.trustJKS(),
		"ssl.truststore.password": s.store,
	})
	return opts, err
}

// OperatorPrincipals are the principals the secured lab's operator tools
// authenticate as: kremedy's SCRAM user and the OAuth rehearsal's.
var OperatorPrincipals = []string{"User:" + ClientUser, "User:kremedy-app"}

// ensureACLs writes the secured lab's ACLs through the brokers, as their
// super user: the operator's principals may do all kremedy does
// (every operation on the cluster, every topic, group and transactional
// id), AppUser may use the topics and groups named AppPrefix…, and
// IntruderUser has none, so the authorizer denies it everything. In
// ZooKeeper mode they live under /kafka-acl; the migration carries them
// into the metadata log (KIP-866).
func (l *Lab) ensureACLs(ctx context.Context, out io.Writer) error {
	opts, err := l.adminOpts()
	if err != nil {
		return err
	}
	kc, err := kafka.New(l.State.Config.Bootstrap(), opts...)
	if err != nil {
		return err
	}
	defer kc.Close()
	adm := kc.Admin()
	// CreateAcls of ACLs that exist changes nothing: all of them, every
	// time, so that a lab up cut off half-way is completed.
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow(OperatorPrincipals...).Clusters().Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:" + AppUser).Topics(AppPrefix).Groups(AppPrefix).TransactionalIDs(AppPrefix).
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll),
	} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return fmt.Errorf("write the lab's ACLs: %w", err)
		}
		for _, r := range res {
			if r.Err != nil {
				return fmt.Errorf("write the lab's ACL for %s on %s %s: %w", r.Principal, r.Type, r.Name, r.Err)
			}
		}
	}
	authz := "AclAuthorizer"
	if l.State.Config.KRaft {
		authz = "StandardAuthorizer"
	}
	fmt.Fprintf(out, "  acls      %s: everything; User:%s: topics and groups %s…; User:%s: none (%s, super user User:%s)\n",
		strings.Join(OperatorPrincipals, ", "), AppUser, AppPrefix, IntruderUser, authz, adminUser)
	return nil
}

// The secured lab's KRaft controllers (lab up --secure --kraft-controllers
// N), provisioned for the migration of a secured cluster.
//
// Their own listener is SASL_SSL with PLAIN: SCRAM credentials live in the
// metadata log, which a controller cannot read before its quorum has a
// leader, so SCRAM is not for the controller listener (Confluent's
// cp-ansible documents the same: "SCRAM is not supported between KRaft
// controllers"). PLAIN's users are in the listener's JAAS line: the
// controllers' own (ctrlUser), the brokers' (adminUser, which the brokers
// log in as: NodeToControllerChannelManager builds its channel with
// JaasContext.Type.SERVER and the controller listener's name, so the
// brokers read listener.name.controller.plain.sasl.jaas.config), and
// kremedy's (ClientUser, for DescribeQuorum: ControllerApis authorizes it
// as DESCRIBE on the cluster, which before the migration copies the ACLs
// only super.users have).
//
// A migrating controller sends the ZooKeeper-mode brokers their RPCs over
// the brokers' inter-broker listener (ControllerChannelManager: the
// inter.broker.listener.name, sasl.mechanism.inter.broker.protocol and that
// listener's JAAS line), and writes ZooKeeper as the brokers do: the JAAS
// Client section of the brokers' ZooKeeper SASL identity and
// zookeeper.set.acl=true (KafkaZkClient.createZkClient refuses
// zookeeper.set.acl without ZooKeeper SASL or TLS).
const ctrlUser = "controller"

// ControllerClientProperties is how kremedy reaches the secured
// controllers' listener (the inventory's kafka.controller_client_properties).
func (l *Lab) ControllerClientProperties() string { return l.path("controller-client.properties") }

// BrokerControllerSettings holds what every broker needs to reach the
// secured controllers' listener, the zk-to-kraft runbook's
// controller_settings: sasl.mechanism.controller.protocol and the
// listener's JAAS line.
func (l *Lab) BrokerControllerSettings() string { return l.path("broker-controller.properties") }

func (l *Lab) controllerStore(k int) string {
	return filepath.Join(l.pkiDir(), fmt.Sprintf("controller-%d.p12", k))
}

// securedControllerProps is controller k's controller.properties on a
// secured lab: a KRaft lab's controller, or one provisioned for the
// migration (with the brokers' inter-broker listener and ZooKeeper).
func (l *Lab) securedControllerProps(k int) (string, error) {
	s, err := l.secrets()
	if err != nil {
		return "", err
	}
	c := l.State.Config
	plain := controllerPlain(s, ClientUser)
	head := fmt.Sprintf("# KRaft controller %d of the secured kremedy lab, provisioned for the\n# ZooKeeper → KRaft migration (KIP-866) of a secured cluster.\n", k)
	authz := "# KRaft's authorizer: the ACLs the migration copies from ZooKeeper\n"
	if c.KRaft {
		head = fmt.Sprintf("# KRaft controller %d of the secured kremedy lab (a KRaft-only cluster)\n", k)
		authz = "# KRaft's authorizer: the ACLs live in the metadata log\n"
	}
	text := head + fmt.Sprintf(`process.roles=controller
node.id=%d
%s
controller.listener.names=CONTROLLER
listeners=CONTROLLER://%s:%d
# the controller listener: SASL_SSL with PLAIN (SCRAM needs the metadata log)
listener.security.protocol.map=CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL
listener.name.controller.sasl.enabled.mechanisms=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=%s
ssl.keystore.type=PKCS12
ssl.keystore.location=%s
ssl.keystore.password=%s
ssl.truststore.type=JKS
ssl.truststore.location=%s
ssl.truststore.password=%s
ssl.client.auth=none
`, ControllerID(k), c.quorumProp(), c.ControllerHost(k), ControllerPort, javaEscape(plain),
		l.controllerStore(k), s.store, l.trustJKS(), s.store) + authz + fmt.Sprintf(`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:%s;User:%s;User:%s
log.dirs=%s
num.network.threads=2
num.io.threads=2
background.threads=2
`, adminUser, ctrlUser, ClientUser, l.controllerMetadataDir(k))
	if c.KRaft {
		return text, nil
	}
	scram := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, adminUser, s.admin)
	return text + fmt.Sprintf(`# the brokers' inter-broker listener, for the RPCs a migrating controller
# sends the ZooKeeper-mode brokers
inter.broker.listener.name=SASL_SSL
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=%s
zookeeper.metadata.migration.enable=true
zookeeper.connect=%s
zookeeper.set.acl=true
zookeeper.session.timeout.ms=6000
`, javaEscape(scram), c.ZKConnect()), nil
}

// controllerPlain is the controllers' listener's PLAIN JAAS line: the
// controller's own login and the users it takes (its own, the brokers',
// kremedy's as client).
func controllerPlain(s secrets, client string) string {
	return fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s" user_%s="%s" user_%s="%s";`,
		ctrlUser, s.ctrl, ctrlUser, s.ctrl, adminUser, s.ctrlAdmin, client, s.ctrlOperator)
}

// quorumUser is kremedy's PLAIN user at a combined node's controller
// listener: a user of that listener alone (no SCRAM credentials), so that
// its place in super.users gives nothing on the brokers' listener.
const quorumUser = "quorum"

// controllerClientUser is who kremedy is at the controllers' listener.
func (c Config) controllerClientUser() string {
	if c.Combined {
		return quorumUser
	}
	return ClientUser
}

// writeControllerSecurity issues each controller's keystore, writes its
// ZooKeeper JAAS file, kremedy's controller client.properties and the
// brokers' controller settings, and hands each controller its files.
func (l *Lab) writeControllerSecurity(ctx context.Context, pki *PKI, s secrets, uid, gid int) error {
	c := l.State.Config
	if !c.hasControllers() {
		return nil
	}
	for k := 1; k <= c.KRaftControllers; k++ {
		if _, err := os.Stat(l.controllerStore(k)); errors.Is(err, os.ErrNotExist) {
			if _, err := pki.Issue(ctx, Cert{Name: fmt.Sprintf("controller-%d", k), SANs: []string{"ip:" + c.ControllerHost(k)}, Type: "PKCS12"}); err != nil {
				return err
			}
		}
		if err := os.Chown(l.controllerStore(k), uid, gid); err != nil {
			return err
		}
		if err := writeOwned(filepath.Join(l.ControllerDir(k), "jaas.conf"), l.zkClientJAAS(s), uid, gid); err != nil {
			return err
		}
		if err := chownTree(l.ControllerDir(k), uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(l.controllerProps(k), 0o600); err != nil {
			return err
		}
	}
	client := fmt.Sprintf(`# written by kremedy lab up --secure: how kremedy reaches the KRaft
# controllers' listener (SASL_SSL, PLAIN): the inventory's
# kafka.controller_client_properties
security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=%s
ssl.truststore.location=%s
ssl.truststore.password=%s
`, javaEscape(fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, c.controllerClientUser(), s.ctrlOperator)),
		l.trustJKS(), s.store)
	if err := os.WriteFile(l.ControllerClientProperties(), []byte(client), 0o600); err != nil {
		return err
	}
	brokers := fmt.Sprintf(`# written by kremedy lab up --secure: what each broker needs to reach the
# KRaft controllers' listener (zk-to-kraft --set controller_settings=THIS):
# the mechanism and the PLAIN login of the brokers' principal. The brokers'
# own ssl.truststore.* already trusts the controllers' certificates.
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.plain.sasl.jaas.config=%s
`, javaEscape(fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`, adminUser, s.ctrlAdmin)))
	return os.WriteFile(l.BrokerControllerSettings(), []byte(brokers), 0o600)
}

// zkClientJAAS is the JAAS file of a JVM that talks to the secured
// ZooKeeper as the brokers do.
func (l *Lab) zkClientJAAS(s secrets) string {
	return fmt.Sprintf("// the ZooKeeper client: SASL DIGEST-MD5 as %q\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=%q\n  password=%q;\n};\n", zkBrokerUser, zkBrokerUser, s.zkBroker)
}

// chownTree hands a directory and everything under it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
