package migrate_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/kremedy/kremedy/steps"
	"github.com/kremedy/kremedy/steps/kafkazk"
	"github.com/kremedy/kremedy/steps/signoff"
)

// Secrets in the nodes' config files and in the controller settings, each
// in a place a migration edit touches: kept (whole-file content), removed
// (zookeeper.* at brokers-to-kraft and finalize), added (the login at the
// controllers), restored (the revert).
const (
	brokerSecrets = `ssl.keystore.password=KS-secret-1111
ssl.key.password=KEY-secret-2222
ssl.keystore.key=-----BEGIN PRIVATE KEY----- PEM-secret-3333 -----END PRIVATE KEY-----
password.encoder.secret=ENC-secret-4444
zookeeper.ssl.keystore.password=ZK-secret-5555
listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="JAAS-secret-6666";
`
	controllerSecrets = `zookeeper.ssl.truststore.password=ZKC-secret-7777
ssl.keystore.password=CKS-secret-8888
`
	settingsSecret = `listener.name.controller.ssl.truststore.password=SET-secret-9999
`
)

var knownSecrets = []string{"KS-secret-1111", "KEY-secret-2222", "PEM-secret-3333", "ENC-secret-4444", "ZK-secret-5555",
	"JAAS-secret-6666", "ZKC-secret-7777", "CKS-secret-8888", "SET-secret-9999"}

// secretForms are the ways s shows in text: itself, and base64 of it at
// each of the three offsets it can start at inside a longer text (the
// characters that hold s's bytes only).
func secretForms(s string) []string {
	out := []string{s}
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), s...))
		from, to := (8*k+5)/6, 8*(k+len(s))/6
		out = append(out, enc[from:to])
	}
	return out
}

// leak names the first known secret in b, in any form, "" for none.
func leak(b []byte) string {
	for _, s := range knownSecrets {
		for _, f := range secretForms(s) {
			if bytes.Contains(b, []byte(f)) {
				return s + " (as " + f + ")"
			}
		}
	}
	return ""
}

// seeing approves every plan, keeping each as JSON and as the approval
// request a second approver would read; it stops before step stop.
type seeing struct {
	stop  string
	plans [][]byte
}

func (a *seeing) Approve(_ context.Context, info steps.Info, p *steps.Plan) (steps.Approval, error) {
	for _, v := range []any{p, signoff.Request{Run: "m1", Step: info.ID, Digest: p.Digest(), Plan: p}} {
		b, err := json.Marshal(v)
		if err != nil {
			return steps.Approval{}, err
		}
		a.plans = append(a.plans, b)
	}
	if info.ID == a.stop {
		return steps.Approval{Decision: steps.Abort, By: "test", Digest: p.Digest()}, nil
	}
	return steps.Approval{Decision: steps.Approve, Typed: "test", By: "test", Digest: p.Digest()}, nil
}

// events keeps every event as `--output jsonl` prints it.
type events struct{ lines [][]byte }

func (e *events) Report(ev steps.Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	e.lines = append(e.lines, b)
}

// TestNoSecretLeavesTheHost: a migration into dual-write, its revert
// (the backups restored) and the migration to finalize, on nodes whose
// config files and controller settings hold known secrets. No plan, no
// approval request, no event, no journal record and no command line sent
// to a host holds any of them, in clear or in base64; they reach the hosts
// only on the commands' standard input, and the files end up right.
func TestNoSecretLeavesTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		for _, h := range c.Ports.Target.Hosts {
			appendFile(t, h.Config, brokerSecrets)
		}
		for _, k := range c.Ports.Target.Controllers {
			appendFile(t, k.Config, controllerSecrets)
		}
		settings := filepath.Join(c.dir, "controller-settings.properties")
		write(t, settings, settingsSecret)
		original := map[string]string{}
		for _, h := range c.Ports.Target.Hosts {
			b, _ := os.ReadFile(h.Config)
			original[h.Config] = string(b)
		}

		seen, ev := &seeing{}, &events{}
		var dirs []string
		run := func(runbook, stop string, set ...string) {
			t.Helper()
			s := c.session(t, runbook, set...)
			dirs = append(dirs, s.Dir())
			// Kafka elects a ZooKeeper broker once the revert deleted the
			// KRaft controller's /controller.
			s.AfterRecord(func(typ, step string) {
				if step == "reset-znodes" && typ == "action-end" {
					if ok, _, _ := c.ZK.Exists(context.Background(), kafkazk.ControllerPath); !ok {
						c.ZK.Put(kafkazk.ControllerPath, `{"version":2,"brokerid":3,"timestamp":"1"}`)
					}
				}
			})
			seen.stop = stop
			out := s.Run(context.Background(), c.Ports, seen, ev)
			if out.Err != nil && !(stop != "" && errors.Is(out.Err, steps.ErrAborted)) {
				t.Fatalf("%s: %v (%+v)", runbook, out.Err, out)
			}
		}
		run("zk-to-kraft", "finalize", "controller_settings", settings)
		for _, h := range c.Ports.Target.Hosts {
			if b, _ := os.ReadFile(h.Config); !strings.Contains(string(b), "SET-secret-9999") || strings.Contains(string(b), "ZK-secret-5555") || !strings.Contains(string(b), "KS-secret-1111") {
				t.Fatalf("broker %d in dual-write: the edit did not write what it should:\n%s", h.ID, b)
			}
		}
		run("zk-to-kraft-revert", "")
		for path, want := range original {
			if b, _ := os.ReadFile(path); string(b) != want {
				t.Fatalf("%s after the revert is not the original:\n%s", path, b)
			}
		}
		run("zk-to-kraft", "", "controller_settings", settings)
		for _, k := range c.Ports.Target.Controllers {
			if b, _ := os.ReadFile(k.Config); strings.Contains(string(b), "ZKC-secret-7777") || !strings.Contains(string(b), "CKS-secret-8888") {
				t.Fatalf("controller %d after finalize:\n%s", k.ID, b)
			}
		}

		edits := 0
		for _, p := range seen.plans {
			if w := leak(p); w != "" {
				t.Errorf("a plan or approval request holds %s:\n%s", w, p)
			}
			edits += bytes.Count(p, []byte(`"to_sha256"`))
		}
		if edits < 2*(3+3+3+3) {
			t.Fatalf("%d config edits in the plans and requests, want every roll's (into migration, to KRaft, back twice, finalize)", edits/2)
		}
		for _, l := range ev.lines {
			if w := leak(l); w != "" {
				t.Errorf("an event holds %s: %s", w, l)
			}
		}
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "journal.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if w := leak(b); w != "" {
				t.Errorf("%s/journal.jsonl holds %s", d, w)
			}
		}
		for _, cmd := range c.Hosts.Commands {
			if w := leak([]byte(cmd)); w != "" {
				t.Errorf("a command line holds %s: %.300s", w, cmd)
			}
		}
		// The content went on the commands' standard input, every secret of
		// it, to the edit script only.
		var in []byte
		for _, i := range c.Hosts.Inputs {
			if !strings.Contains(c.Hosts.Commands[i.Command], ".kremedy-new") {
				t.Errorf("an input went to a command that is no config edit: %.200s", c.Hosts.Commands[i.Command])
			}
			in = append(in, i.Data...)
		}
		for _, s := range knownSecrets {
			if s == "ZKC-secret-7777" {
				continue // finalize removes it: no edit writes it
			}
			if !bytes.Contains(in, []byte(s)) {
				t.Errorf("%s never reached a host: the edits' inputs lack it", s)
			}
		}
	})
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(b)+text)
}
