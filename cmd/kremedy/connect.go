package main

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/kremedy/kremedy/inventory"
	"github.com/kremedy/kremedy/inventory/connect"
)

// openCluster loads the inventory at path and opens its clients as every
// caller does (connect.Load); -v puts the adapters' own logs on stderr.
func openCluster(ctx context.Context, path string) (*connect.Clients, error) {
	cl, err := connect.Load(ctx, path, connect.Options{Log: adapterLog()})
	if err != nil {
		return nil, connectErr(err)
	}
	return cl, nil
}

// openInventory is openCluster for an inventory already loaded (inventory
// check reads it once, to say what it holds before it connects).
func openInventory(ctx context.Context, inv *inventory.Inventory) (*connect.Clients, error) {
	cl, err := connect.Open(ctx, inv, connect.Options{Log: adapterLog()})
	if err != nil {
		return nil, connectErr(err)
	}
	return cl, nil
}

// adapterLog is where the adapters log: stderr with -v, nowhere without.
func adapterLog() io.Writer {
	if verbose {
		return os.Stderr
	}
	return nil
}

// connectErr gives an error of package connect its exit code: 2 (usage)
// for what the inventory, a flag or a file they name causes, before
// anything was done; 1 otherwise.
func connectErr(err error) error {
	var ce *connect.ConfigError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return usageErr(err)
	}
	return failedErr(err)
}
