package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	rsakey "crypto/rsa"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Unit tests that need no sshd; they also run under -short.

// testKeyLines returns ed25519 and rsa public keys, and the same in
// authorized_keys format without the trailing newline. Generated once.
func testKeyLines(t *testing.T) (ed, rsa ssh.PublicKey, edLine, rsaLine string) {
	t.Helper()
	k, err := unitKeys()
	if err != nil {
		t.Fatal(err)
	}
	line := func(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }
	return k[0], k[1], line(k[0]), line(k[1])
}

var unitKeys = sync.OnceValues(func() ([2]ssh.PublicKey, error) {
	var k [2]ssh.PublicKey
	edRaw, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return k, err
	}
	rsaRaw, err := rsakey.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return k, err
	}
	if k[0], err = ssh.NewPublicKey(edRaw); err != nil {
		return k, err
	}
	k[1], err = ssh.NewPublicKey(&rsaRaw.PublicKey)
	return k, err
})

func TestHostKeyAlgorithms(t *testing.T) {
	_, _, edPub, rsaPub := testKeyLines(t)
	edLine := func(hosts string) string { return hosts + " " + edPub }
	tests := []struct {
		name  string
		lines []string
		addr  string
		want  []string
	}{
		{"ed25519 only", []string{edLine("[h]:2222")}, "h:2222", []string{"ssh-ed25519"}},
		{"rsa only", []string{"[h]:2222 " + rsaPub}, "h:2222", []string{"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"}},
		{"both, ed25519 preferred", []string{"[h]:2222 " + rsaPub, edLine("[h]:2222")}, "h:2222",
			[]string{"ssh-ed25519", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"}},
		// Port 22 is recorded without brackets or port; probing with
		// knownhosts.Normalize(addr) ("h") would fail to parse.
		{"port 22 bare host", []string{edLine("h")}, "h:22", []string{"ssh-ed25519"}},
		{"wildcard", []string{edLine("*.example.com")}, "kafka-1.example.com:22", []string{"ssh-ed25519"}},
		{"unknown host", []string{edLine("other")}, "h:22", unknownHostAlgos},
		{"cert authority first", []string{"@cert-authority *.example.com " + edPub, "k.example.com " + rsaPub}, "k.example.com:22",
			append(slices.Clone(certAlgos), "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hk, err := loadKnownHosts([]string{knownHosts(t, tc.lines...)})
			if err != nil {
				t.Fatal(err)
			}
			if got := hk.algorithms(tc.addr); !slices.Equal(got, tc.want) {
				t.Errorf("algorithms(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestVerifyErrors(t *testing.T) {
	ed, rsa, _, rsaPub := testKeyLines(t)
	kh := knownHosts(t, "# c", "[h]:2222 "+rsaPub)
	hk, err := loadKnownHosts([]string{kh})
	if err != nil {
		t.Fatal(err)
	}
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	if err := hk.verify("h:2222", tcp, rsa); err != nil {
		t.Errorf("recorded key rejected: %v", err)
	}
	err = hk.verify("h:2222", tcp, ed)
	m, ok := err.(*HostKeyMismatchError)
	if !ok || m.Line != 2 || m.File != kh || m.KeyType != "ssh-ed25519" || m.Fingerprint != Fingerprint(ed) || m.KnownFingerprint != Fingerprint(rsa) {
		t.Errorf("mismatch: %#v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "ssh-keygen -R '[h]:2222' -f "+kh) {
		t.Errorf("mismatch message: %s", msg)
	}
	err = hk.verify("other:22", tcp, ed)
	u, ok := err.(*UnknownHostKeyError)
	if !ok || u.Addr != "other:22" || u.Fingerprint != Fingerprint(ed) {
		t.Errorf("unknown: %#v", err)
	}
	if !strings.HasPrefix(Fingerprint(ed), "SHA256:") || strings.HasSuffix(Fingerprint(ed), "=") {
		t.Errorf("Fingerprint format %q", Fingerprint(ed))
	}
}

func TestParseProxyJump(t *testing.T) {
	tests := []struct {
		in      string
		want    []hop
		wantErr bool
	}{
		{"", nil, false},
		{"none", nil, false},
		{"bastion", []hop{{user: "me", addr: "bastion:22"}}, false},
		{"jump@bastion:2200", []hop{{user: "jump", addr: "bastion:2200"}}, false},
		{"a@h1:1, h2 ,ssh://b@[::1]:3", []hop{{user: "a", addr: "h1:1"}, {user: "me", addr: "h2:22"}, {user: "b", addr: "[::1]:3"}}, false},
		{"h:0", nil, true},
		{"h:x", nil, true},
		{"@h", nil, true},
		{"h1,,h2", nil, true},
		{"h/x", nil, true},
	}
	for _, tc := range tests {
		got, err := parseProxyJump(tc.in, "me")
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseProxyJump(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestStreamString(t *testing.T) {
	for s, want := range map[Stream]string{Stdout: "stdout", Stderr: "stderr", Stream(9): "Stream(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %s", int(s), s.String())
		}
	}
}

func TestSplitLines(t *testing.T) {
	big := strings.Repeat("x", maxLine+10)
	tests := []struct {
		in   string
		want []string
	}{
		{"a\nb\r\n\nc", []string{"a", "b", "", "c"}},
		{"", nil},
		{big + "\n", []string{big[:maxLine], big[maxLine:]}},
	}
	for i, tc := range tests {
		var got []string
		var data = []byte(tc.in)
		for len(data) > 0 {
			n, tok, err := splitLines(data, true)
			if err != nil || n == 0 {
				t.Fatalf("case %d: split returned %d, %v", i, n, err)
			}
			got = append(got, string(tok))
			data = data[n:]
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("case %d: got %d lines, want %d", i, len(got), len(tc.want))
		}
	}
}
