// Package javatls reads a Java client's TLS settings as Kafka's clients
// read them (ssl.truststore.*, ssl.keystore.*, ssl.key.password,
// ssl.endpoint.identification.algorithm): trust and key stores in JKS,
// PKCS12 or PEM (files or inline), told apart by content as Java's
// keystore.type.compat does, encrypted PKCS#8 keys, into a tls.Config.
// ZooKeeper's zookeeper.ssl.* settings are read through the same names.
package javatls

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"github.com/youmark/pkcs8"
	"software.sslmate.com/src/go-pkcs12"
)

// Store formats, told apart by content as Java's KeyStore does
// (keystore.type.compat: a "JKS" store may be PKCS12 and the other way
// round), whatever ssl.*.type says.
const (
	formatPEM    = "PEM"
	formatJKS    = "JKS"
	formatPKCS12 = "PKCS12"
	formatJCEKS  = "JCEKS"
)

func sniff(b []byte) string {
	switch {
	case len(b) >= 4 && bytes.Equal(b[:4], []byte{0xfe, 0xed, 0xfe, 0xed}):
		return formatJKS
	case len(b) >= 4 && bytes.Equal(b[:4], []byte{0xce, 0xce, 0xce, 0xce}):
		return formatJCEKS
	case bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("-----BEGIN")):
		return formatPEM
	case len(b) > 0 && b[0] == 0x30: // a DER SEQUENCE: PKCS#12's PFX
		return formatPKCS12
	}
	return ""
}

// store is one ssl.truststore.* or ssl.keystore.* group read from its file.
type store struct {
	prefix   string // "ssl.truststore" or "ssl.keystore"
	location string
	format   string
	data     []byte
	password string
	set      bool // the password property is present
}

func readStore(props map[string]string, prefix string) (*store, error) {
	loc := props[prefix+".location"]
	if loc == "" {
		return nil, nil
	}
	b, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("%s.location: %w", prefix, err)
	}
	s := &store{prefix: prefix, location: loc, data: b}
	s.password, s.set = props[prefix+".password"]
	s.format = sniff(b)
	declared := strings.ToUpper(props[prefix+".type"])
	switch {
	case s.format == "":
		return nil, fmt.Errorf("%w: %s.location=%s is neither PEM, JKS nor PKCS12", ErrUnsupported, prefix, loc)
	case s.format == formatJCEKS:
		return nil, fmt.Errorf("%w: %s.location=%s is a JCEKS store; convert it: keytool -importkeystore -srckeystore %s -srcstoretype JCEKS -destkeystore store.p12 -deststoretype PKCS12", ErrUnsupported, prefix, loc, loc)
	case declared == formatPEM && s.format != formatPEM:
		return nil, fmt.Errorf("%w: %s.type=PEM but %s is a %s store (Kafka refuses this too): set %s.type=%s", ErrUnsupported, prefix, loc, s.format, prefix, s.format)
	case declared != "" && declared != formatPEM && s.format == formatPEM:
		return nil, fmt.Errorf("%w: %s.type=%s but %s holds PEM text (Kafka refuses this too): set %s.type=PEM", ErrUnsupported, prefix, declared, loc, prefix)
	}
	if s.format == formatPEM && s.set && prefix == "ssl.truststore" {
		return nil, fmt.Errorf("%w: ssl.truststore.password with a PEM truststore (Kafka refuses it: PEM trust stores have no password); remove the line", ErrUnsupported)
	}
	return s, nil
}

func (s *store) wrap(err error) error {
	return fmt.Errorf("%s.location=%s (%s): %w", s.prefix, s.location, s.format, err)
}

// trustPool reads the CA certificates the client trusts; nil means the
// system's.
func trustPool(props map[string]string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if inline := props["ssl.truststore.certificates"]; inline != "" {
		if !pool.AppendCertsFromPEM([]byte(inline)) {
			return nil, fmt.Errorf("%w: ssl.truststore.certificates holds no PEM certificate", ErrUnsupported)
		}
		return pool, nil
	}
	s, err := readStore(props, "ssl.truststore")
	if s == nil || err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	switch s.format {
	case formatPEM:
		if !pool.AppendCertsFromPEM(s.data) {
			return nil, s.wrap(errors.New("no PEM certificate in it"))
		}
		return pool, nil
	case formatJKS:
		if !s.set {
			return nil, s.wrap(fmt.Errorf("%w: ssl.truststore.password is unset; Java then skips the store's integrity check, kremedy does not: add the password (the one keytool -list asks for)", ErrUnsupported))
		}
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(s.data), []byte(s.password)); err != nil {
			return nil, s.wrap(fmt.Errorf("%w (is ssl.truststore.password right?)", err))
		}
		for _, a := range sortedAliases(ks) {
			if e, err := ks.GetTrustedCertificateEntry(a); err == nil {
				c, err := x509.ParseCertificate(e.Certificate.Content)
				if err != nil {
					return nil, s.wrap(fmt.Errorf("entry %q: %w", a, err))
				}
				certs = append(certs, c)
			}
		}
	case formatPKCS12:
		if certs, err = pkcs12.DecodeTrustStore(s.data, s.password); err != nil {
			return nil, s.wrap(fmt.Errorf("%w (is ssl.truststore.password right? a PKCS12 truststore holds certificates imported with keytool -importcert)", err))
		}
	}
	if len(certs) == 0 {
		return nil, s.wrap(errors.New("no trusted certificate entry in it (Java trusts only those, not a key entry's chain)"))
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func sortedAliases(ks keystore.KeyStore) []string {
	a := ks.Aliases()
	sort.Strings(a)
	return a
}

// clientCerts reads the client's own certificate and key for mutual TLS.
func clientCerts(props map[string]string) ([]tls.Certificate, error) {
	keyPass, hasKeyPass := props["ssl.key.password"]
	if key := props["ssl.keystore.key"]; key != "" {
		chain := props["ssl.keystore.certificate.chain"]
		if chain == "" {
			return nil, fmt.Errorf("%w: ssl.keystore.key needs ssl.keystore.certificate.chain (Kafka refuses it too)", ErrUnsupported)
		}
		c, err := pemKeyPair([]byte(chain), []byte(key), keyPass)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.key: %w", err)
		}
		return []tls.Certificate{c}, nil
	}
	s, err := readStore(props, "ssl.keystore")
	if s == nil || err != nil {
		return nil, err
	}
	if s.format == formatPEM {
		if s.set {
			return nil, s.wrap(fmt.Errorf("%w: ssl.keystore.password with a PEM keystore (Kafka refuses it): use ssl.key.password for an encrypted key", ErrUnsupported))
		}
		c, err := pemKeyPair(s.data, s.data, keyPass)
		if err != nil {
			return nil, s.wrap(err)
		}
		return []tls.Certificate{c}, nil
	}
	if !s.set {
		return nil, s.wrap(fmt.Errorf("%w: ssl.keystore.password is unset (Kafka refuses a keystore without it too)", ErrUnsupported))
	}
	if !hasKeyPass {
		keyPass = s.password // Kafka: the key password defaults to the store's
	}
	if s.format == formatPKCS12 {
		return pkcs12Certs(s, keyPass)
	}
	return jksCerts(s, keyPass)
}

// pkcs12Certs reads the key and its chain from a PKCS12 keystore, decoded
// with the store's password or, when that fails, with a different keyPass.
func pkcs12Certs(s *store, keyPass string) ([]tls.Certificate, error) {
	key, leaf, cas, err := pkcs12.DecodeChain(s.data, s.password)
	if err != nil && keyPass != s.password {
		key, leaf, cas, err = pkcs12.DecodeChain(s.data, keyPass)
	}
	if err != nil {
		return nil, s.wrap(fmt.Errorf("%w (is ssl.keystore.password right?)", err))
	}
	c, err := keyWithLeaf(key, append([]*x509.Certificate{leaf}, cas...))
	if err != nil {
		return nil, s.wrap(err)
	}
	return []tls.Certificate{c}, nil
}

// jksCerts reads a keystore that is neither PEM nor PKCS12 as JKS (which
// refuses any other format): every private key entry, in alias order,
// each with its certificate chain, its key under keyPass.
func jksCerts(s *store, keyPass string) ([]tls.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(s.data), []byte(s.password)); err != nil {
		return nil, s.wrap(fmt.Errorf("%w (is ssl.keystore.password right?)", err))
	}
	var out []tls.Certificate
	for _, a := range sortedAliases(ks) {
		if !ks.IsPrivateKeyEntry(a) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(a, []byte(keyPass))
		if err != nil {
			return nil, s.wrap(fmt.Errorf("key %q: %w (is ssl.key.password right?)", a, err))
		}
		key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
		if err != nil {
			return nil, s.wrap(fmt.Errorf("key %q: %w", a, err))
		}
		c := tls.Certificate{PrivateKey: key}
		for _, cc := range e.CertificateChain {
			c.Certificate = append(c.Certificate, cc.Content)
		}
		if len(c.Certificate) == 0 {
			return nil, s.wrap(fmt.Errorf("key %q has no certificate", a))
		}
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, s.wrap(fmt.Errorf("key %q: %w", a, err))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, s.wrap(errors.New("no private key entry in it"))
	}
	return out, nil
}

// keyWithLeaf puts first the certificate of key (a PKCS12 store lists its
// certificate bags in any order, trusted CA entries among them) and the
// others after it as the chain.
func keyWithLeaf(key any, certs []*x509.Certificate) (tls.Certificate, error) {
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, fmt.Errorf("private key of type %T", key)
	}
	c := tls.Certificate{PrivateKey: key}
	for _, cert := range certs {
		if eq, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(pub.Public()) && c.Leaf == nil {
			c.Leaf = cert
			c.Certificate = append([][]byte{cert.Raw}, c.Certificate...)
			continue
		}
		c.Certificate = append(c.Certificate, cert.Raw)
	}
	if c.Leaf == nil {
		return tls.Certificate{}, errors.New("no certificate for the private key")
	}
	return c, nil
}

// pemKeyPair reads a certificate chain and a PKCS#8 private key from PEM,
// decrypting an ENCRYPTED PRIVATE KEY with ssl.key.password as Kafka does.
func pemKeyPair(certPEM, keyPEM []byte, password string) (tls.Certificate, error) {
	var keyBlock *pem.Block
	var chain []byte
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") && keyBlock == nil {
			keyBlock = b
		}
	}
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, pem.EncodeToMemory(b)...)
		}
	}
	if keyBlock == nil {
		return tls.Certificate{}, errors.New("no PEM private key")
	}
	if len(chain) == 0 {
		return tls.Certificate{}, errors.New("no PEM certificate")
	}
	var keyDER []byte
	switch {
	case keyBlock.Type == "ENCRYPTED PRIVATE KEY":
		if password == "" {
			return tls.Certificate{}, fmt.Errorf("%w: the private key is encrypted and ssl.key.password is unset", ErrUnsupported)
		}
		key, err := pkcs8.ParsePKCS8PrivateKey(keyBlock.Bytes, []byte(password))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("decrypt the private key: %w (is ssl.key.password right?)", err)
		}
		if keyDER, err = x509.MarshalPKCS8PrivateKey(key); err != nil {
			return tls.Certificate{}, err
		}
	case keyBlock.Headers["Proc-Type"] != "":
		return tls.Certificate{}, fmt.Errorf("%w: a legacy OpenSSL-encrypted key (Proc-Type header), which Kafka does not read either: convert it with openssl pkcs8 -topk8 -v2 aes-256-cbc", ErrUnsupported)
	default:
		if password != "" {
			return tls.Certificate{}, fmt.Errorf("%w: ssl.key.password is set but the PEM private key is not encrypted (Kafka refuses this too)", ErrUnsupported)
		}
		keyDER = keyBlock.Bytes
	}
	keyOut := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if keyBlock.Type != "ENCRYPTED PRIVATE KEY" {
		keyOut = pem.EncodeToMemory(keyBlock)
	}
	return tls.X509KeyPair(chain, keyOut)
}

// ErrUnsupported is a TLS setting kremedy cannot honour; it refuses
// rather than silently connecting some other way.
var ErrUnsupported = errors.New("unsupported Kafka client property")

// Config reads the ssl.* client properties into a TLS configuration as
// Kafka's Java client would use them.
func Config(props map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	pool, err := trustPool(props)
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = pool
	if cfg.Certificates, err = clientCerts(props); err != nil {
		return nil, err
	}
	alg, set := props["ssl.endpoint.identification.algorithm"]
	switch {
	case !set || strings.EqualFold(alg, "https"):
		// Kafka's default since 2.0: the broker's name is checked.
	case alg == "":
		// Java's "" disables hostname checks only; the chain is still verified.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = chainOnly(cfg)
	default:
		return nil, fmt.Errorf("%w: ssl.endpoint.identification.algorithm=%s (Java knows https or empty)", ErrUnsupported, alg)
	}
	return cfg, nil
}

// chainOnly verifies the broker's chain against the trusted CAs without
// checking its name.
func chainOnly(cfg *tls.Config) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		var certs []*x509.Certificate
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs = append(certs, c)
		}
		if len(certs) == 0 {
			return errors.New("no server certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: cfg.RootCAs, Intermediates: inter})
		return err
	}
}

// ZooKeeper reads the zookeeper.ssl.* settings Kafka's brokers and tools
// use to reach ZooKeeper over TLS (zookeeper.ssl.client.enable=true, the
// zookeeper.ssl.{keystore,truststore}.{location,password,type} stores,
// zookeeper.ssl.endpoint.identification.enable) into a TLS configuration.
// Errors name the stores by Kafka's client names (ssl.truststore.…).
func ZooKeeper(props map[string]string) (*tls.Config, error) {
	if !strings.EqualFold(props["zookeeper.ssl.client.enable"], "true") && !strings.EqualFold(props["zookeeper.client.secure"], "true") {
		return nil, fmt.Errorf("%w: the file does not turn TLS on: set zookeeper.ssl.client.enable=true, as the brokers' server.properties does", ErrUnsupported)
	}
	mapped := map[string]string{}
	for _, store := range []string{"keystore", "truststore"} {
		for _, k := range []string{"location", "password", "type"} {
			if v, ok := props["zookeeper.ssl."+store+"."+k]; ok {
				mapped["ssl."+store+"."+k] = v
			}
		}
	}
	if strings.EqualFold(props["zookeeper.ssl.endpoint.identification.enable"], "false") || strings.EqualFold(props["zookeeper.ssl.hostnameVerification"], "false") {
		mapped["ssl.endpoint.identification.algorithm"] = ""
	}
	cfg, err := Config(mapped)
	if err != nil {
		return nil, fmt.Errorf("zookeeper.ssl.* (read as Kafka's ssl.* names): %w", err)
	}
	return cfg, nil
}
