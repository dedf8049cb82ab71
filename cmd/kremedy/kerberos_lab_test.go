package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kremedy/kremedy/lab"
)

// TestKerberosLab runs kremedy on a Kerberized cluster (lab up --secure
// --kerberos: a local MIT KDC, brokers on SASL_SSL with GSSAPI between
// themselves, kremedy with the operator's keytab, SSH through sudo):
// inventory check and diagnose, a ticket cache from kinit instead of the
// keytab, every wrong keytab or principal stopping a cleanup before any
// change and saying which, and a headless ghost-topic cleanup through sudo
// checked with a Kerberos client.
func TestKerberosLab(t *testing.T) {
	needSecureLab(t)
	if _, err := exec.LookPath("kinit"); err != nil {
		t.Fatal("kinit is missing: install krb5-user (make deps)")
	}
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.Secure, cfg.Kerberos = 27, 1, true, true
	l := startSecureLab(t, cfg)
	c := connectLab(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	props, err := os.ReadFile(l.ClientProperties())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(props), "sasl.mechanism=GSSAPI") || !strings.Contains(string(props), l.OperatorKeytab()) {
		t.Fatalf("the Kerberized lab's client.properties is not a keytab's GSSAPI login:\n%s", props)
	}
	b, err := os.ReadFile(filepath.Join(l.BrokerDir(1), "server.properties"))
	if err != nil || !strings.Contains(string(b), "sasl.mechanism.inter.broker.protocol=GSSAPI") {
		t.Fatalf("broker 1 does not speak Kerberos to the others: %v\n%s", err, b)
	}
	// withProps is the lab's inventory with another client.properties.
	withProps := func(text string) string {
		f := filepath.Join(t.TempDir(), "client.properties")
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return variant(t, l, func(inv string) string { return strings.Replace(inv, l.ClientProperties(), f, 1) })
	}
	jaasLine := regexp.MustCompile(`(?m)^sasl\.jaas\.config=.*$`)
	jaas := func(options string) string {
		return withProps(jaasLine.ReplaceAllString(string(props), `sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required `+options+`;`))
	}

	t.Run("inventory check and diagnose with the operator's keytab", func(t *testing.T) {
		if r := kremedy(t, "inventory", "check", "--inventory", l.InventoryPath()); r.code != 0 || strings.Contains(r.out, "FAIL") {
			t.Fatalf("inventory check on the Kerberized lab: exit %d\n%s", r.code, r.out)
		}
		if r := kremedy(t, "diagnose", "--inventory", l.InventoryPath()); r.code != 0 {
			t.Fatalf("diagnose on the Kerberized lab: exit %d\n%s", r.code, r.out)
		}
		log, err := os.ReadFile(filepath.Join(filepath.Dir(l.Krb5Conf()), "kdc.log"))
		if err != nil || !strings.Contains(string(log), lab.KerberosUser+"@"+lab.Realm+" for kafka/"+cfg.BrokerHost(1)+"@"+lab.Realm) {
			t.Fatalf("the KDC issued kremedy no service ticket for broker 1 (%v)", err)
		}
	})

	t.Run("a ticket cache from kinit", func(t *testing.T) {
		cache := filepath.Join(t.TempDir(), "krb5cc")
		kinit := exec.Command("kinit", "-kt", l.OperatorKeytab(), "-c", cache, lab.KerberosUser+"@"+lab.Realm)
		kinit.Env = append(os.Environ(), "KRB5_CONFIG="+l.Krb5Conf())
		if out, err := kinit.CombinedOutput(); err != nil {
			t.Fatalf("kinit: %v\n%s", err, out)
		}
		inv := jaas(`useTicketCache=true ticketCache="` + cache + `"`)
		if r := kremedy(t, "diagnose", "--inventory", inv); r.code != 0 {
			t.Fatalf("diagnose with kinit's ticket cache: exit %d\n%s", r.code, r.out)
		}
		r := kremedy(t, "diagnose", "--inventory", jaas(`useTicketCache=true ticketCache="`+cache+`.none"`))
		if r.code != 2 || !strings.Contains(r.out, "Run kinit first") {
			t.Fatalf("diagnose with no ticket cache: exit %d\n%s", r.code, r.out)
		}
	})

	rep := breakIt(t, l, "ghost-topic", "orders")

	t.Run("a wrong keytab or principal stops the cleanup before any change, saying which", func(t *testing.T) {
		keytab := func(name string) string { return filepath.Join(t.TempDir(), name+".keytab") }
		// stale: its keytab, then a new key at the KDC (cpw); gone: its
		// keytab, then the principal deleted.
		stale, gone := keytab("stale"), keytab("gone")
		for _, q := range []string{"addprinc -randkey stale@" + lab.Realm, "ktadd -k " + stale + " stale@" + lab.Realm, "cpw -randkey stale@" + lab.Realm,
			"addprinc -randkey gone@" + lab.Realm, "ktadd -k " + gone + " gone@" + lab.Realm, "delprinc -force gone@" + lab.Realm} {
			if out, err := l.Kadmin(ctx, q); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		}
		op := lab.KerberosUser + "@" + lab.Realm
		for _, tc := range []struct {
			name string
			inv  string
			want []string
		}{
			{"no such keytab", jaas(`useKeyTab=true storeKey=true keyTab="/nonexistent/kremedy.keytab" principal="` + op + `"`),
				[]string{"keyTab /nonexistent/kremedy.keytab", "no such file"}},
			{"another principal's keytab", jaas(`useKeyTab=true storeKey=true keyTab="` + stale + `" principal="` + op + `"`),
				[]string{"holds no key for principal " + op, "stale@" + lab.Realm}},
			{"a stale keytab (the key changed at the KDC)", jaas(`useKeyTab=true storeKey=true keyTab="` + stale + `" principal="stale@` + lab.Realm + `"`),
				[]string{"the KDC refused the key of stale@" + lab.Realm, "stale keytab"}},
			{"a principal the KDC does not know", jaas(`useKeyTab=true storeKey=true keyTab="` + gone + `" principal="gone@` + lab.Realm + `"`),
				[]string{"does not know principal gone@" + lab.Realm}},
			{"an unknown realm", jaas(`useKeyTab=true storeKey=true keyTab="` + l.OperatorKeytab() + `" principal="kremedy@ELSEWHERE.EXAMPLE"`),
				[]string{"realm ELSEWHERE.EXAMPLE is unknown", l.Krb5Conf()}},
			{"a service name no broker has", withProps(strings.Replace(string(props), "sasl.kerberos.service.name=kafka", "sasl.kerberos.service.name=kafka-typo", 1)),
				[]string{"KDC_ERR_S_PRINCIPAL_UNKNOWN", "sasl.kerberos.service.name"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := ghostState(t, c, l)
				run := filepath.Join(t.TempDir(), "run")
				r := kremedy(t, "run", "topic-cleanup", "--inventory", tc.inv, "--set", "topic=orders", "--run-dir", run, "--headless", "--yes", "--confirm", "orders")
				if r.code != 2 || !strings.Contains(r.out, "nothing was") {
					t.Fatalf("exit %d, want 2 with nothing done\n%s", r.code, r.out)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.out, w) {
						t.Fatalf("output lacks %q:\n%s", w, r.out)
					}
				}
				if after := ghostState(t, c, l); after != before {
					t.Fatalf("something changed:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})

	t.Run("ghost-topic repaired through sudo, as the operator's Kerberos principal", func(t *testing.T) {
		repairedThroughSudo(t, l, c, rep, l.InventoryPath(), "Kerberized lab")
	})
}
