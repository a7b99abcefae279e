package sktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Command is the main of the harness's commands (skinstall, skrun, the web tests' skserver):
// run gets a context that SIGINT or SIGTERM ends; an error other than that end is printed
// after the command's name and exits 1. A server the command started is stopped by run's
// own defers before Command exits.
func Command(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
