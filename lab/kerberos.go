package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A Kerberized secured lab (lab up --secure --kerberos), as vendor
// distributions set up ZooKeeper-mode clusters: a local MIT KDC (Debian's
// krb5-kdc) for realm Realm on 127.<Net>.4.1:88, a service principal
// kafka/<broker address>@Realm with its keytab for each broker, and an
// operator principal kremedy@Realm with its keytab. The brokers listen on
// SASL_SSL with GSSAPI (also between themselves) beside SCRAM-SHA-512 (the
// lab's own admin and its app users); the client.properties kremedy is
// given logs in with the operator's keytab. ZooKeeper keeps its SASL
// DIGEST-MD5 identities (go-zookeeper has no SASL: kremedy uses the
// superDigest operator, as on the secured lab).
const (
	Realm          = "KREMEDY.LAB"
	KerberosPort   = 88
	KerberosUser   = ClientUser // the operator's principal: kremedy@Realm
	kafkaService   = "kafka"
	kdcPrincipalDB = "principal"
)

// KDCHost is the lab KDC's address.
func (c Config) KDCHost() string { return fmt.Sprintf("127.%d.4.1", c.Net) }

func (l *Lab) kdcDir() string { return l.path("kerberos") }

// Krb5Conf is the Kerberized lab's krb5.conf: what its brokers read
// (-Djava.security.krb5.conf) and the inventory's kafka.krb5_conf.
func (l *Lab) Krb5Conf() string { return filepath.Join(l.kdcDir(), "krb5.conf") }

// OperatorKeytab is kremedy@Realm's keytab (root's alone).
func (l *Lab) OperatorKeytab() string { return filepath.Join(l.kdcDir(), "kremedy.keytab") }

func (l *Lab) brokerKeytab(n int) string {
	return filepath.Join(l.kdcDir(), fmt.Sprintf("broker-%d.keytab", n))
}
func (l *Lab) kdcProfile() string { return filepath.Join(l.kdcDir(), "kdc.conf") }
func (l *Lab) kdcPidFile() string { return filepath.Join(l.kdcDir(), "krb5kdc.pid") }

// BrokerPrincipal is broker n's service principal: the address clients
// dial (franz-go and Kafka's own clients ask for SERVICE/HOST).
func (c Config) BrokerPrincipal(n int) string {
	return fmt.Sprintf("%s/%s@%s", kafkaService, c.BrokerHost(n), Realm)
}

// kdcTools finds MIT Kerberos's KDC programs.
func kdcTools() (kdc, util, kadmin string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		p := "/usr/sbin/" + name
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s (MIT Kerberos's KDC) is not installed: apt-get install krb5-kdc krb5-admin-server krb5-user (`make deps` does)", ErrMissingPart, name)
		}
		return p, nil
	}
	if kdc, err = find("krb5kdc"); err != nil {
		return
	}
	if util, err = find("kdb5_util"); err != nil {
		return
	}
	kadmin, err = find("kadmin.local")
	return
}

// kdcEnv points MIT's tools at the lab's own KDC profile and krb5.conf,
// never the machine's.
func (l *Lab) kdcEnv() []string {
	return append(os.Environ(), "KRB5_KDC_PROFILE="+l.kdcProfile(), "KRB5_CONFIG="+l.Krb5Conf())
}

// writeKerberos writes the KDC's profile and krb5.conf, creates the realm's
// database once, and each principal's keytab once.
func (l *Lab) writeKerberos(ctx context.Context, uid, gid int) error {
	_, util, _, err := kdcTools()
	if err != nil {
		return err
	}
	c := l.State.Config
	dir := l.kdcDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kdc := fmt.Sprintf("%s:%d", c.KDCHost(), KerberosPort)
	profile := fmt.Sprintf(`# written by kremedy lab up --kerberos: the lab's own MIT KDC
[kdcdefaults]
 kdc_ports = %d
 kdc_tcp_ports = %d
[realms]
 %s = {
  database_name = %s
  key_stash_file = %s
  acl_file = %s
  kdc_listen = %s
  kdc_tcp_listen = %s
  max_life = 24h 0m 0s
  max_renewable_life = 7d 0h 0m 0s
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  default_principal_flags = +preauth
 }
[logging]
 kdc = FILE:%s
`, KerberosPort, KerberosPort, Realm, filepath.Join(dir, kdcPrincipalDB), filepath.Join(dir, "stash"), filepath.Join(dir, "kadm5.acl"),
		kdc, kdc, filepath.Join(dir, "kdc.log"))
	if err := os.WriteFile(l.kdcProfile(), []byte(profile), 0o600); err != nil {
		return err
	}
	// The clients' krb5.conf: the lab's realm only, its KDC over TCP, no
	// DNS and no reverse lookups (the brokers are named by address).
	conf := fmt.Sprintf(`# written by kremedy lab up --kerberos: the lab realm's krb5.conf (for the
# brokers' -Djava.security.krb5.conf and kremedy's kafka.krb5_conf)
[libdefaults]
 default_realm = %s
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 dns_canonicalize_hostname = false
 udp_preference_limit = 1
 ticket_lifetime = 24h
 forwardable = true
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
[realms]
 %s = {
  kdc = %s
 }
`, Realm, Realm, kdc)
	if err := os.WriteFile(l.Krb5Conf(), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kadm5.acl"), nil, 0o600); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, kdcPrincipalDB)); errors.Is(err, os.ErrNotExist) {
		master := make([]byte, 16)
		_, _ = io.ReadFull(rand.Reader, master)
		cmd := exec.CommandContext(ctx, util, "create", "-s", "-r", Realm, "-P", hex.EncodeToString(master))
		cmd.Env = l.kdcEnv()
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kdb5_util create (realm %s): %v\n%s", Realm, err, indent(string(b)))
		}
	}
	for n := 1; n <= c.Brokers; n++ {
		if err := l.ensureKeytab(ctx, c.BrokerPrincipal(n), l.brokerKeytab(n)); err != nil {
			return err
		}
		if err := os.Chown(l.brokerKeytab(n), uid, gid); err != nil {
			return err
		}
	}
	return l.ensureKeytab(ctx, KerberosUser+"@"+Realm, l.OperatorKeytab())
}

// ensureKeytab creates principal with a random key and exports it to
// keytab, once.
func (l *Lab) ensureKeytab(ctx context.Context, principal, keytab string) error {
	if _, err := os.Stat(keytab); err == nil {
		return nil
	}
	// addprinc of a principal that exists (a keytab deleted by hand) only
	// says so; ktadd then gives it a new key.
	if _, err := l.Kadmin(ctx, "addprinc -randkey "+principal); err != nil {
		return err
	}
	b, err := l.Kadmin(ctx, "ktadd -k "+keytab+" "+principal)
	if err != nil {
		return err
	}
	if _, err := os.Stat(keytab); err != nil {
		return fmt.Errorf("kadmin.local ktadd wrote no keytab %s for %s:\n%s", keytab, principal, indent(b))
	}
	return nil
}

// Kadmin runs one kadmin.local query on the lab's KDC database (addprinc,
// ktadd, cpw …) and returns its output.
func (l *Lab) Kadmin(ctx context.Context, query string) (string, error) {
	_, _, kadmin, err := kdcTools()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, kadmin, "-r", Realm, "-q", query)
	cmd.Env = l.kdcEnv()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("kadmin.local %q: %v\n%s", query, err, indent(string(b)))
	}
	return string(b), nil
}

// kdcPID is the lab KDC's process, 0 when it does not run.
func (l *Lab) kdcPID() int {
	if p := readPid(l.kdcPidFile()); alive(p) && strings.Contains(strings.Join(cmdline(p), " "), l.kdcPidFile()) {
		return p
	}
	if ps := procsContaining(l.kdcPidFile()); len(ps) > 0 {
		return ps[0]
	}
	return 0
}

// startKDC starts the lab's KDC (krb5kdc -n: in the foreground, detached
// by the lab) and waits for it to listen.
func (l *Lab) startKDC(ctx context.Context, out io.Writer) error {
	if l.kdcPID() > 0 {
		return nil
	}
	kdc, _, _, err := kdcTools()
	if err != nil {
		return err
	}
	argv := []string{"env", "KRB5_KDC_PROFILE=" + l.kdcProfile(), "KRB5_CONFIG=" + l.Krb5Conf(), kdc, "-n", "-r", Realm, "-P", l.kdcPidFile()}
	if _, err := spawnDetached(l.kdcDir(), filepath.Join(l.kdcDir(), "krb5kdc.out"), argv); err != nil {
		return err
	}
	host := l.State.Config.KDCHost()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitFor(wctx, 20*time.Millisecond, func() bool { return listening(host, KerberosPort) }); err != nil {
		return fmt.Errorf("the lab's KDC does not listen on %s:%d; see %s and %s", host, KerberosPort, filepath.Join(l.kdcDir(), "krb5kdc.out"), filepath.Join(l.kdcDir(), "kdc.log"))
	}
	fmt.Fprintf(out, "  kdc       %s:%d  started (realm %s; principals %s…, %s@%s)\n", host, KerberosPort, Realm, l.State.Config.BrokerPrincipal(1), KerberosUser, Realm)
	return nil
}

// stopKDC stops the lab's KDC.
func (l *Lab) stopKDC(out io.Writer) {
	if pid := l.kdcPID(); pid > 0 {
		terminate(pid, 5*time.Second)
		fmt.Fprintf(out, "  kdc       stopped\n")
	}
}

// kerberosBrokerSASL is a Kerberized broker's SASL part of server.properties.
func (l *Lab) kerberosBrokerSASL(n int, scramJAAS string) string {
	c := l.State.Config
	krb := fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`, l.brokerKeytab(n), c.BrokerPrincipal(n))
	return fmt.Sprintf(`listeners=SASL_SSL://%s:%d
security.inter.broker.protocol=SASL_SSL
# Kerberos between the brokers and for kremedy; SCRAM-SHA-512 beside it
sasl.mechanism.inter.broker.protocol=GSSAPI
sasl.enabled.mechanisms=GSSAPI,SCRAM-SHA-512
sasl.kerberos.service.name=%s
listener.name.sasl_ssl.gssapi.sasl.jaas.config=%s
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=%s
`, c.BrokerHost(n), KafkaPort, kafkaService, javaEscape(krb), javaEscape(scramJAAS))
}

// kerberosClientProperties is kremedy's client.properties on a Kerberized
// lab: GSSAPI with the operator's keytab.
func (l *Lab) kerberosClientProperties(trust, storePass string) string {
	krb := fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s@%s";`, l.OperatorKeytab(), KerberosUser, Realm)
	return fmt.Sprintf(`# written by kremedy lab up --secure --kerberos: the operator's Kerberos
# client settings (a keytab), as a Kerberized cluster's tools have them
security.protocol=SASL_SSL
sasl.mechanism=GSSAPI
sasl.kerberos.service.name=%s
sasl.jaas.config=%s
ssl.truststore.location=%s
ssl.truststore.password=%s
`, kafkaService, javaEscape(krb), trust, storePass)
}
