package notify_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/kremedy/kremedy/steps/notify"
)

// TestRedirectIsNeverFollowed: an https webhook that answers a redirect to
// a plaintext server on another port (security review M5) gets the event
// once; the plaintext server gets nothing (no token, no body); the
// notifier reports the refusal naming the status and where it pointed
// (scheme and host only), and does not retry it. The test's client is
// the TLS server's own, which follows redirects: the notifier must not.
func TestRedirectIsNeverFollowed(t *testing.T) {
	const token = "s3cr3t-token"
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			var mu sync.Mutex
			var leaked []string
			plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				leaked = append(leaked, fmt.Sprintf("%s %s Authorization=%q", r.Method, r.URL, r.Header.Get("Authorization")))
				mu.Unlock()
			}))
			defer plain.Close()
			var hits int
			hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				http.Redirect(w, r, plain.URL+"/collect?key=hidden", code)
			}))
			defer hook.Close()

			var p problems
			o := quick(&p)
			o.Client = hook.Client()
			n := notify.New(testRun, []notify.Target{{URL: hook.URL + "/hook", Token: token}}, o)
			n.RunStart(false)
			u := n.Close()

			mu.Lock()
			defer mu.Unlock()
			if len(leaked) != 0 {
				t.Errorf("the plaintext server got %q", leaked)
			}
			if hits != 1 {
				t.Errorf("the webhook got %d requests; want 1 (a redirect is not retried)", hits)
			}
			lines := p.all()
			if len(lines) != 1 {
				t.Fatalf("problems %q; want one", lines)
			}
			want := fmt.Sprintf("HTTP %d %s to %s;", code, http.StatusText(code), plain.URL)
			if !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "does not follow redirects") {
				t.Errorf("problem %q; want it to say %q", lines[0], want)
			}
			for _, secret := range []string{token, "/collect", "hidden"} {
				if strings.Contains(lines[0], secret) {
					t.Errorf("problem %q names %q", lines[0], secret)
				}
			}
			if len(u) != 1 || !strings.Contains(u[0].Line, "1 events not delivered") {
				t.Errorf("undelivered %v", u)
			}
		})
	}
}
