package kafka

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jcmturner/gokrb5/v8/config"
)

// TestKerberosOptions: what a GSSAPI client.properties must say before any
// KDC is asked, each refusal naming the setting (the KDC's own answers are
// TestKerberosLab's, on a real MIT KDC).
func TestKerberosOptions(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n dns_lookup_kdc = false\n[realms]\n EXAMPLE.COM = {\n  kdc = 127.0.0.1:1\n }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.cc")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	krb := func(opts string) string { return "com.sun.security.auth.module.Krb5LoginModule required " + opts + ";" }
	for _, tc := range []struct {
		name  string
		props map[string]string
		krb5  string
		want  string
	}{
		{"no sasl.jaas.config", with(), conf, "needs sasl.jaas.config"},
		{"another login module", with("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required;"), conf, "Krb5LoginModule"},
		{"no service name", with("sasl.kerberos.service.name", "", "sasl.jaas.config", krb(`useKeyTab=true keyTab="x" principal="p"`)), conf, "sasl.kerberos.service.name"},
		{"neither keytab nor ticket cache", with("sasl.jaas.config", krb(`principal="p"`)), conf, "useKeyTab=true"},
		{"a keytab without a principal", with("sasl.jaas.config", krb(`useKeyTab=true keyTab="x"`)), conf, `principal="…"`},
		{"no krb5.conf", with("sasl.jaas.config", krb(`useKeyTab=true keyTab="x" principal="p"`)), filepath.Join(dir, "none.conf"), "kafka.krb5_conf"},
		{"no such keytab", with("sasl.jaas.config", krb(`useKeyTab=true keyTab="`+filepath.Join(dir, "none.keytab")+`" principal="p"`)), conf, "none.keytab"},
		{"no ticket cache", with("sasl.jaas.config", krb(`useTicketCache=true ticketCache="`+filepath.Join(dir, "none.cc")+`"`)), conf, "Run kinit first"},
		{"an empty ticket cache", with("sasl.jaas.config", krb(`useTicketCache=true ticketCache="`+empty+`"`)), conf, "not a ticket cache"},
		{"a kernel keyring cache", with("sasl.jaas.config", krb(`useTicketCache=true ticketCache="KEYRING:persistent:0"`)), conf, "is a KEYRING: cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := OptionsWith(tc.props, tc.krb5)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error saying %q", err, tc.want)
			}
			if !errors.Is(err, ErrKerberos) && !errors.Is(err, ErrUnsupportedProperty) {
				t.Fatalf("%v is neither ErrKerberos nor ErrUnsupportedProperty", err)
			}
		})
	}
}

// TestExplainKerberos: the KDC's error codes (RFC 4120 §7.5.9), as gokrb5
// reports them, read as what to do.
func TestExplainKerberos(t *testing.T) {
	kc := config.New()
	for code, want := range map[string]string{
		"KDC_ERR_C_PRINCIPAL_UNKNOWN Client not found in Kerberos database": "does not know principal ops@EX.COM",
		"KDC_ERR_PREAUTH_FAILED Pre-authentication information was invalid": "refused the key of ops@EX.COM",
		"KRB_AP_ERR_SKEW Clock skew too great":                              "clock",
		"KDC_ERR_CLIENT_REVOKED":                                            "locked or disabled",
		"Networking_Error: failed to communicate with KDC":                  "no KDC of realm EX.COM answered",
	} {
		err := explainKerberos(errors.New("[Root cause: KDC_Error] KDC_Error: AS Exchange Error: kerberos error response from KDC: KRB Error: (6) "+code), "ops@EX.COM", "/etc/ops.keytab", "/etc/krb5.conf", kc)
		if !errors.Is(err, ErrKerberos) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing was connected") {
			t.Errorf("%s: %v, want %q", code, err, want)
		}
	}
}

// TestTicketCacheOfAnotherUserIsRefused: a file ticket cache that is not
// the user's own (another user can plant /tmp/krb5cc_UID) is never read.
func TestTicketCacheOfAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another uid (CI runs as root)")
	}
	p := filepath.Join(t.TempDir(), "krb5cc_planted")
	if err := os.WriteFile(p, make([]byte, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCCache(p); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("a cache of uid 65534: %v", err)
	}
}
