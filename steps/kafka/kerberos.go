package kafka

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
)

// ErrKerberos means the Kerberos login that sasl.mechanism=GSSAPI needs
// failed: a keytab, principal, ticket cache, realm or clock, named in the
// message. Nothing was asked of the cluster.
var ErrKerberos = errors.New("Kerberos login failed")

// Krb5Conf is the krb5.conf a GSSAPI client reads: $KRB5_CONFIG (its
// first file), else /etc/krb5.conf, as MIT's tools and Kafka clients
// started with -Djava.security.krb5.conf pointing at the same file do.
func Krb5Conf() string {
	if p := os.Getenv("KRB5_CONFIG"); p != "" {
		return strings.Split(p, ":")[0]
	}
	return "/etc/krb5.conf"
}

// krb5LoginModule is the JAAS login module Kafka's clients use for GSSAPI.
const krb5LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// kerberosOpt is sasl.mechanism=GSSAPI as Kafka's Java client reads it:
// sasl.kerberos.service.name (or the JAAS serviceName), and a
// sasl.jaas.config with Krb5LoginModule — useKeyTab=true, keyTab and
// principal, or useTicketCache=true (ticketCache, else $KRB5CCNAME, else
// /tmp/krb5cc_UID). It logs in to the KDC at once, so that a missing
// keytab, an unknown principal, a key the KDC refuses, an unknown realm or
// a skewed clock stops the command before anything is asked of the
// cluster, saying which.
func kerberosOpt(props map[string]string, cfg, krb5Conf string) (kgo.Opt, error) {
	if !strings.Contains(cfg, krb5LoginModule) {
		return nil, fmt.Errorf("%w: sasl.mechanism=GSSAPI needs a sasl.jaas.config with %s (useKeyTab=true keyTab=\"…\" principal=\"…\", or useTicketCache=true)", ErrUnsupportedProperty, krb5LoginModule)
	}
	o := jaas(cfg)
	service := cmp.Or(props["sasl.kerberos.service.name"], o["serviceName"])
	if service == "" {
		return nil, fmt.Errorf("%w: sasl.mechanism=GSSAPI needs sasl.kerberos.service.name: the first part of the brokers' principal (kafka in kafka/broker1.example.com@REALM); Kafka's client refuses to start without it too", ErrUnsupportedProperty)
	}
	cl, err := kerberosClient(o, cmp.Or(krb5Conf, Krb5Conf()))
	if err != nil {
		return nil, err
	}
	return kgo.SASL(kerberos.Auth{Client: cl, Service: service}.AsMechanism()), nil
}

// kerberosClient logs in as the JAAS options say and returns the client.
func kerberosClient(o map[string]string, conf string) (*client.Client, error) {
	kc, err := config.Load(conf)
	var unsupported config.UnsupportedDirective
	if errors.As(err, &unsupported) {
		err = nil // a directive gokrb5 does not know (v4 lines): the rest is read
	}
	if err != nil {
		return nil, fmt.Errorf("%w: krb5.conf %s: %v. Give the krb5.conf your Kafka clients use (-Djava.security.krb5.conf) as the inventory's kafka.krb5_conf, or KRB5_CONFIG; nothing was connected", ErrKerberos, conf, err)
	}
	settings := []func(*client.Settings){client.DisablePAFXFAST(true)}
	isTrue := func(k string) bool { return strings.EqualFold(o[k], "true") }
	var cl *client.Client
	var who string
	switch {
	case isTrue("useKeyTab"):
		kt, user, realm, err := keytabLogin(o, kc, conf)
		if err != nil {
			return nil, err
		}
		who = user + "@" + realm
		cl = client.NewWithKeytab(user, realm, kt, kc, settings...)
	case isTrue("useTicketCache"):
		path, err := ticketCache(o)
		if err != nil {
			return nil, err
		}
		cc, err := loadCCache(path)
		if err != nil {
			return nil, fmt.Errorf("%w: ticket cache %s: %v. Run kinit first (or set useKeyTab=true with a keyTab and principal); nothing was connected", ErrKerberos, path, err)
		}
		pn := cc.GetClientPrincipalName()
		who = pn.PrincipalNameString() + "@" + cc.GetClientRealm()
		if p := o["principal"]; p != "" && withRealm(p, kc) != who {
			return nil, fmt.Errorf("%w: the ticket cache %s holds %s, not %s (sasl.jaas.config principal=): kinit as %s; nothing was connected", ErrKerberos, path, who, p, p)
		}
		if err := tgtValid(cc, path, who); err != nil {
			return nil, err
		}
		if cl, err = client.NewFromCCache(cc, kc, settings...); err != nil {
			return nil, fmt.Errorf("%w: ticket cache %s: %v; nothing was connected", ErrKerberos, path, err)
		}
		if _, err := realmKDCs(kc, cc.GetClientRealm(), conf); err != nil {
			return nil, err
		}
		return cl, nil // a ticket cache holds the TGT already: no AS exchange
	default:
		return nil, fmt.Errorf("%w: sasl.jaas.config with %s needs useKeyTab=true keyTab=\"…\" principal=\"…\", or useTicketCache=true (a TGT from kinit); nothing was connected", ErrUnsupportedProperty, krb5LoginModule)
	}
	if err := loginWithin(cl, 20*time.Second); err != nil {
		return nil, explainKerberos(err, who, o["keyTab"], conf, kc)
	}
	return cl, nil
}

// keytabLogin checks the keytab and principal before the AS exchange: the
// file is there and holds a key for the principal, whose realm krb5.conf
// knows.
func keytabLogin(o map[string]string, kc *config.Config, conf string) (*keytab.Keytab, string, string, error) {
	path, p := o["keyTab"], o["principal"]
	if path == "" || p == "" {
		return nil, "", "", fmt.Errorf("%w: useKeyTab=true needs keyTab=\"…\" and principal=\"…\" in sasl.jaas.config", ErrUnsupportedProperty)
	}
	kt, err := keytab.Load(path)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: keyTab %s: %v (sasl.jaas.config keyTab=); nothing was connected", ErrKerberos, path, err)
	}
	full := withRealm(p, kc)
	user, realm, _ := strings.Cut(full, "@")
	if _, err := realmKDCs(kc, realm, conf); err != nil {
		return nil, "", "", err
	}
	var held []string
	for _, e := range kt.Entries {
		name := strings.Join(e.Principal.Components, "/") + "@" + e.Principal.Realm
		if name == full { // principals are case-sensitive
			return kt, user, realm, nil
		}
		if !slices.Contains(held, name) {
			held = append(held, name)
		}
	}
	return nil, "", "", fmt.Errorf("%w: keyTab %s holds no key for principal %s (it holds %s): the keytab or the principal in sasl.jaas.config is wrong; nothing was connected", ErrKerberos, path, full, strings.Join(held, ", "))
}

// withRealm is a principal with its realm: krb5.conf's default_realm when
// it names none.
func withRealm(p string, kc *config.Config) string {
	if strings.Contains(p, "@") {
		return p
	}
	return p + "@" + kc.LibDefaults.DefaultRealm
}

// realmKDCs refuses a realm whose KDCs krb5.conf does not name (and DNS may
// not be asked for).
func realmKDCs(kc *config.Config, realm, conf string) (int, error) {
	n, _, err := kc.GetKDCs(realm, true)
	if err != nil || n == 0 {
		var known []string
		for _, r := range kc.Realms {
			known = append(known, r.Realm)
		}
		return 0, fmt.Errorf("%w: realm %s is unknown: %s names no KDC for it ([realms]: %s; dns_lookup_kdc: %v); use the principal's right realm or add the realm's KDCs; nothing was connected",
			ErrKerberos, realm, conf, strings.Join(known, ", "), kc.LibDefaults.DNSLookupKDC)
	}
	return n, nil
}

// ticketCache is where the TGT is: ticketCache=, $KRB5CCNAME, else
// /tmp/krb5cc_UID (MIT's and Java's default). Only a file cache can be read:
// KEYRING:, KCM:, DIR: and API: caches (RHEL's default is KEYRING:) are
// refused with what to do instead.
func ticketCache(o map[string]string) (string, error) {
	p := o["ticketCache"]
	if p == "" {
		p = os.Getenv("KRB5CCNAME")
	}
	if p == "" {
		return filepath.Join("/tmp", "krb5cc_"+strconv.Itoa(os.Getuid())), nil
	}
	if kind, _, ok := strings.Cut(p, ":"); ok && kind != "FILE" && !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: the ticket cache %s is a %s: cache, which kremedy cannot read (it reads file caches): `kinit -c FILE:/path/krb5cc …` and give ticketCache=\"/path/krb5cc\", or use useKeyTab=true with a keyTab and principal; nothing was connected", ErrKerberos, p, kind)
	}
	return strings.TrimPrefix(p, "FILE:"), nil
}

// loadCCache reads a file ticket cache; an empty or truncated file is an
// error, never a crash (gokrb5 indexes the file's first byte unchecked).
func loadCCache(path string) (cc *credentials.CCache, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	// A cache someone else planted (/tmp is shared) would log kremedy in as
	// their principal: only the user's own cache is read, as MIT's
	// libraries insist too.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return nil, fmt.Errorf("it belongs to uid %d, not to you (uid %d): a cache another user planted is never used; run kinit as yourself", sys.Uid, os.Getuid())
	}
	if st.Size() < 4 {
		return nil, fmt.Errorf("%d bytes: not a ticket cache", st.Size())
	}
	defer func() {
		if r := recover(); r != nil {
			cc, err = nil, fmt.Errorf("not a ticket cache gokrb5 can read (%v)", r)
		}
	}()
	return credentials.LoadCCache(path)
}

// tgtValid refuses a ticket cache whose TGT has expired.
func tgtValid(cc *credentials.CCache, path, who string) error {
	for _, c := range cc.GetEntries() {
		if len(c.Server.PrincipalName.NameString) > 0 && c.Server.PrincipalName.NameString[0] == "krbtgt" {
			if time.Now().After(c.EndTime) {
				return fmt.Errorf("%w: the TGT of %s in %s expired at %s: run kinit again; nothing was connected", ErrKerberos, who, path, c.EndTime.Format(time.RFC3339))
			}
			return nil
		}
	}
	return fmt.Errorf("%w: the ticket cache %s holds no TGT for %s: run kinit; nothing was connected", ErrKerberos, path, who)
}

// loginWithin is the AS exchange, bounded: gokrb5 takes no context.
func loginWithin(cl *client.Client, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cl.Login() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("no answer from the KDC within %s", d)
	}
}

// explainKerberos names what a failed AS exchange means (the KDC's error
// codes, RFC 4120 §7.5.9).
func explainKerberos(err error, who, keyTab, conf string, kc *config.Config) error {
	s := err.Error()
	realm := who[strings.LastIndex(who, "@")+1:]
	var why string
	switch {
	case strings.Contains(s, "KDC_ERR_C_PRINCIPAL_UNKNOWN"):
		why = fmt.Sprintf("the KDC of realm %s does not know principal %s: the principal in sasl.jaas.config is wrong (or the keytab belongs to another realm)", realm, who)
	case strings.Contains(s, "KDC_ERR_PREAUTH_FAILED"), strings.Contains(s, "Decrypting_Error"), strings.Contains(s, "integrity"):
		why = fmt.Sprintf("the KDC refused the key of %s in keyTab %s: the keytab holds another key than the KDC (a stale keytab after the principal's key changed — compare `klist -kt %s` with `kvno %s` — or another principal's)", who, keyTab, keyTab, who)
	case strings.Contains(s, "KRB_AP_ERR_SKEW"):
		why = fmt.Sprintf("this machine's clock and the KDC's differ by more than the allowed skew (%s, krb5.conf clockskew): set the clock right (NTP)", kc.LibDefaults.Clockskew)
	case strings.Contains(s, "KDC_ERR_CLIENT_REVOKED"):
		why = fmt.Sprintf("principal %s is locked or disabled at the KDC", who)
	case strings.Contains(s, "KDC_ERR_KEY_EXPIRED"):
		why = fmt.Sprintf("the password of %s has expired at the KDC", who)
	case strings.Contains(s, "KDC_ERR_ETYPE_NOSUPP"):
		why = fmt.Sprintf("the keyTab %s and the KDC share no encryption type for %s (permitted_enctypes in krb5.conf, the keytab's enctypes: klist -ekt)", keyTab, who)
	case strings.Contains(s, "Networking_Error"), strings.Contains(s, "no answer"), strings.Contains(s, "connection refused"):
		why = fmt.Sprintf("no KDC of realm %s answered (krb5.conf %s)", realm, conf)
	default:
		why = "the KDC refused the login"
	}
	return fmt.Errorf("%w as %s: %s (%v); nothing was connected", ErrKerberos, who, why, err)
}
