package remote

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolveWithSSH resolves aliases through the real OpenSSH client
// (`ssh -G`) with a config file: what `ssh alias` would do.
func TestResolveWithSSH(t *testing.T) {
	needSSHD(t)
	dir := t.TempDir()
	id1, id2, kh := filepath.Join(dir, "id_kafka"), filepath.Join(dir, "id kafka 2"), filepath.Join(dir, "kh")
	for _, f := range []string{id1, id2, kh} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	me := currentUser(t)
	cfg := writeConfig(t, `
Host bastion
  HostName bastion.example.com
  User jump
  Port 2200

Host inner
  HostName 10.9.9.9
  ProxyJump bastion

Host kafka-*
  User kafkaop
  ProxyJump bastion
  IdentityFile `+id1+`
  IdentityFile "`+id2+`"
  IdentityFile `+dir+`/missing_%h
  UserKnownHostsFile `+kh+` /nonexistent/kh
  ConnectTimeout 7

Host kafka-1
  HostName 10.0.0.11

Host deep
  HostName deep.example.com
  ProxyJump me2@inner:2022,bastion

Host legacy
  ProxyCommand nc %h %p
  HostKeyAlias legacy-key

Match user matched exec "true"
  Port 2022

Match user unmatched exec "false"
  Port 2023

Host *
  GlobalKnownHostsFile /nonexistent/global
  UserKnownHostsFile `+kh+`

Host loop
  ProxyJump loop

Host nojump
  ProxyJump none
`)
	tests := []struct {
		name    string
		in      Target
		want    Target
		wantErr string
	}{
		{
			name: "alias with HostName, keys, known_hosts, jump",
			in:   Target{Host: "kafka-1"},
			want: Target{Host: "10.0.0.11", User: "kafkaop", Port: 22, IdentityFiles: []string{id1, id2},
				KnownHostsFiles: []string{kh}, ConnectTimeout: 7 * time.Second, ProxyJump: "jump@bastion.example.com:2200"},
		},
		{
			name: "no HostName: the alias is the host; explicit fields win",
			in:   Target{Host: "kafka-2", User: "root", Port: 2222, ProxyJump: "x@y:1", KnownHostsFiles: []string{"/k"}},
			want: Target{Host: "kafka-2", User: "root", Port: 2222, IdentityFiles: []string{id1, id2},
				KnownHostsFiles: []string{"/k"}, ConnectTimeout: 7 * time.Second, ProxyJump: "x@y:1"},
		},
		{
			name: "nested jumps, local user default",
			in:   Target{Host: "deep", KnownHostsFiles: []string{kh}},
			want: Target{Host: "deep.example.com", User: me, Port: 22, KnownHostsFiles: []string{kh},
				ProxyJump: "jump@bastion.example.com:2200,me2@10.9.9.9:2022,jump@bastion.example.com:2200"},
		},
		{
			name: "unknown alias passes through",
			in:   Target{Host: "10.1.1.1", KnownHostsFiles: []string{kh}},
			want: Target{Host: "10.1.1.1", User: me, Port: 22, KnownHostsFiles: []string{kh}},
		},
		{name: "ProxyJump none", in: Target{Host: "nojump", KnownHostsFiles: []string{kh}},
			want: Target{Host: "nojump", User: me, Port: 22, KnownHostsFiles: []string{kh}}},
		{name: "ProxyCommand, tokens expanded, HostKeyAlias", in: Target{Host: "legacy"},
			want: Target{Host: "legacy", User: me, Port: 22, KnownHostsFiles: []string{kh}, ProxyCommand: "nc legacy 22", HostKeyAlias: "legacy-key"}},
		{name: "Match user and exec, as ssh evaluates them", in: Target{Host: "10.2.2.2", User: "matched"},
			want: Target{Host: "10.2.2.2", User: "matched", Port: 2022, KnownHostsFiles: []string{kh}}},
		{name: "a Match that does not match does not break the host", in: Target{Host: "10.2.2.2", User: "unmatched"},
			want: Target{Host: "10.2.2.2", User: "unmatched", Port: 22, KnownHostsFiles: []string{kh}}},
		{name: "jump loop (ssh itself finds it)", in: Target{Host: "loop"}, wantErr: "jumphost loop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveWithSSH(context.Background(), tc.in, cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Host != tc.want.Host || got.User != tc.want.User || got.Port != tc.want.Port ||
				got.ConnectTimeout != tc.want.ConnectTimeout || got.ProxyJump != tc.want.ProxyJump ||
				got.ProxyCommand != tc.want.ProxyCommand || got.HostKeyAlias != tc.want.HostKeyAlias ||
				!slices.Equal(got.IdentityFiles, tc.want.IdentityFiles) || !slices.Equal(got.KnownHostsFiles, tc.want.KnownHostsFiles) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	t.Run("a config ssh refuses is an error naming it", func(t *testing.T) {
		_, err := ResolveWithSSH(context.Background(), Target{Host: "a"}, writeConfig(t, "Hots a\n"))
		if err == nil || !strings.Contains(err.Error(), "ssh_config") {
			t.Errorf("want an error, got %v", err)
		}
	})
}

func TestResolveWithSSHDial(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	kh := s.goodKnownHosts(t)
	cfg := writeConfig(t, `
Host jumpbox
  HostName 127.0.0.1
  Port `+strconv.Itoa(s.port)+`

Host broker-*
  HostName 127.0.0.1
  Port `+strconv.Itoa(s.port)+`
  User `+currentUser(t)+`
  IdentityFile `+s.keys.user+`
  UserKnownHostsFile `+kh+`
  ProxyJump jumpbox
`)
	tg, err := ResolveWithSSH(context.Background(), Target{Host: "broker-1"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, tg)
	col := &collector{}
	if _, err := c.Run(context.Background(), "echo via-config", col.add); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(col.out, []string{"via-config"}) {
		t.Fatalf("stdout %q", col.out)
	}
}
