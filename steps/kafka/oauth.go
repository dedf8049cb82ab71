package kafka

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// Kafka's login callback handlers for OAUTHBEARER: the OAuth client
// credentials flow (KIP-768; the package moved in 3.4) and the default,
// unsecured tokens for development clusters.
const (
	oauthHandler      = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
	oauthHandlerOld   = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
	oauthHandlerUnsec = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler"
)

// oauthOpt reads OAUTHBEARER as Kafka's login module does: with
// sasl.oauthbearer.token.endpoint.url, tokens from the OAuth server's
// client credentials grant (clientId, clientSecret and scope from
// sasl.jaas.config; an https:// or http:// endpoint, or a file: URL
// holding a token), cached until shortly before they expire; without it,
// Kafka's default unsecured tokens (unsecuredLoginStringClaim_sub), which
// only a development cluster accepts.
func oauthOpt(props, jaasOpts map[string]string) (kgo.Opt, []string, error) {
	handler := props["sasl.login.callback.handler.class"]
	endpoint := props["sasl.oauthbearer.token.endpoint.url"]
	switch {
	case endpoint != "":
		if handler != "" && handler != oauthHandler && handler != oauthHandlerOld {
			return nil, nil, fmt.Errorf("%w: sasl.login.callback.handler.class=%s: kremedy runs Kafka's own OAuthBearerLoginCallbackHandler only", ErrUnsupportedProperty, handler)
		}
		src, err := newTokenSource(endpoint, jaasOpts, strings.EqualFold(props["sasl.oauthbearer.header.urlencode"], "true"))
		if err != nil {
			return nil, nil, err
		}
		var secrets []string
		if s := jaasOpts["clientSecret"]; s != "" {
			secrets = append(secrets, s)
		}
		return kgo.SASL(oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := src.token(ctx)
			return oauth.Auth{Token: tok}, err
		})), secrets, nil
	case handler != "" && handler != oauthHandlerUnsec:
		return nil, nil, fmt.Errorf("%w: sasl.login.callback.handler.class=%s without sasl.oauthbearer.token.endpoint.url: kremedy knows the client credentials flow (set the token endpoint) and Kafka's unsecured tokens", ErrUnsupportedProperty, handler)
	}
	sub := jaasOpts["unsecuredLoginStringClaim_sub"]
	if sub == "" {
		return nil, nil, fmt.Errorf("%w: sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url with clientId and clientSecret in sasl.jaas.config (the client credentials flow), or unsecuredLoginStringClaim_sub for a development cluster's unsecured tokens", ErrUnsupportedProperty)
	}
	life := 3600
	if v := jaasOpts["unsecuredLoginLifetimeSeconds"]; v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			life = n
		}
	}
	return kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		return oauth.Auth{Token: UnsecuredToken(sub, time.Now(), time.Duration(life)*time.Second)}, nil
	})), nil, nil
}

// UnsecuredToken is the token Kafka's OAuthBearerUnsecuredLoginCallbackHandler
// makes: a JWS with "alg":"none", the subject, iat and exp, and an empty
// signature.
func UnsecuredToken(sub string, now time.Time, life time.Duration) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"none"}`))
	claims, _ := json.Marshal(map[string]any{"sub": sub, "iat": float64(now.UnixMilli()) / 1000, "exp": float64(now.Add(life).UnixMilli()) / 1000})
	return head + "." + enc.EncodeToString(claims) + "."
}

// tokenSource fetches and caches access tokens.
type tokenSource struct {
	endpoint          string
	id, secret, scope string
	urlencode         bool
	client            *http.Client
	mu                sync.Mutex
	cached            string
	until             time.Time
}

func newTokenSource(endpoint string, jaasOpts map[string]string, urlencode bool) (*tokenSource, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.token.endpoint.url: %w", err)
	}
	ts := &tokenSource{endpoint: endpoint, id: jaasOpts["clientId"], secret: jaasOpts["clientSecret"], scope: jaasOpts["scope"],
		urlencode: urlencode, client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect}}
	switch u.Scheme {
	case "file":
	case "http", "https":
		if ts.id == "" || ts.secret == "" {
			return nil, fmt.Errorf("%w: the client credentials flow needs clientId=\"…\" and clientSecret=\"…\" in sasl.jaas.config", ErrUnsupportedProperty)
		}
	default:
		return nil, fmt.Errorf("%w: sasl.oauthbearer.token.endpoint.url=%s: an https://, http:// or file: URL", ErrUnsupportedProperty, endpoint)
	}
	return ts, nil
}

// noRedirect stops the token request at a redirect, which fetch refuses:
// Go's client would re-POST the form to wherever the Location says, and
// keeps the Basic client credentials when only the port or the scheme
// changes (https to http).
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxIdPText bounds how much of the OAuth server's error body an error
// quotes: the error can reach the journal and the webhooks.
const maxIdPText = 200

// excerpt is at most n bytes of an answer's body, on one line, cut at a
// character and saying how long the rest was.
func excerpt(b []byte, n int) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// token returns the cached token while it has more than a fifth of its
// life left (Kafka refreshes at 80% by default), else a new one.
func (ts *tokenSource) token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.cached != "" && time.Now().Before(ts.until) {
		return ts.cached, nil
	}
	tok, life, err := ts.fetch(ctx)
	if err != nil {
		return "", err
	}
	ts.cached, ts.until = tok, time.Now().Add(life*4/5)
	return tok, nil
}

func (ts *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	if p, ok := strings.CutPrefix(ts.endpoint, "file:"); ok {
		b, err := os.ReadFile(strings.TrimPrefix(p, "//"))
		if err != nil {
			return "", 0, fmt.Errorf("OAuth token file: %w", err)
		}
		return strings.TrimSpace(string(b)), time.Minute, nil
	}
	form := "grant_type=client_credentials"
	if s := strings.TrimSpace(ts.scope); s != "" {
		form += "&scope=" + url.QueryEscape(s)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.endpoint, strings.NewReader(form))
	if err != nil {
		return "", 0, err
	}
	id, secret := ts.id, ts.secret
	if ts.urlencode {
		id, secret = url.QueryEscape(id), url.QueryEscape(secret)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(id+":"+secret)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := ts.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%w: OAuth token endpoint %s: %v", ErrSecurity, ts.endpoint, err)
	}
	defer resp.Body.Close()
	if c := resp.StatusCode; c >= 300 && c < 400 {
		to := "with no usable Location"
		if u, err := resp.Location(); err == nil && u.Host != "" {
			to = "to " + u.Scheme + "://" + u.Host // never its path or query
		}
		return "", 0, fmt.Errorf("%w: OAuth token endpoint %s answered HTTP %d %s %s; kremedy does not follow redirects, so the client credentials were not sent there and there is no token: set sasl.oauthbearer.token.endpoint.url to the final URL", ErrSecurity, ts.endpoint, c, http.StatusText(c), to)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("%w: OAuth token endpoint %s refused client %q: %s %s: check clientId and clientSecret in sasl.jaas.config", ErrSecurity, ts.endpoint, ts.id, resp.Status, excerpt(body, maxIdPText))
	}
	var out struct {
		AccessToken string  `json:"access_token"`
		ExpiresIn   float64 `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.AccessToken == "" {
		return "", 0, fmt.Errorf("%w: OAuth token endpoint %s: no access_token in its answer (%v)", ErrSecurity, ts.endpoint, err)
	}
	life := time.Duration(out.ExpiresIn * float64(time.Second))
	if life <= 0 {
		life = time.Minute
	}
	return out.AccessToken, life, nil
}
