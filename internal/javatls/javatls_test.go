package javatls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/kremedy/kremedy/internal/javatls"
	"github.com/kremedy/kremedy/lab"
	"github.com/kremedy/kremedy/steps/kafka"
)

// tlsServer serves TLS on loopback with a certificate from store
// (PKCS12), requiring a client certificate signed by the CA in caPEM, and
// returns its address.
func tlsServer(t *testing.T, store, pass, caPEM string) string {
	t.Helper()
	b, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	key, leaf, cas, err := pkcs12.DecodeChain(b, pass)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{PrivateKey: key}
	for _, c := range append([]*x509.Certificate{leaf}, cas...) {
		if c.Subject.CommonName != "kremedy lab CA" {
			cert.Certificate = append([][]byte{c.Raw}, cert.Certificate...)
		}
	}
	ca, _ := os.ReadFile(caPEM)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte("ok"))
			}()
		}
	}()
	return ln.Addr().String()
}

func handshake(props map[string]string, addr string) error {
	cfg, err := javatls.Config(props)
	if err != nil {
		return err
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err != nil {
		return err // a client certificate the server refused shows here
	}
	return nil
}

// TestStores reads trust and key stores made by the JDK's keytool (and a
// PEM key encrypted by openssl) and proves each by a TLS handshake with a
// server that requires a client certificate.
func TestStores(t *testing.T) {
	if testing.Short() {
		t.Skip("runs keytool and openssl; the full test run (make test) runs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pki, err := lab.NewPKI(ctx, filepath.Join(dir, "pki"), "trustpw")
	if err != nil {
		t.Fatal(err)
	}
	other, err := lab.NewPKI(ctx, filepath.Join(dir, "other"), "otherpw")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(p *lab.PKI, c lab.Cert) string {
		path, err := p.Issue(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	loop := []string{"ip:127.0.0.1"}
	server := tlsServer(t, issue(pki, lab.Cert{Name: "server", SANs: loop, Type: "PKCS12"}), "trustpw", pki.CAPEM())
	nameless := tlsServer(t, issue(pki, lab.Cert{Name: "nameless", SANs: []string{"dns:elsewhere.example"}, Type: "PKCS12"}), "trustpw", pki.CAPEM())
	expired := tlsServer(t, issue(pki, lab.Cert{Name: "expired", SANs: loop, Type: "PKCS12", StartDate: "-3d", Days: 1}), "trustpw", pki.CAPEM())
	stranger := tlsServer(t, issue(other, lab.Cert{Name: "stranger", SANs: loop, Type: "PKCS12"}), "otherpw", pki.CAPEM())
	clientJKS := issue(pki, lab.Cert{Name: "client", Type: "JKS", StorePass: "storepw", KeyPass: "keypass1"})
	clientP12 := issue(pki, lab.Cert{Name: "client12", Type: "PKCS12", StorePass: "storepw"})
	// An encrypted PKCS#8 PEM key and its chain, as openssl writes them.
	pemKey := filepath.Join(dir, "client.pem")
	plain, err := exec.Command("openssl", "pkcs12", "-in", clientP12, "-passin", "pass:storepw", "-nodes").Output()
	if err != nil {
		t.Fatalf("openssl pkcs12: %v", err)
	}
	cmd := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:pempw")
	cmd.Stdin = strings.NewReader(string(plain))
	enc, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl pkcs8: %v", err)
	}
	var certs strings.Builder
	for _, block := range strings.SplitAfter(string(plain), "-----END CERTIFICATE-----") {
		if i := strings.Index(block, "-----BEGIN CERTIFICATE-----"); i >= 0 {
			certs.WriteString(block[i:] + "\n")
		}
	}
	os.WriteFile(pemKey, append(enc, certs.String()...), 0o600)

	jks := map[string]string{"security.protocol": "SSL", "ssl.truststore.location": pki.TrustJKS(), "ssl.truststore.password": "trustpw",
		"ssl.keystore.location": clientJKS, "ssl.keystore.password": "storepw", "ssl.key.password": "keypass1"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "-" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		props map[string]string
		addr  string
		want  string // "" = handshake succeeds; else a part of the error
	}{
		{"JKS stores, another key password", jks, server, ""},
		{"JKS truststore typed JKS", with(jks, "ssl.truststore.type", "JKS", "ssl.keystore.type", "JKS"), server, ""},
		{"PKCS12 stores", with(jks, "ssl.truststore.location", pki.TrustP12(), "ssl.keystore.location", clientP12, "ssl.key.password", "-"), server, ""},
		{"PKCS12 typed JKS (Java's keystore.type.compat)", with(jks, "ssl.truststore.location", pki.TrustP12(), "ssl.truststore.type", "JKS", "ssl.keystore.location", clientP12, "ssl.key.password", "-"), server, ""},
		{"PEM trust, encrypted PEM key", map[string]string{"ssl.truststore.location": pki.CAPEM(), "ssl.truststore.type": "PEM",
			"ssl.keystore.location": pemKey, "ssl.keystore.type": "PEM", "ssl.key.password": "pempw"}, server, ""},
		{"encrypted PEM key, wrong password", map[string]string{"ssl.truststore.location": pki.CAPEM(),
			"ssl.keystore.location": pemKey, "ssl.key.password": "nope"}, server, "is ssl.key.password right?"},
		{"encrypted PEM key, no password", map[string]string{"ssl.truststore.location": pki.CAPEM(),
			"ssl.keystore.location": pemKey}, server, "ssl.key.password is unset"},
		{"no client certificate", with(jks, "ssl.keystore.location", "-"), server, "certificate required"},
		{"wrong truststore password", with(jks, "ssl.truststore.password", "nope"), server, "is ssl.truststore.password right?"},
		{"wrong PKCS12 truststore password", with(jks, "ssl.truststore.location", pki.TrustP12(), "ssl.truststore.password", "nope"), server, "is ssl.truststore.password right?"},
		{"wrong keystore password", with(jks, "ssl.keystore.password", "nope"), server, "is ssl.keystore.password right?"},
		{"wrong key password", with(jks, "ssl.key.password", "nope"), server, "is ssl.key.password right?"},
		{"JKS truststore without password", with(jks, "ssl.truststore.password", "-"), server, "ssl.truststore.password is unset"},
		{"keystore without password", with(jks, "ssl.keystore.password", "-"), server, "ssl.keystore.password is unset"},
		{"PEM declared, JKS found", with(jks, "ssl.truststore.type", "PEM"), server, "ssl.truststore.type=JKS"},
		{"untrusted server", jks, stranger, "unknown authority"},
		{"expired server certificate", jks, expired, "expired"},
		{"server name not in its certificate", jks, nameless, "127.0.0.1"},
		{"hostname check off, chain still checked", with(jks, "ssl.endpoint.identification.algorithm", ""), nameless, ""},
		{"hostname check off, untrusted still refused", with(jks, "ssl.endpoint.identification.algorithm", ""), stranger, "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handshake(tc.props, tc.addr)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want a handshake: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
	_, secrets, err := kafka.Options(jks)
	if err != nil || strings.Join(secrets, ",") != "trustpw,storepw,keypass1" {
		t.Fatalf("secrets %q %v", secrets, err)
	}
	if _, _, err := kafka.Options(with(jks, "ssl.truststore.password", "-")); !errors.Is(err, javatls.ErrUnsupported) {
		t.Fatalf("%v", err)
	}
}
