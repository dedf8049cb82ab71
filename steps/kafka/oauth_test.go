package kafka

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// TestTokenSource runs the client credentials grant against a token
// endpoint that checks what Kafka's HttpAccessTokenRetriever sends: Basic
// auth with the client's id and secret, grant_type and scope in a form.
func TestTokenSource(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, secret, ok := r.BasicAuth()
		r.ParseForm()
		if !ok || id != "kremedy" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "kafka admin" {
			http.Error(w, "bad form "+r.Form.Encode(), http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-" + r.Form.Get("scope"), "expires_in": 3600, "token_type": "bearer"})
	}))
	defer srv.Close()
	ctx := context.Background()
	ts, err := newTokenSource(srv.URL, map[string]string{"clientId": "kremedy", "clientSecret": "s3cret", "scope": "kafka admin"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if tok, err := ts.token(ctx); err != nil || tok != "tok-kafka admin" {
			t.Fatalf("token %q %v", tok, err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls to the endpoint: the token is not cached", calls.Load())
	}
	bad, _ := newTokenSource(srv.URL, map[string]string{"clientId": "kremedy", "clientSecret": "wrong"}, false)
	if _, err := bad.token(ctx); !errors.Is(err, ErrSecurity) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "clientSecret") {
		t.Fatalf("a refused client: %v", err)
	}
	if _, err := newTokenSource(srv.URL, map[string]string{"clientId": "kremedy"}, false); !errors.Is(err, ErrUnsupportedProperty) {
		t.Fatalf("no secret: %v", err)
	}
	f := filepath.Join(t.TempDir(), "token")
	os.WriteFile(f, []byte("from-a-file\n"), 0o600)
	fs, err := newTokenSource("file:"+f, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := fs.token(ctx); err != nil || tok != "from-a-file" {
		t.Fatalf("file token %q %v", tok, err)
	}
}

func TestUnsecuredToken(t *testing.T) {
	now := time.Unix(1700000000, 0)
	parts := strings.Split(UnsecuredToken("kremedy", now, time.Hour), ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("%q: want header.claims. with an empty signature", parts)
	}
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	c, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if string(h) != `{"alg":"none"}` || json.Unmarshal(c, &claims) != nil || claims["sub"] != "kremedy" || claims["exp"].(float64) != 1700003600 {
		t.Fatalf("header %s claims %s", h, c)
	}
	opt, _, err := oauthOpt(map[string]string{}, map[string]string{"unsecuredLoginStringClaim_sub": "kremedy"})
	if err != nil || opt == nil {
		t.Fatalf("%v", err)
	}
	if _, _, err := oauthOpt(map[string]string{}, map[string]string{}); !errors.Is(err, ErrUnsupportedProperty) {
		t.Fatalf("neither endpoint nor unsecured sub: %v", err)
	}
}

// TestTokenEndpointRedirectIsNeverFollowed: an https token endpoint that
// redirects to a plaintext server on another port (security review M5)
// gets one request; the plaintext server gets nothing (no Basic client
// credentials, no form); the error names the status and where it pointed,
// scheme and host only.
func TestTokenEndpointRedirectIsNeverFollowed(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var leaked atomic.Int32
			plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				leaked.Add(1)
				json.NewEncoder(w).Encode(map[string]any{"access_token": "from-the-plaintext-server", "expires_in": 3600})
			}))
			defer plain.Close()
			var hits atomic.Int32
			idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				http.Redirect(w, r, plain.URL+"/collect?key=hidden", code)
			}))
			defer idp.Close()
			ts, err := newTokenSource(idp.URL+"/token", map[string]string{"clientId": "kremedy", "clientSecret": "s3cret"}, false)
			if err != nil {
				t.Fatal(err)
			}
			// The IdP's own client trusts its certificate and follows
			// redirects; the token source must not.
			c := idp.Client()
			c.Timeout, c.CheckRedirect = ts.client.Timeout, ts.client.CheckRedirect
			ts.client = c
			tok, err := ts.token(context.Background())
			if leaked.Load() != 0 || hits.Load() != 1 {
				t.Errorf("plaintext server got %d requests, the endpoint %d; want 0 and 1", leaked.Load(), hits.Load())
			}
			want := fmt.Sprintf("HTTP %d %s to %s;", code, http.StatusText(code), plain.URL)
			if tok != "" || !errors.Is(err, ErrSecurity) || !strings.Contains(err.Error(), want) {
				t.Fatalf("token %q, error %v; want none and an error saying %q", tok, err, want)
			}
			for _, secret := range []string{"s3cret", "/collect", "hidden"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q names %q", err, secret)
				}
			}
		})
	}
}

// TestIdPErrorBodyIsTruncated: the OAuth server's error body is quoted in
// about 200 bytes, on one line (security review L10).
func TestIdPErrorBodyIsTruncated(t *testing.T) {
	big := `{"error":"invalid_client",` + "\n" + `"detail":"` + strings.Repeat("é", 300_000) + `"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, big, http.StatusUnauthorized)
	}))
	defer srv.Close()
	ts, _ := newTokenSource(srv.URL, map[string]string{"clientId": "kremedy", "clientSecret": "s3cret"}, false)
	_, err := ts.token(context.Background())
	if !errors.Is(err, ErrSecurity) {
		t.Fatalf("%v", err)
	}
	msg := err.Error()
	if len(msg) > 600 || !strings.Contains(msg, `{"error":"invalid_client", "detail":"éé`) || !strings.Contains(msg, "more bytes)") || strings.Contains(msg, "\n") || !utf8.ValidString(msg) {
		t.Fatalf("%d bytes: %q", len(msg), msg)
	}
}
