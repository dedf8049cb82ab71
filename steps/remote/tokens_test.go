package remote

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestExpandTokens: ssh_config's %-tokens and a leading ~, as ssh expands
// them in IdentityFile and CertificateFile; what ssh would refuse is an error.
func TestExpandTokens(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	tok := tokens{h: "10.0.0.11", n: "kafka-1", p: "22", r: "ops"}
	tests := []struct{ in, want, wantErr string }{
		{in: "/keys/id_%n", want: "/keys/id_kafka-1"},
		{in: "/keys/%r@%h:%p", want: "/keys/ops@10.0.0.11:22"},
		{in: "/keys/100%%", want: "/keys/100%"},
		{in: "%d/.ssh/id_%u", want: filepath.Join(home, ".ssh", "id_"+u.Username)},
		{in: "~/.ssh/id_%h", want: filepath.Join(home, ".ssh", "id_10.0.0.11")},
		{in: "~", want: filepath.Clean(home)},
		{in: "/keys//a/../id", want: "/keys/id"},
		{in: "/keys/id_%", wantErr: "lone %"},
		{in: "/keys/%C", wantErr: "token %C is not supported"},
		{in: "~ops/.ssh/id", wantErr: "not ~user"},
	}
	for _, tc := range tests {
		got, err := expandPath(tc.in, tok)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("expandPath(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("expandPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// ProxyCommand: tokens only, no ~ and no cleaning.
	if got, err := expandTokens("nc -X connect %h %p ~/x//y", tok); err != nil || got != "nc -X connect 10.0.0.11 22 ~/x//y" {
		t.Errorf("expandTokens = %q, %v", got, err)
	}
}
