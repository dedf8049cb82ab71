package live

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestControllerSecurityNamesTheWayOn: a quorum ask the controllers'
// listener refused on its security names kafka.controller_client_properties;
// any other failure is left as it was.
func TestControllerSecurityNamesTheWayOn(t *testing.T) {
	if controllerSecurity(nil) != nil {
		t.Fatal("no error became one")
	}
	refused := errors.Join(fmt.Errorf("c1:9093: %w", kerr.UnsupportedSaslMechanism), fmt.Errorf("c2:9093: %w", kerr.UnsupportedSaslMechanism))
	got := controllerSecurity(refused)
	if !errors.Is(got, kerr.UnsupportedSaslMechanism) || !strings.Contains(got.Error(), "kafka.controller_client_properties") {
		t.Errorf("refused: %v", got)
	}
	untrusted := fmt.Errorf("c1:9093: %w", x509.UnknownAuthorityError{})
	if got := controllerSecurity(untrusted); !strings.Contains(got.Error(), "kafka.controller_client_properties") {
		t.Errorf("a certificate not trusted: %v", got)
	}
	other := errors.New("c1:9093: connection refused")
	if got := controllerSecurity(other); got != other {
		t.Errorf("another failure: %v", got)
	}
}
