package lab

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PKI is a lab certificate authority made with the JDK's keytool, the way
// operators make Kafka's stores: a CA key pair in a PKCS12 store, its
// certificate as PEM, trust stores in JKS and PKCS12, and key stores
// signed by the CA. Every store in it uses Pass unless Issue says
// otherwise.
type PKI struct {
	Dir     string
	Pass    string
	keytool string
}

// FindKeytool locates keytool beside the java that FindJava finds.
func FindKeytool() (string, error) {
	java, err := FindJava()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(java), "keytool")
	if _, err := os.Stat(p); err != nil {
		if lp, err2 := exec.LookPath("keytool"); err2 == nil {
			return lp, nil
		}
		return "", fmt.Errorf("%w: keytool is not beside %s nor on PATH (Debian: apt-get install openjdk-17-jre-headless)", ErrMissingPart, java)
	}
	return p, nil
}

// CAPEM, TrustJKS and TrustP12 are the PKI's public files.
func (p *PKI) CAPEM() string    { return filepath.Join(p.Dir, "ca.pem") }
func (p *PKI) TrustJKS() string { return filepath.Join(p.Dir, "truststore.jks") }
func (p *PKI) TrustP12() string { return filepath.Join(p.Dir, "truststore.p12") }
func (p *PKI) caStore() string  { return filepath.Join(p.Dir, "ca.p12") }

func (p *PKI) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, p.keytool, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("keytool %s: %w: %s", args[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

// NewPKI makes a CA in dir (kept if dir already holds one).
func NewPKI(ctx context.Context, dir, pass string) (*PKI, error) {
	kt, err := FindKeytool()
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, Pass: pass, keytool: kt}
	if _, err := os.Stat(p.TrustP12()); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=kremedy lab CA",
			"-ext", "bc:c", "-validity", "3650", "-keystore", p.caStore(), "-storetype", "PKCS12", "-storepass", pass, "-keypass", pass},
		{"-exportcert", "-rfc", "-alias", "ca", "-keystore", p.caStore(), "-storepass", pass, "-file", p.CAPEM()},
		{"-importcert", "-noprompt", "-alias", "ca", "-file", p.CAPEM(), "-keystore", p.TrustJKS(), "-storetype", "JKS", "-storepass", pass},
		{"-importcert", "-noprompt", "-alias", "ca", "-file", p.CAPEM(), "-keystore", p.TrustP12(), "-storetype", "PKCS12", "-storepass", pass},
	}
	for _, s := range steps {
		if err := p.run(ctx, s...); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Cert says what Issue makes.
type Cert struct {
	Name string // alias and file name
	// SANs as keytool's -ext SAN= takes them: "ip:127.0.0.1", "dns:localhost".
	SANs []string
	// Type is JKS or PKCS12.
	Type string
	// StorePass and KeyPass default to the PKI's password.
	StorePass, KeyPass string
	// StartDate is keytool's -startdate ("-2d" with Days 1 makes a
	// certificate that has expired); empty is now.
	StartDate string
	Days      int
}

// Issue makes a key store holding a key pair whose certificate the CA
// signed, with the CA's certificate as its chain, and returns its path.
func (p *PKI) Issue(ctx context.Context, c Cert) (string, error) {
	ext := map[string]string{"JKS": ".jks", "PKCS12": ".p12"}[c.Type]
	if ext == "" {
		return "", fmt.Errorf("store type %q: JKS or PKCS12", c.Type)
	}
	sp, kp := cmp.Or(c.StorePass, p.Pass), cmp.Or(c.KeyPass, p.Pass)
	if c.Type == "PKCS12" {
		kp = sp // keytool ignores another key password for PKCS12
	}
	days := c.Days
	if days == 0 {
		days = 3650
	}
	ks := filepath.Join(p.Dir, c.Name+ext)
	csr, crt := filepath.Join(p.Dir, c.Name+".csr"), filepath.Join(p.Dir, c.Name+".crt")
	gencert := []string{"-gencert", "-rfc", "-alias", "ca", "-keystore", p.caStore(), "-storepass", p.Pass,
		"-infile", csr, "-outfile", crt, "-validity", fmt.Sprint(days)}
	if len(c.SANs) > 0 {
		gencert = append(gencert, "-ext", "SAN="+strings.Join(c.SANs, ","))
	}
	if c.StartDate != "" {
		gencert = append(gencert, "-startdate", c.StartDate)
	}
	steps := [][]string{
		{"-genkeypair", "-alias", c.Name, "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=" + c.Name,
			"-validity", fmt.Sprint(days), "-keystore", ks, "-storetype", c.Type, "-storepass", sp, "-keypass", kp},
		{"-certreq", "-alias", c.Name, "-keystore", ks, "-storepass", sp, "-keypass", kp, "-file", csr},
		gencert,
		{"-importcert", "-noprompt", "-alias", "ca", "-file", p.CAPEM(), "-keystore", ks, "-storepass", sp},
		{"-importcert", "-alias", c.Name, "-file", crt, "-keystore", ks, "-storepass", sp, "-keypass", kp},
	}
	for _, s := range steps {
		if err := p.run(ctx, s...); err != nil {
			return "", err
		}
	}
	return ks, nil
}
