package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/zookeeper"
)

// TestSecureLab runs kremedy on a cluster secured as production ones are
// (lab up --secure): SASL_SSL with SCRAM-SHA-512 and the lab CA's TLS
// (JKS and PKCS12 keystores), ZooKeeper SASL with zookeeper.set.acl=true,
// brokers running as a service user that owns their data, and an SSH login
// that is a normal user with sudo. It proves the lab really is secured,
// that every wrong credential stops a run before anything changes with a
// message saying what failed, and that the full ghost-topic cleanup works
// through sudo, checked with a real secured client.
func TestSecureLab(t *testing.T) {
	needSecureLab(t)
	t.Parallel()
	cfg := lab.DefaultConfig()
	cfg.Net, cfg.ZooKeepers, cfg.Secure = 17, 1, true
	// The brokers' service user must reach the lab through the test's
	// temporary directories.
	l := startSecureLab(t, cfg)
	c := connectLab(t, l)
	ctx := context.Background()

	t.Run("it really is secured", func(t *testing.T) {
		plain, err := kafka.New(l.State.Config.Bootstrap())
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		if _, err := req.RequestWith(rctx, plain.Kgo()); err == nil {
			t.Fatal("a PLAINTEXT client got metadata from the SASL_SSL listener")
		}
		anon, err := zookeeper.Dial(ctx, l.State.Config.ZKConnect(), zookeeper.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer anon.Close()
		acl, err := anon.GetACL(ctx, kafkazk.TopicsPath)
		if err != nil || !slices.ContainsFunc(acl, func(a kafkazk.ACL) bool { return a.Scheme == "sasl" && a.ID == "kafka" }) {
			t.Fatalf("%s ACL %+v (%v), want the brokers' SASL identity", kafkazk.TopicsPath, acl, err)
		}
		if err := anon.Delete(ctx, kafkazk.TopicsPath+"/never-exists", -1); err == nil || anon.IsNoNode(err) {
			t.Fatalf("an unauthenticated ZooKeeper session may delete under %s: %v", kafkazk.TopicsPath, err)
		}
		for n := 1; n <= cfg.Brokers; n++ {
			if u := procUser(t, l.BrokerPID(n)); u != lab.ServiceUser {
				t.Fatalf("broker %d runs as %s, want %s", n, u, lab.ServiceUser)
			}
		}
	})

	t.Run("diagnose and a PKCS12 client with config providers", func(t *testing.T) {
		if r := kremedy(t, "diagnose", "--inventory", l.InventoryPath()); r.code != 0 {
			t.Fatalf("diagnose on the healthy secured lab: exit %d\n%s", r.code, r.out)
		}
		p12 := variant(t, l, func(inv string) string {
			return strings.Replace(inv, l.ClientProperties(), l.ClientPropertiesPKCS12(), 1)
		})
		if r := kremedy(t, "diagnose", "--inventory", p12); r.code != 0 {
			t.Fatalf("diagnose with the PKCS12 client: exit %d\n%s", r.code, r.out)
		}
	})

	t.Run("OAUTHBEARER: unsecured tokens and the client credentials flow", func(t *testing.T) {
		oauthProps := func(lines string) string {
			f := filepath.Join(t.TempDir(), "oauth.properties")
			text := "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\nssl.truststore.location=" + filepath.Join(filepath.Dir(l.CAPEM()), "truststore.p12") +
				"\nssl.truststore.password=${file:" + filepath.Join(l.Dir, "secrets.properties") + ":store.password}\nconfig.providers=file\n" +
				"config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n" + lines
			if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return variant(t, l, func(inv string) string { return strings.Replace(inv, l.ClientProperties(), f, 1) })
		}
		unsecured := oauthProps(`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="kremedy";` + "\n")
		if r := kremedy(t, "diagnose", "--inventory", unsecured); r.code != 0 {
			t.Fatalf("diagnose with unsecured OAUTHBEARER tokens: exit %d\n%s", r.code, r.out)
		}
		// An OAuth server of our own: the client credentials grant, tokens
		// the brokers' (unsecured) validator accepts.
		var granted atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, secret, ok := r.BasicAuth(); !ok || id != "kremedy-app" || secret != "app-secret" {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			granted.Add(1)
			fmt.Fprintf(w, `{"access_token":%q,"expires_in":600,"token_type":"bearer"}`, kafka.UnsecuredToken("kremedy-app", time.Now(), 10*time.Minute))
		}))
		defer srv.Close()
		creds := func(secret string) string {
			return oauthProps("sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n" +
				"sasl.oauthbearer.token.endpoint.url=" + srv.URL + "/token\n" +
				`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="kremedy-app" clientSecret="` + secret + `" scope="kafka";` + "\n")
		}
		if r := kremedy(t, "diagnose", "--inventory", creds("app-secret")); r.code != 0 || granted.Load() == 0 {
			t.Fatalf("diagnose with the client credentials flow: exit %d, %d tokens granted\n%s", r.code, granted.Load(), r.out)
		}
		r := kremedy(t, "diagnose", "--inventory", creds("wrong"))
		if r.code != 2 || !strings.Contains(r.out, "refused client") || !strings.Contains(r.out, "nothing was done") {
			t.Fatalf("a client secret the OAuth server refuses: exit %d\n%s", r.code, r.out)
		}
	})

	t.Run("ZooKeeper over TLS", func(t *testing.T) {
		overTLS := func(tlsFile string) string {
			return variant(t, l, func(inv string) string {
				return strings.Replace(inv, `connect: "`+l.State.Config.ZKConnect()+`"`,
					`connect: "`+l.ZKSecureConnect()+`"`+"\n  tls_config_file: "+tlsFile, 1)
			})
		}
		if r := kremedy(t, "inventory", "check", "--inventory", overTLS(l.ZKTLSConfigFile())); r.code != 0 {
			t.Fatalf("inventory check over ZooKeeper TLS: exit %d\n%s", r.code, r.out)
		}
		other, err := lab.NewPKI(ctx, filepath.Join(t.TempDir(), "other-ca"), "other-store")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(l.ZKTLSConfigFile())
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(t.TempDir(), "zk-tls.properties")
		text := regexp.MustCompile(`truststore.location=.*`).ReplaceAllString(string(b), "truststore.location="+other.TrustJKS())
		text = regexp.MustCompile(`truststore.password=.*`).ReplaceAllString(text, "truststore.password=other-store")
		os.WriteFile(bad, []byte(text), 0o600)
		r := kremedy(t, "diagnose", "--inventory", overTLS(bad))
		if r.code != 2 || !strings.Contains(r.out, "certificate signed by unknown authority") || !strings.Contains(r.out, "nothing was done") {
			t.Fatalf("ZooKeeper TLS with another CA: exit %d\n%s", r.code, r.out)
		}
	})

	rep := breakIt(t, l, "ghost-topic", "orders")

	t.Run("wrong credentials stop the run before any change", func(t *testing.T) {
		other, err := lab.NewPKI(ctx, filepath.Join(t.TempDir(), "other-ca"), "other-store")
		if err != nil {
			t.Fatal(err)
		}
		props := func(edit func(string) string) string {
			b, err := os.ReadFile(l.ClientProperties())
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "client.properties")
			changed := edit(string(b))
			if changed == string(b) {
				t.Fatal("the client.properties variant changes nothing")
			}
			if err := os.WriteFile(f, []byte(changed), 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}
		withProps := func(f string) func(string) string {
			return func(inv string) string { return strings.Replace(inv, l.ClientProperties(), f, 1) }
		}
		pw := regexp.MustCompile(`password="[^"]*"`)
		badZK := filepath.Join(t.TempDir(), "zk.pw")
		os.WriteFile(badZK, []byte("not-the-password\n"), 0o600)
		p12, err := os.ReadFile(l.ClientPropertiesPKCS12())
		if err != nil {
			t.Fatal(err)
		}
		badKeystore := filepath.Join(t.TempDir(), "p12.properties")
		os.WriteFile(badKeystore, []byte(regexp.MustCompile(`ssl.keystore.password=.*`).ReplaceAllString(string(p12), "ssl.keystore.password=not-the-password")), 0o600)
		for _, tc := range []struct {
			name string
			inv  func(string) string
			code int
			want []string
		}{
			{"wrong SASL password", withProps(props(func(s string) string { return pw.ReplaceAllString(s, `password="wrong"`) })), 2,
				[]string{"SASL_AUTHENTICATION_FAILED", "sasl.jaas.config", "nothing was done"}},
			{"wrong truststore password", withProps(props(func(s string) string {
				return regexp.MustCompile(`ssl.truststore.password=.*`).ReplaceAllString(s, "ssl.truststore.password=wrong-password")
			})), 2, []string{"is ssl.truststore.password right?", "nothing was done"}},
			{"wrong keystore password", withProps(badKeystore), 2, []string{"is ssl.keystore.password right?", "nothing was done"}},
			{"untrusted certificate", withProps(props(func(s string) string {
				s = strings.Replace(s, filepath.Join(filepath.Dir(l.CAPEM()), "truststore.jks"), other.TrustJKS(), 1)
				return regexp.MustCompile(`ssl.truststore.password=.*`).ReplaceAllString(s, "ssl.truststore.password=other-store")
			})), 2, []string{"CA the truststore does not hold", "nothing was done"}},
			{"no sudo right", func(inv string) string {
				return strings.Replace(inv, "user: "+lab.OperatorUser, "user: "+lab.NoSudoUser, 1)
			}, 1, []string{"a password is required", "NOPASSWD", "nothing was changed"}},
			{"ZooKeeper digest password rejected", func(inv string) string {
				return strings.Replace(inv, l.ZKOperatorPasswordFile(), badZK, 1)
			}, 1, []string{"may not delete under", "superDigest", "Nothing was changed"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := ghostState(t, c, l)
				run := filepath.Join(t.TempDir(), "run")
				r := kremedy(t, "run", "topic-cleanup", "--inventory", variant(t, l, tc.inv), "--set", "topic=orders",
					"--run-dir", run, "--headless", "--yes", "--confirm", "orders")
				if r.code != tc.code {
					t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.out)
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

	// An inventory written from the live cluster, as a newcomer would.
	initInv := filepath.Join(t.TempDir(), "from-init.yaml")
	t.Run("inventory init and check", func(t *testing.T) {
		r := kremedy(t, "inventory", "init", "--zookeeper", l.State.Config.ZKConnect(),
			"--client-properties", l.ClientProperties(), "--ssh-user", lab.OperatorUser, "--ssh-port", strconv.Itoa(lab.SSHPort),
			"--identity-file", l.KeyPath(), "--known-hosts", l.KnownHostsPath(), "--ssh-config", "none", "--become", "sudo",
			"--zookeeper-user", lab.ZKOperator, "--zookeeper-password-file", l.ZKOperatorPasswordFile(), "--name", "from-init", "-o", initInv)
		if r.code != 0 {
			t.Fatalf("inventory init: exit %d\n%s", r.code, r.out)
		}
		b, err := os.ReadFile(initInv)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= cfg.Brokers; n++ {
			if !strings.Contains(string(b), "stop: "+l.StopScript(n)) || !strings.Contains(string(b), "- "+l.LogDirs(n)[0]) ||
				!strings.Contains(string(b), "REVIEW broker "+strconv.Itoa(n)) {
				t.Fatalf("broker %d: stop command, log dir or review note missing:\n%s", n, b)
			}
		}
		if r := kremedy(t, "inventory", "check", "--inventory", initInv); r.code != 0 || strings.Contains(r.out, "FAIL") {
			t.Fatalf("inventory check of init's inventory: exit %d\n%s", r.code, r.out)
		}
		nosudo := variant(t, l, func(inv string) string {
			return strings.Replace(inv, "user: "+lab.OperatorUser, "user: "+lab.NoSudoUser, 1)
		})
		r = kremedy(t, "inventory", "check", "--inventory", nosudo)
		if r.code != 1 || !strings.Contains(r.out, "FAIL  broker 1 ssh") || !strings.Contains(r.out, "a password is required") {
			t.Fatalf("inventory check without sudo rights: exit %d\n%s", r.code, r.out)
		}
		if r := kremedy(t, "inventory", "init", "--zookeeper", l.State.Config.ZKConnect(), "-o", initInv); r.code != 2 || !strings.Contains(r.out, "exists") {
			t.Fatalf("init over an existing file: exit %d\n%s", r.code, r.out)
		}
	})

	t.Run("ghost-topic repaired through sudo, with init's inventory", func(t *testing.T) {
		// The plan names the login every host command runs as, and sudo.
		p := kremedy(t, "plan", "topic-cleanup", "--inventory", initInv, "--set", "topic=orders")
		if !strings.Contains(p.out, "ssh broker 1 on "+lab.OperatorUser+"@") || !strings.Contains(p.out, " via sudo -n: "+l.StopScript(1)) {
			t.Fatalf("the plan does not name the login and sudo (exit %d):\n%s", p.code, p.out)
		}
		repairedThroughSudo(t, l, c, rep, initInv, "secured-lab")
	})
}

// repairedThroughSudo runs the ghost-topic cleanup of orders headless with
// inv on a secured lab and proves it with the lab's own secured clients:
// orders recreated, the bystander untouched, the old directories in the
// quarantine, the brokers back as the service user, diagnose clean.
func repairedThroughSudo(t *testing.T, l *lab.Lab, c *clients, rep *lab.Report, inv, what string) {
	t.Helper()
	run := filepath.Join(t.TempDir(), "run")
	r := kremedy(t, "run", "topic-cleanup", "--inventory", inv, "--set", "topic=orders", "--set", "recreate=true",
		"--run-dir", run, "--headless", "--yes", "--confirm", "orders")
	if r.code != 0 {
		t.Fatalf("cleanup on the %s with %s: exit %d\n%s", what, inv, r.code, r.out)
	}
	t.Logf("FIGURE %s headless topic-cleanup through sudo took %.1fs; outage window: %s", what, r.took.Seconds(), outageOf(t, run))
	c.assertRecreated(t, "orders", rep.OldID, rep.NewID)
	c.assertBystander(t, rep)
	assertQuarantined(t, l, run, "orders", 9)
	for n := 1; n <= l.State.Config.Brokers; n++ {
		if u := procUser(t, l.BrokerPID(n)); u != lab.ServiceUser {
			t.Fatalf("after the restart broker %d runs as %s, want %s", n, u, lab.ServiceUser)
		}
	}
	if r := kremedy(t, "diagnose", "--inventory", l.InventoryPath()); r.code != 0 {
		t.Fatalf("after the cleanup: exit %d\n%s", r.code, r.out)
	}
}

// startSecureLab starts a secured lab in a temporary directory its
// service user can reach (t.TempDir's directories are the test user's
// alone).
func startSecureLab(t *testing.T, cfg lab.Config) *lab.Lab {
	t.Helper()
	return startLabIn(t, filepath.Join(openTempDir(t), "lab"), cfg)
}

// openTempDir is a temporary directory the secured lab's service users can
// reach: it and its parents up to the temp dir opened to others.
func openTempDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// variant writes a copy of the lab's inventory changed by edit.
func variant(t *testing.T, l *lab.Lab, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(l.InventoryPath())
	if err != nil {
		t.Fatal(err)
	}
	changed := edit(string(b))
	if changed == string(b) {
		t.Fatal("the inventory variant changes nothing")
	}
	p := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(p, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ghostState is what a refused run must leave as it was: the topic's
// znode, its pending deletion, the brokers' processes and their disks.
func ghostState(t *testing.T, c *clients, l *lab.Lab) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, p := range []string{kafkazk.TopicPath("orders"), kafkazk.DeleteTopicPath("orders"), kafkazk.ConfigTopicPath("orders")} {
		ok, st, err := c.zk.Exists(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(p + "=" + strconv.FormatBool(ok) + "/" + strconv.Itoa(int(st.Version)) + "/" + strconv.Itoa(int(st.Cversion)) + "/" + strconv.FormatInt(st.Ctime.UnixNano(), 10) + " ")
	}
	for n := 1; n <= l.State.Config.Brokers; n++ {
		b.WriteString("pid" + strconv.Itoa(n) + "=" + strconv.Itoa(l.BrokerPID(n)) + " ")
		for _, d := range l.LogDirs(n) {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "orders-") {
					b.WriteString(e.Name() + " ")
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(d), "kremedy-quarantine")); err == nil {
				b.WriteString("QUARANTINE ")
			}
		}
	}
	return b.String()
}

// procUser is the user a process runs as.
func procUser(t *testing.T, pid int) string {
	t.Helper()
	if pid <= 0 {
		t.Fatal("no such process")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			u, err := user.LookupId(f[1])
			if err != nil {
				return f[1]
			}
			return u.Username
		}
	}
	return ""
}
