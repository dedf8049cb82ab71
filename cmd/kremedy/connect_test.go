package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kremedy/kremedy/inventory/connect"
)

// TestConnectErrExitCodes: what the inventory or a file it names causes
// (connect.ConfigError, wrapped or not) exits 2, any other failure to
// open the clients 1, and the error's text is kept.
func TestConnectErrExitCodes(t *testing.T) {
	cfg := &connect.ConfigError{Err: errors.New("kafka.client_properties: no such file; nothing was done")}
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{cfg, exitUsage},
		{fmt.Errorf("opening: %w", cfg), exitUsage},
		{errors.New("unable to create client"), exitFailed},
	} {
		err := connectErr(tc.err)
		if code := exitCode(context.Background(), err); code != tc.code || (err != nil && err.Error() != tc.err.Error()) {
			t.Errorf("connectErr(%v): exit %d (%v), want %d with the same text", tc.err, code, err, tc.code)
		}
	}
}
